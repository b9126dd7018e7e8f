// The asynchronous face of the client library (the gateway's broker link): one ZeroMQ DEALER
// socket on a thread of its own (a socket never crosses threads, STYLE.md 10), shared by every
// caller. Requests are matched to replies by request_id (client/protocol.h); job events are
// routed to whoever follows the job, each follower's stream kept in order without repeats by a
// stream_order (client/stream-order.h). Every callback runs on the caller's loop through `post`
// (the gateway's I/O thread), so handlers need no locks.
//
//   client::broker_link link(opts, [&io](auto f) { asio::post(io, std::move(f)); });
//   link.request<wire::nodes_reply>(wire::list_nodes{}, [](link_result<wire::nodes_reply> r)
//   {...});
//
// The link speaks the client protocol (schema/PROTOCOL.md) exactly as the blocking face does: the
// queue, priorities, failover and history apply to HTTP requests too. When the broker restarts,
// followed jobs are watched again from what was already delivered (watch with
// attempt/seq/output_offset), so a follower sees no duplicate and no gap; requests in flight fail
// with `no_reply`. When the broker refuses the handshake (our key is not allowed), requests fail at
// once saying so, and a new socket tries again after a backoff of at most 2 s, so an allowed key
// works again soon.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>

#include "client/protocol.h"
#include "schema/codec.h"
#include "schema/curve-cert.h"
#include "schema/messages.h"

namespace hearth::client {

// Runs a function on the caller's loop (the gateway's I/O thread).
using post_fn = std::function<void(std::function<void()>)>;

struct link_options {
  std::string endpoint = "tcp://127.0.0.1:5555";
  net::curve_client_keys keys;  // none: plain ZMTP (a broker without --auth)
  std::chrono::milliseconds request_timeout{10000};
};

template <class Reply>
using link_result = std::variant<Reply, link_failure>;

// What a follower receives: client/protocol.h's job_event, in the broker's order.
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

}  // namespace hearth::client
