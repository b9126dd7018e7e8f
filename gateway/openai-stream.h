// One completion request answered from its job's events: the whole OpenAI response at job_done,
// or Server-Sent Events in OpenAI's chunk format. Knows nothing of the broker link: the route
// feeds it the submit's outcome and the job's events, and cancels the job when the client goes.
//
// The job's output is read as output events (gateway/job-output.h), whether the job wrote events
// (tools, logprobs, n > 1) or text: one path for both.
//
// Streaming: the status line waits for the first chunk (or job_done), so a job that fails before
// any text still gets its HTTP error status; a keep-alive that falls due first commits to 200
// (an error after that is an `error` event, as OpenAI streams one). Every chunk carries the
// same id and created; each choice's first chat chunk names the role; a chunk is about one
// choice (`index`); content, reasoning_content and logprobs of consecutive events go in one
// chunk, a tool call in its own (`delta.tool_calls` with index, id, type, name and the whole
// arguments, as OpenAI's first chunk of a call has them); finish_reason is null until a
// choice's last chunk; a usage chunk follows when asked for; then `data: [DONE]`. A restarted
// attempt (failover) streams the same output again (the broker gave every attempt the same
// seed): the bytes the client already has are skipped.
//
// With include_reasoning a thinking model's reasoning goes as `reasoning_content` (the delta's,
// or the message's): the job's reasoning events, or the think block a plain-text job streamed
// as it came (job_params.show_thinking), split off with common/think-filter.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "gateway/broker-link.h"
#include "gateway/http.h"
#include "gateway/job-answer.h"
#include "gateway/job-output.h"
#include "gateway/openai-json.h"
#include "gateway/openai-request.h"

namespace hearth::gateway {

// How often a stream that waits (queued, or a long prompt) gets an SSE comment, so that proxies and
// clients with read timeouts keep the connection: the OpenAI streams and the dashboard's job view.
inline constexpr auto k_keep_alive = std::chrono::seconds(15);

class openai_answer : public job_answer {
 public:
  openai_answer(openai_request r, int64_t created, std::shared_ptr<responder> out);

  void accepted(uint64_t job_id) override;
  // A stream that wrote nothing since the last one gets a comment (starting the stream if it
  // had not started). A whole response cannot be kept alive.
  void keep_alive() override;

  bool ended() const override { return ended_; }
  uint64_t job_id() const override { return job_id_; }
  bool streaming() const override { return request_.stream; }

 private:
  // What the stream has said of one choice.
  struct choice_state {
    bool finished = false;       // its finish_reason went out
    uint32_t calls = 0;          // tool calls streamed
    uint64_t logprob_bytes = 0;  // text bytes its streamed logprobs' tokens cover
  };

  void tokens(const wire::job_tokens& t) override;
  void restarted(uint32_t attempt) override { stream_.restarted(attempt); }
  void done(const wire::job_done& d) override;
  void fail(const http_response& error) override;
  void start_stream();
  void send(const std::vector<wire::output_event>& events);
  void send_piece(const chunk_piece& p);
  // The events, or the 500 for output that is not what the job should have written.
  bool take(result<std::vector<wire::output_event>>& events);

  openai_request request_;
  int64_t created_ = 0;
  std::shared_ptr<responder> out_;
  uint64_t job_id_ = 0;
  bool started_ = false;  // the stream's status line and first chunk went out
  bool ended_ = false;
  bool wrote_ = false;  // something was written since the last keep_alive()
  job_stream stream_;
  std::vector<choice_state> choices_;  // streaming: at least the request's n
};

}  // namespace hearth::gateway
