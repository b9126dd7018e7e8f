#include "tools/broker-cli.h"

#include <charconv>
#include <cmath>
#include <ctime>
#include <stdexcept>

namespace hearth::cli {

namespace {

size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;  // count UTF-8 code points
  return n;
}

}  // namespace

void add_broker_options(CLI::App* cmd, broker_options& o) {
  cmd->add_option("--broker", o.endpoint,
                  "Broker endpoint (default: $HEARTH_BROKER, else " +
                      std::string(broker_endpoint_default) + ")");
  cmd->add_option("--broker-key", o.broker_key,
                  "The broker's public certificate, for CURVE (default: $HEARTH_BROKER_KEY, else "
                  "$XDG_CONFIG_HOME/hearth/broker.pub when it and client.key exist)");
  cmd->add_option("--key", o.key,
                  "This client's secret certificate from `hearth keygen` (default: $HEARTH_KEY, "
                  "else $XDG_CONFIG_HOME/hearth/client.key)");
}

CLI::Option* add_retry_option(CLI::App* cmd, int& retry_for_s) {
  return cmd
      ->add_option("--retry-for", retry_for_s,
                   "While the broker does not answer (down, restarting), keep trying for this "
                   "many seconds; 0 = give up after one try. Without it, a broker that nothing "
                   "answers for since the command began gets 10 s")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

void write_out(std::string_view s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

void write_err(std::string_view s) {
  std::fflush(stdout);  // text and notices interleave in the order they happened
  std::fwrite(s.data(), 1, s.size(), stderr);
  std::fflush(stderr);
}

void print_json(const json& j) {
  const std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  write_out(s);
}

void print_table(const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], display_width(row[i]));
    }
  };
  measure(header);
  for (const auto& r : rows) measure(r);
  auto line = [&](const std::vector<std::string>& row) {
    std::string s;
    for (size_t i = 0; i < row.size(); ++i) {
      s += row[i];
      if (i + 1 < row.size()) s += std::string(width[i] - display_width(row[i]) + 2, ' ');
    }
    s += "\n";
    std::fwrite(s.data(), 1, s.size(), stdout);
  };
  line(header);
  for (const auto& r : rows) line(r);
  std::fflush(stdout);
}

std::string format_local_time(int64_t ms) {
  if (ms <= 0) return "-";
  const std::time_t t = std::time_t(ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string format_local_time_ms(int64_t ms) {
  if (ms <= 0) return "-";
  char frac[8];
  std::snprintf(frac, sizeof frac, ".%03d", int(ms % 1000));
  return format_local_time(ms) + frac;
}

std::string format_duration(int64_t ms) {
  if (ms < 0) ms = 0;
  char buf[32];
  if (ms < 1000) {
    std::snprintf(buf, sizeof buf, "%dms", int(ms));
  } else if (ms < 60'000) {
    std::snprintf(buf, sizeof buf, "%.1fs", double(ms) / 1000);
  } else if (ms < 3'600'000) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", int(ms / 60'000), int(ms / 1000 % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%dh%02dm", int(ms / 3'600'000), int(ms / 60'000 % 60));
  }
  return buf;
}

std::optional<uint64_t> duration_ms(std::string_view s) {
  if (s.size() < 2) return std::nullopt;
  uint64_t unit_ms = 0;
  switch (s.back()) {
    case 'd':
      unit_ms = 86'400'000;
      break;
    case 'h':
      unit_ms = 3'600'000;
      break;
    case 'm':
      unit_ms = 60'000;
      break;
    case 's':
      unit_ms = 1000;
      break;
    default:
      return std::nullopt;
  }
  uint64_t n = 0;
  const std::string_view digits = s.substr(0, s.size() - 1);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  constexpr uint64_t max_ms = 100ull * 365 * 86'400'000;
  if (ec != std::errc{} || end != digits.data() + digits.size() || n == 0 || n > max_ms / unit_ms) {
    return std::nullopt;
  }
  return n * unit_ms;
}

std::string format_bytes(uint64_t bytes) {
  char buf[32];
  const double mib = double(bytes) / (1 << 20);
  if (mib < 1024) {
    std::snprintf(buf, sizeof buf, "%.0f MiB", mib);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f GiB", mib / 1024);
  }
  return buf;
}

std::string or_dash(const std::string& s) {
  return s.empty() ? "-" : s;
}

}  // namespace hearth::cli
