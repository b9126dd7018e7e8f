// Following a broker's transfers (follow-transfers.h).
#include "tools/follow-transfers.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include "schema/zmq-io.h"

namespace hearth::cli {
namespace {

bool transfer_over(const wire::transfer_info& t) {
  return t.state == "done" || t.state == "failed";
}

// "42% of 1.2 GiB, 35.1 MiB/s": the rate over the transfer's life so far.
std::string progress_text(const wire::transfer_info& t) {
  if (t.bytes_total == 0) return t.bytes_done ? format_bytes(t.bytes_done) : "";
  std::string s = std::to_string(int(100.0 * double(t.bytes_done) / double(t.bytes_total))) +
                  "% of " + format_bytes(t.bytes_total);
  const int64_t ms = net::wall_ms() - int64_t(t.started_ms);
  if (!transfer_over(t) && ms > 0 && t.bytes_done > 0) {
    s += ", " + format_bytes(uint64_t(double(t.bytes_done) * 1000.0 / double(ms))) + "/s";
  }
  return s;
}

}  // namespace

std::string transfer_text(const wire::transfer_info& t) {
  std::string s = t.model + " -> " + t.node + " from " + t.source + ": " + t.state;
  if (!transfer_over(t)) {
    if (std::string p = progress_text(t); !p.empty()) s += " " + p;
  }
  if (!t.error.empty()) s += " (" + t.error + ")";
  return s;
}

int follow_transfers(broker_client& client, const wire::transfers_started& started,
                     const char* verb, bool as_json) {
  std::map<uint64_t, wire::transfer_info> last;
  for (const auto& t : started.transfers) {
    last[t.transfer_id] = t;
    std::fprintf(stderr, "transfer %llu: %s onto %s from %s\n",
                 static_cast<unsigned long long>(t.transfer_id), t.model.c_str(), t.node.c_str(),
                 t.source.c_str());
  }
  const bool tty = ::isatty(2) != 0;
  for (;;) {
    const auto reply = client.request<wire::models_reply>(wire::list_models{});
    for (const auto& t : reply.transfers) {
      if (last.contains(t.transfer_id)) last[t.transfer_id] = t;
    }
    size_t ended = 0;
    std::string line;
    for (const auto& [id, t] : last) {
      ended += transfer_over(t);
      line += (line.empty() ? "" : "  ") + t.node + ": " + t.state +
              (transfer_over(t) ? "" : " " + progress_text(t));
    }
    if (tty) {
      std::fprintf(stderr, "\r%s\033[K", line.c_str());
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    if (ended == last.size()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(tty ? 500 : 2000));
  }
  if (tty) std::fprintf(stderr, "\n");
  int failed = 0;
  for (const auto& [id, t] : last) {
    if (as_json) {
      print_json(wire_json(t));
    } else if (t.state == "done") {
      std::printf("%s %s onto %s\n", verb, t.model.c_str(), t.node.c_str());
    } else {
      std::printf("FAILED %s onto %s: %s\n", t.model.c_str(), t.node.c_str(), t.error.c_str());
    }
    failed += t.state != "done";
  }
  return failed ? 1 : 0;
}

}  // namespace hearth::cli
