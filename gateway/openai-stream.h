// One completion request answered from its job's events: the whole OpenAI response at job_done,
// or Server-Sent Events in OpenAI's chunk format. Knows nothing of the broker link: the route
// feeds it the submit's outcome and the job's events, and cancels the job when the client goes.
//
// Streaming: the status line waits for the first token (or job_done), so a job that fails before
// any text still gets its HTTP error status; a keep-alive that falls due first commits to 200
// (an error after that is an `error` event, as OpenAI streams one). Every chunk carries the
// same id and created; finish_reason is null until the last chunk; a usage chunk follows when
// asked for; then `data: [DONE]`. A restarted attempt (failover) streams the same text again
// (the broker gave every attempt the same seed): the bytes the client already has are skipped.
//
// With include_reasoning the job streams a thinking model's "<think>...</think>" block as it came
// (job_params.show_thinking), and the answer splits it off (common/think-filter.h): reasoning
// goes as `reasoning_content` (the delta's, or the message's), the rest as `content`.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/think-filter.h"
#include "gateway/broker-link.h"
#include "gateway/http.h"
#include "gateway/openai-request.h"

namespace hearth::gateway {

// How often a stream that waits (queued, or a long prompt) gets an SSE comment, so that proxies and
// clients with read timeouts keep the connection: the OpenAI streams and the dashboard's job view.
inline constexpr auto k_keep_alive = std::chrono::seconds(15);

class openai_answer {
 public:
  openai_answer(openai_request r, int64_t created, std::shared_ptr<responder> out);

  // The broker accepted the submit as job `job_id`.
  void accepted(uint64_t job_id);
  // The broker refused the submit or did not answer: the error goes to the client.
  void refused(const link_failure& f);
  // One event of the job, in the broker's order. Returns true when the answer has ended.
  bool event(const job_event& e);
  // Due every keep-alive period: a stream that wrote nothing since the last one gets a comment
  // (starting the stream if it had not started). A whole response cannot be kept alive.
  void keep_alive();

  bool ended() const { return ended_; }
  uint64_t job_id() const { return job_id_; }
  bool streaming() const { return request_.stream; }

 private:
  void tokens(const wire::job_tokens& t);
  void done(const wire::job_done& d);
  void fail(const http_response& error);
  void start_stream();
  void send_text(bool flush);

  openai_request request_;
  int64_t created_ = 0;
  std::shared_ptr<responder> out_;
  uint64_t job_id_ = 0;
  bool started_ = false;  // the stream's status line and first chunk went out
  bool ended_ = false;
  bool wrote_ = false;  // something was written since the last keep_alive()
  uint32_t attempt_ = 0;
  uint64_t attempt_bytes_ = 0;  // text bytes the current attempt has produced
  uint64_t taken_bytes_ = 0;    // text bytes taken for the client (sent, or held in pending_)
  std::string pending_;         // streaming: taken, not sent yet (an unfinished UTF-8 character)
  std::string text_;            // whole response: the current attempt's text
  // include_reasoning, streaming: the reasoning apart from the answer (chat completions only; a
  // whole response is split by openai_response_body).
  std::optional<think_filter> reasoning_;
};

// The length of the longest prefix of `s` that ends on a UTF-8 character boundary (a character
// cut at the end is left for the next piece; invalid bytes count as characters).
size_t utf8_whole_prefix(std::string_view s);

}  // namespace hearth::gateway
