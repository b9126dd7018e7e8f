// "40s ago", "12m ago", "3h ago", "2d ago": how long ago a wall-clock time was, as the CLI's
// tables and the broker's messages say it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

namespace hearth {

// `ms` and `now_ms` in milliseconds since the Unix epoch; "never" for 0.
inline std::string format_ago(int64_t ms, int64_t now_ms) {
  if (ms <= 0) return "never";
  const int64_t s = std::max<int64_t>(0, (now_ms - ms) / 1000);
  if (s < 60) return std::to_string(s) + "s ago";
  if (s < 3600) return std::to_string(s / 60) + "m ago";
  if (s < 86400) return std::to_string(s / 3600) + "h ago";
  return std::to_string(s / 86400) + "d ago";
}

}  // namespace hearth
