#include "gateway/job-output.h"

#include <algorithm>

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

job_output_mode job_output_mode_of(const wire::job_params& p) {
  return job_output_mode{p.api.events, !p.api.events && p.show_thinking};
}

job_output_reader::job_output_reader(job_output_mode mode) : mode_(mode) {
  if (mode_.split_reasoning && !mode_.events) think_.emplace();
}

std::vector<wire::output_event> job_output_reader::text_events(std::string_view text, bool flush) {
  std::vector<wire::output_event> out;
  auto add = [&](wire::output_event_kind kind, std::string s) {
    if (s.empty()) return;
    wire::output_event e;
    e.kind = kind;
    e.text = std::move(s);
    out.push_back(std::move(e));
  };
  if (!think_) {
    add(wire::output_event_kind::content, std::string(text));
    return out;
  }
  // The filter holds back only ASCII (a tag's start), so both parts end on whole characters.
  think_filter::split part = think_->push(text);
  if (flush) {
    think_filter::split rest = think_->flush();
    part.answer += rest.answer;
    part.reasoning += rest.reasoning;
  }
  add(wire::output_event_kind::reasoning, std::move(part.reasoning));
  add(wire::output_event_kind::content, std::move(part.answer));
  return out;
}

result<std::vector<wire::output_event>> job_output_reader::feed(std::string_view bytes) {
  if (mode_.events) {
    if (!error_.empty()) return error{error_};
    auto events = events_.feed(bytes);
    if (!events) return events;
    for (const auto& e : *events) {
      if (e.choice >= k_max_choices) {
        // What follows a bad line is not trusted either.
        error_ = "an output event names choice " + std::to_string(e.choice) +
                 ", past the most an answer holds (" + std::to_string(k_max_choices) + ")";
        return error{error_};
      }
    }
    return events;
  }
  held_.append(bytes);
  const size_t n = utf8_whole_prefix(held_);
  auto out = text_events(std::string_view(held_).substr(0, n), false);
  held_.erase(0, n);
  return out;
}

result<std::vector<wire::output_event>> job_output_reader::finish() {
  if (mode_.events) {
    if (!error_.empty()) return error{error_};
    if (events_.pending() != 0) return error{"the job's output events end inside a line"};
    return std::vector<wire::output_event>{};
  }
  std::string rest;
  rest.swap(held_);
  return text_events(rest, true);
}

job_stream::job_stream(job_output_mode mode, bool streaming)
    : mode_(mode), streaming_(streaming), reader_(mode) {}

void job_stream::new_attempt(uint32_t attempt) {
  attempt_ = attempt;
  attempt_bytes_ = 0;
  if (!streaming_) {
    // A whole answer reads the last attempt alone, from its start.
    text_.clear();
  }
}

void job_stream::restarted(uint32_t attempt) {
  new_attempt(attempt);
}

result<std::vector<wire::output_event>> job_stream::tokens(const wire::job_tokens& t) {
  // An attempt announced by its tokens alone (a watch taken up after a broker restart).
  if (t.attempt != attempt_) new_attempt(t.attempt);
  const uint64_t from = attempt_bytes_;
  attempt_bytes_ += t.text.size();
  if (!streaming_) {
    text_ += t.text;
    return std::vector<wire::output_event>{};
  }
  if (attempt_bytes_ <= taken_bytes_) return std::vector<wire::output_event>{};  // had it all
  const std::string_view fresh =
      std::string_view(t.text).substr(size_t(taken_bytes_ - std::min(taken_bytes_, from)));
  taken_bytes_ = attempt_bytes_;
  return reader_.feed(fresh);
}

result<std::vector<wire::output_event>> job_stream::finish() {
  if (streaming_) return reader_.finish();
  job_output_reader whole(mode_);
  auto events = whole.feed(text_);
  if (!events) return events;
  auto rest = whole.finish();
  if (!rest) return rest;
  for (auto& e : *rest) events->push_back(std::move(e));
  return events;
}

void job_output::add(const wire::output_event& e) {
  if (e.choice >= k_max_choices) return;  // job_output_reader refuses these
  if (choices.size() <= e.choice) choices.resize(e.choice + 1);
  wire::choice_output_add(choices[e.choice], e);
}

result<job_output> job_output_of(std::string_view output, job_output_mode mode, uint32_t n) {
  job_output_reader r(mode);
  auto events = r.feed(output);
  if (!events) return events.err();
  auto rest = r.finish();
  if (!rest) return rest.err();
  job_output out;
  out.choices.resize(std::clamp<uint32_t>(n, 1, k_max_choices));
  out.add(*events);
  out.add(*rest);
  return out;
}

std::string_view finish_reason_of_stop(std::string_view stop_reason) {
  if (stop_reason == "max_tokens" || stop_reason == "context_full") return "length";
  return "stop";
}

std::string choice_finish_reason(const choice_output& c, std::string_view stop_reason) {
  if (!c.finish.empty()) return c.finish;
  if (!c.tool_calls.empty()) return "tool_calls";
  return std::string(finish_reason_of_stop(stop_reason));
}

}  // namespace hearth::gateway
