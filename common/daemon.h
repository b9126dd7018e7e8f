// What the three daemons (hearth-broker, hearth-node, hearth-gateway) do alike around their main
// loop: log to stderr in one format, and stop when SIGINT or SIGTERM arrives.
#pragma once

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <string>
#include <string_view>

namespace hearth {

// Set by SIGINT and SIGTERM once daemon_stop_on_signals ran; the daemon's run loop polls it.
inline std::atomic<bool> daemon_stop{false};

inline void daemon_stop_on_signals() {
  std::signal(SIGINT, [](int) { daemon_stop = true; });
  std::signal(SIGTERM, [](int) { daemon_stop = true; });
}

// The default logger on stderr (stdout is for output) at `level` (spdlog's names): each line the
// time, the level, then `prefix` ("broker: ", "node: "; the gateway's messages name their part).
inline void daemon_log_to_stderr(const std::string& level, std::string_view prefix) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("hearth"));
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ " + std::string(prefix) + "%v");
}

}  // namespace hearth
