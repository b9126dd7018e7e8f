#include "gateway/openai-stream.h"

#include <algorithm>
#include <type_traits>

#include "gateway/openai-json.h"

namespace hearth::gateway {

size_t utf8_whole_prefix(std::string_view s) {
  // The last lead byte within a character's reach of the end, and whether its character is cut.
  const size_t n = s.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    size_t need = 1;
    if ((c & 0xE0) == 0xC0) {
      need = 2;
    } else if ((c & 0xF0) == 0xE0) {
      need = 3;
    } else if ((c & 0xF8) == 0xF0) {
      need = 4;
    }
    return back < need ? n - back : n;
  }
  return n;
}

openai_answer::openai_answer(openai_request r, int64_t created, std::shared_ptr<responder> out)
    : request_(std::move(r)), created_(created), out_(std::move(out)) {
  if (request_.include_reasoning && request_.endpoint == openai_endpoint::chat_completions)
    reasoning_.emplace();
}

void openai_answer::accepted(uint64_t job_id) {
  job_id_ = job_id;
}

void openai_answer::refused(const link_failure& f) {
  fail(openai_link_error(f));
}

bool openai_answer::event(const job_event& e) {
  if (ended_) return true;
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, wire::job_tokens>) {
          tokens(m);
        } else if constexpr (std::is_same_v<T, wire::job_restarted>) {
          // The next attempt's stream starts at its beginning; its text repeats what the
          // client has (same seed), which tokens() skips.
          attempt_ = m.attempt;
          attempt_bytes_ = 0;
          text_.clear();
        } else if constexpr (std::is_same_v<T, wire::job_done>) {
          done(m);
        } else if constexpr (std::is_same_v<T, link_failure>) {
          fail(openai_link_error(m));
        }
        // job_queued and job_running change nothing the client sees.
      },
      e);
  return ended_;
}

void openai_answer::tokens(const wire::job_tokens& t) {
  if (t.attempt != attempt_) {
    // An attempt announced by its tokens alone (a watch taken up after a broker restart).
    attempt_ = t.attempt;
    attempt_bytes_ = 0;
    text_.clear();
  }
  const uint64_t from = attempt_bytes_;
  attempt_bytes_ += t.text.size();
  if (!request_.stream) {
    text_ += t.text;
    return;
  }
  if (attempt_bytes_ <= taken_bytes_) return;  // the client has all of it
  pending_.append(t.text, size_t(taken_bytes_ - std::min(taken_bytes_, from)));
  taken_bytes_ = attempt_bytes_;
  send_text(false);
}

void openai_answer::send_text(bool flush) {
  const size_t n = flush ? pending_.size() : utf8_whole_prefix(pending_);
  // At the end the think filter may still hold text (an unfinished tag) with nothing pending.
  if (n == 0 && !(flush && reasoning_)) return;
  if (!started_) start_stream();
  if (!reasoning_) {
    out_->event(openai_chunk(request_, job_id_, created_, std::string_view(pending_).substr(0, n),
                             false, std::nullopt));
  } else {
    // The filter holds back only ASCII (a tag's start), so both parts end on whole characters.
    think_filter::split part = reasoning_->push(std::string_view(pending_).substr(0, n));
    if (flush) {
      think_filter::split rest = reasoning_->flush();
      part.answer += rest.answer;
      part.reasoning += rest.reasoning;
    }
    if (!part.answer.empty() || !part.reasoning.empty()) {
      out_->event(openai_chunk(request_, job_id_, created_, part.answer, false, std::nullopt,
                               part.reasoning));
    }
  }
  pending_.erase(0, n);
  wrote_ = true;
}

void openai_answer::start_stream() {
  started_ = true;
  wrote_ = true;
  out_->start_events();
  // OpenAI's first chat chunk names the role and carries no text yet.
  if (request_.endpoint == openai_endpoint::chat_completions) {
    out_->event(openai_chunk(request_, job_id_, created_, "", true, std::nullopt));
  }
}

void openai_answer::done(const wire::job_done& d) {
  if (d.state != wire::job_state::completed) return fail(openai_job_error(d));
  ended_ = true;
  if (!request_.stream) {
    http_response r;
    r.body = openai_response_body(request_, job_id_, created_, text_, d);
    out_->reply(std::move(r));
    return;
  }
  send_text(true);
  if (!started_) start_stream();
  out_->event(
      openai_chunk(request_, job_id_, created_, "", false, openai_finish_reason(d.stop_reason)));
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
