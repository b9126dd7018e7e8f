// Stop strings in streamed text: holds back text that might be the start of a stop string, and
// finds stop strings that span token boundaries.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hearth {

class stop_string_filter {
 public:
  explicit stop_string_filter(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // Adds text; returns what can be shown now. Sets stopped() when a stop string completed (the
  // returned text then ends right before it).
  std::string push(std::string_view text);
  // What is still held back, once generation ended without a stop string.
  std::string flush();
  bool stopped() const { return stopped_; }
  // push() holds back text that may start a stop string.
  bool holds_back() const { return !held_.empty(); }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace hearth
