// When and how often the client library tries a broker again: the one schedule of both faces,
// and the timing of one wait by it. The blocking face's broker_retry (client/broker-retry.h: a
// request tried again, a job re-watched by follow-job.h) and the asynchronous face's link thread
// (client/broker-link.cpp: a fresh socket after a refused handshake, followed jobs re-watched, a
// silent broker probed) read their steps and windows here, so that the CLI, the tests and the
// gateway wait for a restarting broker alike.
//
//   reconnect_policy wait(reconnect_policy::request_steps, std::chrono::seconds(60));
//   wait.lost(now);                                   // the window counts from here
//   if (auto d = wait.next_wait(now)) sleep(*d);      // 250 ms, 500 ms, ... 5 s; none once past
//   wait.recovered();                                 // it answered: the next loss starts afresh
#pragma once

#include <chrono>
#include <optional>

namespace hearth::client {

// Waits between tries: `first`, doubled after each try up to `most`.
struct backoff_steps {
  std::chrono::milliseconds first;
  std::chrono::milliseconds most;
};

class reconnect_policy {
 public:
  using clock = std::chrono::steady_clock;

  // --- the schedule ---
  // A request tried again while the broker does not answer or cannot store it.
  static constexpr backoff_steps request_steps{std::chrono::milliseconds(250),
                                               std::chrono::milliseconds(5000)};
  // A fresh socket after a failed handshake (the broker refused our key, say): libzmq itself gives
  // up on a refused connection, and each attempt costs the broker a ZAP request and a log line;
  // short enough that a key allowed again works soon.
  static constexpr backoff_steps handshake_steps{std::chrono::milliseconds(250),
                                                 std::chrono::milliseconds(2000)};
  // How long a broker that went away is waited for: requests tried again and followed jobs
  // re-watched, by the CLI (--retry-for's default) and the gateway's link alike.
  static constexpr std::chrono::seconds retry_for{60};
  // A broker that no connection reached since the command began is most often a wrong address
  // or none running: it gets this long (a broker started at the same moment, by hand or by a
  // booting machine, binds within it) unless the user chose retry_for.
  static constexpr std::chrono::seconds start_window{10};
  // Clients get no heartbeats: after this much silence the link asks the broker something cheap,
  // so that a broker that stopped answering is noticed soon (the gateway's /health) ...
  static constexpr std::chrono::seconds link_probe_after{1};
  // ... and with no message at all this long after the probe, the broker lost us (it drops a peer
  // it thinks stalled without closing the connection) or hangs: start again on a new socket.
  static constexpr std::chrono::seconds link_probe_timeout{5};
  // A job followed over the blocking face is asked about after this much silence (whether the
  // broker is there, whether the job ended unseen): a queued job is silent for long, so about
  // three broker heartbeats; one get_job per interval costs nothing.
  static constexpr std::chrono::seconds follow_probe_after{3};

  // --- one wait by it ---
  // Tries spaced by `steps`, for `window` from the loss (clock::duration::max(): for ever).
  reconnect_policy(backoff_steps steps, clock::duration window);

  // The broker was found gone at `now`; the window counts from the first loss until recovered().
  void lost(clock::time_point now);
  bool is_lost() const { return lost_at_.has_value(); }
  // The window has passed (false while not lost).
  bool window_passed(clock::time_point now) const;
  // The wait before the next try, the step after it doubled; clipped to the window and to
  // `until`; nullopt once either has passed. Counts the window from `now` when not lost yet.
  std::optional<clock::duration> next_wait(clock::time_point now,
                                           clock::time_point until = clock::time_point::max());
  // The broker answered: the steps start again from the first, and the window is closed.
  void recovered();

  const backoff_steps& steps() const { return steps_; }
  clock::duration window() const { return window_; }

 private:
  backoff_steps steps_;
  clock::duration window_;
  std::chrono::milliseconds step_;
  std::optional<clock::time_point> lost_at_;
};

}  // namespace hearth::client
