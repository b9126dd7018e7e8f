// Whether the job store takes writes. A turn whose commit fails (disk full, I/O error) is undone
// and writes are refused for a backoff (250 ms, doubling to 5 s until a commit writes): requests
// that write are answered storage_unavailable meanwhile (refuse()), reads are still served.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "broker/turn-output.h"
#include "schema/zmq-io.h"

namespace hearth::broker {

class storage_gate {
 public:
  bool down(net::steady::time_point now) const { return now < retry_at_; }
  // A request that writes, while the store refuses writes: answered storage_unavailable.
  bool refuse(turn_output& out, const std::string& rid, uint64_t request_id) const {
    const auto now = net::steady::now();
    if (!down(now)) return false;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(retry_at_ - now).count();
    out.send_error(rid, request_id, wire::error_code::storage_unavailable,
                   "the job database cannot be written just now (see the broker's log); nothing "
                   "of this request was kept; retry in " +
                       std::to_string(ms) + " ms");
    return true;
  }
  // Writes are refused for the next backoff.
  void back_off(net::steady::time_point now) {
    backoff_ =
        std::clamp(backoff_ * 2, std::chrono::milliseconds(250), std::chrono::milliseconds(5000));
    retry_at_ = now + backoff_;
  }
  std::chrono::milliseconds backoff() const { return backoff_; }
  // A commit wrote: true when writes had failed before (the backoff starts over).
  bool wrote() {
    if (backoff_.count() == 0) return false;
    backoff_ = std::chrono::milliseconds(0);
    return true;
  }

 private:
  net::steady::time_point retry_at_{};
  std::chrono::milliseconds backoff_{0};
};

}  // namespace hearth::broker
