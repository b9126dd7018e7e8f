// Reasoning kept apart from the answer in streamed text. Thinking models (Qwen3: chat template
// qwen3, engine/tokenizer/chat-template.h) start their reply with "<think>\n...\n</think>\n\n" and
// then answer; the filter splits a stream into the reasoning and the answer as it comes, a tag
// split across tokens ("<thi" + "nk>") included, holding back only what may still become a tag.
//
// The rule: an opening "<think>" counts only before any answer text (whitespace may precede it),
// as the model writes it; everything up to the next "</think>" is reasoning (the newlines right
// after "<think>" dropped); the newlines and spaces right after "</think>" are dropped, the rest
// is answer. A "<think>" later in the answer is answer text. A stream that never opens a think
// block is answer throughout (a model asked not to think: enable_thinking false).
#pragma once

#include <algorithm>
#include <string>
#include <string_view>

namespace hearth {

class think_filter {
 public:
  struct split {
    std::string answer;
    std::string reasoning;
  };

  // Adds text; returns what can be shown now of each part.
  split push(std::string_view text) {
    held_.append(text);
    split out;
    for (;;) {
      if (state_ == state::start) {
        const size_t b = held_.find_first_not_of(k_space);
        if (b == std::string::npos) return out;  // only whitespace yet: may precede <think>
        const std::string_view rest = std::string_view(held_).substr(b);
        if (rest.starts_with(k_open)) {
          held_.erase(0, b + k_open.size());
          state_ = state::reasoning_start;
          continue;
        }
        if (k_open.starts_with(rest)) return out;  // "<thi": wait for more
        state_ = state::answer;
        continue;
      }
      if (state_ == state::reasoning_start || state_ == state::after_close) {
        const size_t b = held_.find_first_not_of(state_ == state::after_close ? k_space : "\n");
        if (b == std::string::npos) {
          held_.clear();
          return out;
        }
        held_.erase(0, b);
        state_ = state_ == state::after_close ? state::answer : state::reasoning;
        continue;
      }
      if (state_ == state::reasoning) {
        const size_t close = held_.find(k_close);
        if (close != std::string::npos) {
          out.reasoning.append(held_, 0, close);
          held_.erase(0, close + k_close.size());
          state_ = state::after_close;
          continue;
        }
        const size_t keep = partial_tail(held_, k_close);
        out.reasoning.append(held_, 0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return out;
      }
      out.answer.append(held_);  // state::answer
      held_.clear();
      return out;
    }
  }

  // The end of the stream: what is still held back (an unfinished tag is text of its part).
  split flush() {
    split out;
    if (state_ == state::reasoning) {
      out.reasoning.swap(held_);
    } else {
      out.answer.swap(held_);
    }
    return out;
  }

  // Inside a think block now.
  bool thinking() const { return state_ == state::reasoning_start || state_ == state::reasoning; }
  // push() holds back text that may still become a tag (flush() gives it).
  bool holds_back() const { return !held_.empty(); }

 private:
  static constexpr std::string_view k_open = "<think>";
  static constexpr std::string_view k_close = "</think>";
  static constexpr const char* k_space = " \t\r\n";

  // The longest tail of `s` that is a proper prefix of `tag`.
  static size_t partial_tail(std::string_view s, std::string_view tag) {
    for (size_t len = std::min(tag.size() - 1, s.size()); len > 0; --len)
      if (s.substr(s.size() - len) == tag.substr(0, len)) return len;
    return 0;
  }

  enum class state { start, reasoning_start, reasoning, after_close, answer };
  state state_ = state::start;
  std::string held_;
};

}  // namespace hearth
