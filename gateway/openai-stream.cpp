#include "gateway/openai-stream.h"

#include <algorithm>

namespace hearth::gateway {

openai_answer::openai_answer(openai_request r, int64_t created, std::shared_ptr<responder> out)
    : request_(std::move(r)),
      created_(created),
      out_(std::move(out)),
      stream_(job_output_mode_of(request_.submit.params), request_.stream),
      choices_(std::clamp<int32_t>(request_.submit.params.api.n, 1, int32_t(k_max_choices))) {}

void openai_answer::accepted(uint64_t job_id) {
  job_id_ = job_id;
}

bool openai_answer::take(result<std::vector<wire::output_event>>& events) {
  if (events) return true;
  fail(error_response(500, "job " + std::to_string(job_id_) + "'s output: " + events.message(),
                      "server_error"));
  return false;
}

void openai_answer::tokens(const wire::job_tokens& t) {
  auto events = stream_.tokens(t);
  if (take(events)) send(*events);
}

void openai_answer::send_piece(const chunk_piece& p) {
  if (p.empty()) return;
  if (!started_) start_stream();
  out_->event(openai_chunk(request_, job_id_, created_, p));
  wrote_ = true;
}

void openai_answer::send(const std::vector<wire::output_event>& events) {
  const bool chat = request_.endpoint == openai_endpoint::chat_completions;
  chunk_piece piece;
  // Sends what the piece holds and starts the next, about choice `index`.
  auto flush = [&](uint32_t index) {
    send_piece(piece);
    piece = chunk_piece{};
    piece.index = index;
  };
  for (const auto& e : events) {
    if (e.choice >= choices_.size()) choices_.resize(e.choice + 1);  // < k_max_choices
    choice_state& c = choices_[e.choice];
    if (c.finished) continue;  // nothing of a choice follows its finish
    if (piece.index != e.choice) flush(e.choice);
    switch (e.kind) {
      case wire::output_event_kind::content:
        piece.content += e.text;
        break;
      case wire::output_event_kind::reasoning:
        if (!chat || !request_.include_reasoning) break;
        // Reasoning after text starts a chunk of its own, so that the order stays.
        if (!piece.content.empty()) flush(e.choice);
        piece.reasoning += e.text;
        break;
      case wire::output_event_kind::logprobs:
        if (!request_.submit.params.api.logprobs) break;
        if (piece.logprobs.empty()) piece.text_offset = c.logprob_bytes;
        for (const auto& p : e.probs) {
          c.logprob_bytes +=
              p.sampled.bytes.empty() ? p.sampled.token.size() : p.sampled.bytes.size();
          piece.logprobs.push_back(p);
        }
        break;
      case wire::output_event_kind::tool_call:
        if (!chat) break;
        // A call goes in a chunk of its own, after the text before it.
        flush(e.choice);
        piece.tool_calls.emplace_back(c.calls++, e.call);
        flush(e.choice);
        break;
      case wire::output_event_kind::finish:
        piece.finish_reason = e.text;
        c.finished = true;
        flush(e.choice);
        break;
    }
  }
  flush(0);
}

void openai_answer::start_stream() {
  started_ = true;
  wrote_ = true;
  out_->start_events();
  // OpenAI's first chat chunk of each choice names the role and carries no text yet.
  if (request_.endpoint == openai_endpoint::chat_completions) {
    for (uint32_t i = 0; i < choices_.size(); ++i) {
      chunk_piece role;
      role.index = i;
      role.role = true;
      out_->event(openai_chunk(request_, job_id_, created_, role));
    }
  }
}

void openai_answer::done(const wire::job_done& d) {
  if (d.state != wire::job_state::completed) return fail(openai_job_error(d));
  auto events = stream_.finish();
  if (!take(events)) return;
  if (!request_.stream) {
    ended_ = true;
    job_output out;
    out.choices.resize(choices_.size());
    out.add(*events);
    out_->reply(openai_response(request_, job_id_, created_, out, d));
    return;
  }
  send(*events);
  ended_ = true;
  if (!started_) start_stream();
  for (uint32_t i = 0; i < choices_.size(); ++i) {
    if (choices_[i].finished) continue;
    // A choice that made calls and got no finish event ended with them (choice_finish_reason).
    chunk_piece last;
    last.index = i;
    last.finish_reason = choices_[i].calls > 0 ? std::string("tool_calls")
                                               : std::string(finish_reason_of_stop(d.stop_reason));
    out_->event(openai_chunk(request_, job_id_, created_, last));
  }
  if (request_.include_usage) out_->event(openai_usage_chunk(request_, job_id_, created_, d));
  out_->event("[DONE]");
  out_->end_events();
}

void openai_answer::fail(const http_response& error) {
  if (ended_) return;
  ended_ = true;
  if (!started_) return out_->reply(error);
  // The status line has gone: the error goes as an event (OpenAI's clients raise it), and the
  // stream ends without [DONE], so that no client takes the text for a whole answer.
  out_->event(error.body);
  out_->end_events();
}

void openai_answer::keep_alive() {
  if (ended_ || !request_.stream) return;
  if (!wrote_) {
    if (!started_) start_stream();
    out_->comment("keep-alive");
  }
  wrote_ = false;
}

}  // namespace hearth::gateway
