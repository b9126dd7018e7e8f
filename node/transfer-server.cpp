#include "node/transfer-server.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <stdexcept>

#include "schema/codec.h"
#include "schema/zap-any-key.h"
#include "schema/zmq-io.h"

namespace hearth::node {
namespace {

using steady = std::chrono::steady_clock;

// A transfer counts against max_copies while it made a request this recently.
constexpr auto k_copy_active = std::chrono::seconds(5);
// Blob files kept open between requests, and how long an unused one stays open.
constexpr size_t k_open_files = 32;
constexpr auto k_file_idle = std::chrono::seconds(30);
// How often the loop looks at the stop flag and the idle files.
constexpr auto k_server_tick = std::chrono::milliseconds(50);

}  // namespace

// The ROUTER, and the ZAP handler of its own context (one per server, so that two servers in a
// process, as in the tests, each answer for their own keys).
struct transfer_server::sockets {
  zmq::context_t ctx;
  std::optional<zmq::socket_t> zap;
  zmq::socket_t router;
  sockets() : router(net::make_socket(ctx, zmq::socket_type::router)) {}
};

transfer_server::transfer_server(transfer_server_options opts, blob_locator locate)
    : opts_(std::move(opts)), locate_(std::move(locate)), socks_(std::make_unique<sockets>()) {
  auto& s = *socks_;
  if (!opts_.key.public_key.empty()) {
    // The ZAP handler must be bound before the ROUTER accepts its first connection.
    s.zap.emplace(net::zap_bind(s.ctx));
    s.router.set(zmq::sockopt::curve_server, 1);
    s.router.set(zmq::sockopt::curve_secretkey, opts_.key.secret_key);
    s.router.set(zmq::sockopt::zap_domain, "hearth-transfer");
  }
  s.router.set(zmq::sockopt::sndhwm, int(std::max<uint32_t>(opts_.max_queued_chunks, 1)));
  s.router.set(zmq::sockopt::handshake_ivl, 5000);
  try {
    s.router.bind(opts_.endpoint);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("cannot bind the transfer socket on " + opts_.endpoint + ": " +
                             e.what());
  }
  const std::string bound = s.router.get(zmq::sockopt::last_endpoint);
  port_ = uint16_t(std::stoi(bound.substr(bound.rfind(':') + 1)));
  thread_ = std::thread([this] { serve(); });
}

transfer_server::~transfer_server() {
  stop_ = true;
  thread_.join();
  close_idle_files(true);
}

void transfer_server::allow(const wire::transfer_allow& t) {
  std::lock_guard lock(mutex_);
  if (!tickets_.contains(t.transfer_id) && tickets_.size() >= opts_.max_tickets) {
    auto oldest = std::min_element(tickets_.begin(), tickets_.end(), [](auto& a, auto& b) {
      return a.second.last_use < b.second.last_use;
    });
    tickets_.erase(oldest);
  }
  tickets_[t.transfer_id] = {t.public_key, t.digests, std::chrono::milliseconds(t.ttl_ms),
                             steady::now()};
}

transfer_server_stats transfer_server::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void transfer_server::serve() {
  auto& s = *socks_;
  std::array<zmq::pollitem_t, 2> items = {
      zmq::pollitem_t{s.router.handle(), 0, ZMQ_POLLIN, 0},
      zmq::pollitem_t{s.zap ? s.zap->handle() : nullptr, 0, ZMQ_POLLIN, 0}};
  while (!stop_.load()) {
    net::poll(items.data(), s.zap ? 2 : 1, k_server_tick);
    // Any CURVE key may connect; the tickets decide what it may read.
    if (s.zap) net::zap_answer_any_curve_key(*s.zap);
    // A bounded number per pass, so that ZAP requests and the stop flag are looked at often.
    for (int i = 0; i < 256; ++i) {
      auto msg = net::try_recv(s.router, true);
      if (!msg) break;
      const auto frames = msg->views();
      const auto env = wire::open_envelope(frames);
      if (!env.ok) {
        send_error(msg->routing_id, 0, env.err.code, env.err.message);
        continue;
      }
      if (env.env.cmd != wire::command::blob_request) {
        send_error(msg->routing_id, wire::peek_request_id(env.env.body).value_or(0),
                   wire::error_code::malformed,
                   "the transfer socket takes blob_request only, not " +
                       std::string(wire::command_name(env.env.cmd)));
        continue;
      }
      auto req = wire::decode<wire::blob_request>(env.env.body);
      if (!req) {
        send_error(msg->routing_id, wire::peek_request_id(env.env.body).value_or(0),
                   wire::error_code::malformed, req.message());
        continue;
      }
      answer(msg->routing_id, msg->user_id, *req);
    }
    close_idle_files(false);
  }
}

std::optional<wire::error_reply> transfer_server::check_ticket(const std::string& user_id,
                                                               const wire::blob_request& req) {
  const auto now = steady::now();
  auto refuse = [&](wire::error_code c, std::string m) {
    return wire::error_reply{req.request_id, c, std::move(m)};
  };
  std::lock_guard lock(mutex_);
  auto it = tickets_.find(req.transfer_id);
  if (it != tickets_.end() && now - it->second.last_use > it->second.ttl) {
    tickets_.erase(it);
    it = tickets_.end();
  }
  const std::string transfer = "transfer " + std::to_string(req.transfer_id);
  if (it == tickets_.end())
    return refuse(wire::error_code::unauthorized, "no ticket for " + transfer);
  ticket& t = it->second;
  if (!opts_.key.public_key.empty() && t.public_key != user_id) {
    return refuse(wire::error_code::unauthorized,
                  "the ticket for " + transfer + " is for another node's key");
  }
  if (std::find(t.digests.begin(), t.digests.end(), req.digest) == t.digests.end())
    return refuse(wire::error_code::unauthorized,
                  "the ticket for " + transfer + " does not cover " + req.digest);
  if (now - t.last_use > k_copy_active) {
    // Not being served now: it may start only while fewer than max_copies are.
    size_t active = 0;
    for (const auto& [id, other] : tickets_)
      if (id != req.transfer_id && now - other.last_use <= k_copy_active) ++active;
    if (active >= opts_.max_copies) {
      return refuse(wire::error_code::limit_reached,
                    "this node serves " + std::to_string(opts_.max_copies) + " copies at once");
    }
  }
  t.last_use = now;
  return std::nullopt;
}

void transfer_server::answer(const std::string& routing_id, const std::string& user_id,
                             const wire::blob_request& req) {
  if (auto refusal = check_ticket(user_id, req)) {
    send_error(routing_id, refusal->request_id, refusal->code, std::move(refusal->message));
    return;
  }
  if (req.length == 0 || req.length > wire::max_blob_chunk) {
    send_error(routing_id, req.request_id, wire::error_code::invalid_params,
               "length must be 1 to " + std::to_string(wire::max_blob_chunk) + " bytes");
    return;
  }
  open_file* f = file_of(req.digest);
  if (!f) {
    send_error(routing_id, req.request_id, wire::error_code::not_found,
               "this node has no blob " + req.digest);
    return;
  }
  if (req.offset >= f->size) {
    send_error(routing_id, req.request_id, wire::error_code::invalid_params,
               "offset " + std::to_string(req.offset) + " is past the end of " + req.digest + " (" +
                   std::to_string(f->size) + " bytes)");
    return;
  }
  const uint32_t n = uint32_t(std::min<uint64_t>(req.length, f->size - req.offset));
  // The bytes are read straight into the frame that carries them.
  zmq::message_t payload(n);
  size_t got = 0;
  while (got < n) {
    const ssize_t r =
        pread(f->fd, static_cast<char*>(payload.data()) + got, n - got, off_t(req.offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += size_t(r);
  }
  if (got < n) {
    files_.erase(req.digest);  // truncated or unreadable under us: looked up again next time
    send_error(routing_id, req.request_id, wire::error_code::internal,
               "reading " + req.digest + " failed");
    return;
  }
  const wire::blob_chunk chunk{req.request_id, req.offset, n, f->size};
  const std::string body = wire::encode(chunk);
  const auto code = std::array<char, 1>{char(wire::command::blob_chunk)};
  auto& r = socks_->router;
  using sf = zmq::send_flags;
  // At the connection's high-water mark the first frame is refused (EAGAIN) and the answer
  // dropped: the fetcher asks again after its timeout, and a peer that stops reading costs at
  // most max_queued_chunks answers.
  if (!net::send_part(r, zmq::buffer(routing_id), sf::sndmore | sf::dontwait)) return;
  net::send_part(r, zmq::buffer(wire::signature), sf::sndmore);
  net::send_part(r, zmq::buffer(code), sf::sndmore);
  net::send_part(r, zmq::buffer(body), sf::sndmore);
  // The payload frame is sent as it is (zero copy); a signal only interrupts the call.
  while (true) {
    try {
      r.send(payload, sf::none);
      break;
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
  }
  std::lock_guard lock(mutex_);
  ++stats_.chunks;
  stats_.bytes += n;
}

transfer_server::open_file* transfer_server::file_of(const std::string& digest) {
  const auto now = steady::now();
  if (auto it = files_.find(digest); it != files_.end()) {
    it->second.last_use = now;
    return &it->second;
  }
  const auto path = locate_ ? locate_(digest) : std::nullopt;
  if (!path) return nullptr;
  const int fd = ::open(path->c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return nullptr;
  }
  if (files_.size() >= k_open_files) {
    auto oldest = std::min_element(files_.begin(), files_.end(), [](auto& a, auto& b) {
      return a.second.last_use < b.second.last_use;
    });
    ::close(oldest->second.fd);
    files_.erase(oldest);
  }
  return &(files_[digest] = {fd, uint64_t(st.st_size), now});
}

void transfer_server::close_idle_files(bool all) {
  const auto now = steady::now();
  for (auto it = files_.begin(); it != files_.end();) {
    if (all || now - it->second.last_use > k_file_idle) {
      ::close(it->second.fd);
      it = files_.erase(it);
    } else {
      ++it;
    }
  }
}

void transfer_server::send_error(const std::string& routing_id, uint64_t request_id,
                                 wire::error_code code, std::string message) {
  {
    std::lock_guard lock(mutex_);
    ++stats_.refused;
  }
  spdlog::debug("transfer socket: refused request {}: {}", request_id, message);
  net::send(socks_->router, routing_id, wire::error_reply{request_id, code, std::move(message)});
}

}  // namespace hearth::node
