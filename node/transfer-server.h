// The node's transfer socket (schema/PROTOCOL.md 16.4): a ROUTER on its own thread where other
// nodes fetch blobs, in ranges of at most 4 MiB (blob_request), answered with the bytes as a frame
// of their own (blob_chunk) or an error_reply. It serves only what a ticket allows: the broker's
// transfer_allow names the transfer, the fetching node's CURVE key and the digests, and lapses
// after ttl_ms without a request. With a key pair it is a CURVE server and a ticket holds only for
// the connection that proved the ticket's key (the ZAP handler on this thread puts the client's
// key in every message's User-Id); without keys (a broker without auth) a ticket holds for any
// request naming its transfer_id.
//
// Bounded: at most max_tickets tickets (the oldest dropped), max_copies transfers served at once
// (limit_reached beyond), max_queued_chunks answers queued per connection (a peer that stops
// reading has its requests dropped, not buffered), files kept open at most k_open_files.
//
// Threads: the socket and the ZAP socket live on the server's thread; allow() only touches the
// ticket table under a mutex, so the node's loop never waits on a copy.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "schema/curve-cert.h"
#include "schema/messages.h"

namespace hearth::node {

// The file holding a blob's bytes (a store blob, a file of the models directory whose digest is
// known), or nullopt. Called on the server's thread.
using blob_locator = std::function<std::optional<std::filesystem::path>(std::string_view digest)>;

struct transfer_server_options {
  // Where to bind: "tcp://ADDRESS:PORT" ("tcp://127.0.0.1:*" picks a free port).
  std::string endpoint = "tcp://0.0.0.0:7712";
  net::curve_cert key;  // the node's key pair; empty: no CURVE
  uint32_t max_copies = 4;
  uint32_t max_tickets = 256;
  // Answers queued per connection: 128 MiB of 4 MiB chunks, twice a fetcher's window of 8 with
  // room for libzmq's late accounting of what the connection sent (its low-water mark).
  uint32_t max_queued_chunks = 32;
};

// What the server did, for logs and tests.
struct transfer_server_stats {
  uint64_t chunks = 0, bytes = 0, refused = 0;
};

class transfer_server {
 public:
  // Binds and starts the thread. Throws std::runtime_error (naming the endpoint) when it cannot
  // bind.
  transfer_server(transfer_server_options opts, blob_locator locate);
  ~transfer_server();
  transfer_server(const transfer_server&) = delete;
  transfer_server& operator=(const transfer_server&) = delete;

  // The bound port, and the CURVE public key ("" without keys): node_hello's transfer_port and
  // transfer_key.
  uint16_t port() const { return port_; }
  const std::string& public_key() const { return opts_.key.public_key; }

  // A ticket from the broker; one for the same transfer_id replaces the earlier one.
  void allow(const wire::transfer_allow& ticket);

  transfer_server_stats stats() const;

 private:
  struct ticket {
    std::string public_key;
    std::vector<std::string> digests;
    std::chrono::milliseconds ttl{};
    std::chrono::steady_clock::time_point last_use;  // allow() or the last request
  };
  struct open_file {
    int fd = -1;
    uint64_t size = 0;
    std::chrono::steady_clock::time_point last_use;
  };

  void serve();
  void answer(const std::string& routing_id, const std::string& user_id,
              const wire::blob_request& req);
  std::optional<wire::error_reply> check_ticket(const std::string& user_id,
                                                const wire::blob_request& req);
  open_file* file_of(const std::string& digest);
  void close_idle_files(bool all);
  void send_error(const std::string& routing_id, uint64_t request_id, wire::error_code code,
                  std::string message);

  transfer_server_options opts_;
  blob_locator locate_;
  uint16_t port_ = 0;
  struct sockets;
  std::unique_ptr<sockets> socks_;
  std::atomic<bool> stop_{false};

  mutable std::mutex mutex_;  // tickets_ and stats_
  std::map<uint64_t, ticket> tickets_;
  transfer_server_stats stats_;

  std::map<std::string, open_file> files_;  // by digest; the server's thread only
  std::thread thread_;
};

}  // namespace hearth::node
