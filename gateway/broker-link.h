// The gateway's connection to the broker: one ZeroMQ DEALER socket on its own thread (a socket
// never crosses threads), shared by every HTTP request. Requests are matched to replies by
// request_id; job events are routed to whoever follows the job. Every callback runs on the
// gateway's I/O thread through `post`, so handlers need no locks.
//
// The link speaks the client protocol (schema/PROTOCOL.md) exactly as the CLI does: the queue,
// priorities, failover and history apply to HTTP requests too. When the broker restarts, followed
// jobs are watched again from what was already delivered (watch with attempt/seq/output_offset),
// so a follower sees no duplicate and no gap; requests in flight fail with `no_reply`. When the
// broker refuses the handshake (our key is not allowed), requests fail at once saying so, and a
// new socket tries again after a backoff of at most 2 s, so an allowed key works again soon.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>

#include "schema/codec.h"
#include "schema/curve-cert.h"
#include "schema/messages.h"

namespace hearth::gateway {

// Runs a function on the gateway's I/O thread.
using post_fn = std::function<void(std::function<void()>)>;

struct link_options {
  std::string endpoint = "tcp://127.0.0.1:5555";
  net::curve_client_keys keys;  // none: plain ZMTP (a broker without --auth)
  std::chrono::milliseconds request_timeout{10000};
};

// Why a request got no reply it asked for.
struct link_failure {
  bool no_reply = false;  // the broker did not answer in time, or is not connected
  wire::error_code code = wire::error_code::internal;  // when the broker refused (error_reply)
  std::string message;
  // With no_reply: the broker refused the handshake (this gateway's key), so it cannot be asked
  // until an admin allows the key; `message` says so.
  bool handshake_refused = false;
};

template <class Reply>
using link_result = std::variant<Reply, link_failure>;

// What a follower of a job receives, in the broker's order. The last event is job_done, or a
// link_failure when the job can no longer be followed (the broker lost it, or refused the watch).
using job_event = std::variant<wire::job_queued, wire::job_running, wire::job_tokens,
                               wire::job_restarted, wire::job_done, link_failure>;
using job_event_fn = std::function<void(const job_event&)>;

class broker_link {
 public:
  broker_link(link_options o, post_fn post);
  ~broker_link();  // stops the thread; pending callbacks are dropped, not called
  broker_link(const broker_link&) = delete;
  broker_link& operator=(const broker_link&) = delete;

  // Sends `r` under a fresh request_id; `done` gets the reply or the failure.
  template <class Reply, class Request>
  void request(Request r, std::function<void(link_result<Reply>)> done) {
    request_raw(
        Request::cmd, Reply::cmd,
        [r](uint64_t id) mutable {
          r.request_id = id;
          return wire::encode(r);
        },
        [done = std::move(done)](link_result<std::string> body) {
          if (auto* f = std::get_if<link_failure>(&body)) return done(*f);
          auto m = wire::decode<Reply>(std::get<std::string>(body));
          if (!m) return done(link_failure{false, wire::error_code::malformed, m.message()});
          done(std::move(m).value());
        });
  }

  // Submits `s` with watch set and follows the job: `accepted` gets the broker's reply (or the
  // failure, and then no event comes), `events` everything after it until job_done. The returned
  // id stops the following (unfollow).
  uint64_t submit_and_follow(wire::submit s,
                             std::function<void(link_result<wire::accepted>)> accepted,
                             job_event_fn events);
  // Follows a job that exists (as `api_key`'s client): its events from the start of its
  // latest attempt (the output so far first, in pages).
  uint64_t follow(uint64_t job_id, std::string api_key, job_event_fn events);
  // No more events for this follower (its HTTP client went away). Does not cancel the job.
  void unfollow(uint64_t follower);

  // Whether the handshake with the broker is done and it answered lately (for /health).
  bool connected() const;
  // Why the broker cannot be reached when it refused the handshake (our key, or CURVE on one
  // side only), for /health; "" otherwise. The link tries again meanwhile (any thread).
  std::string refusal() const;

 private:
  void request_raw(wire::command cmd, wire::command reply,
                   std::function<std::string(uint64_t request_id)> encode,
                   std::function<void(link_result<std::string>)> done);
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace hearth::gateway
