#include "node/transfer-fetch.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "schema/codec.h"
#include "schema/zmq-io.h"

namespace hearth::node {
namespace {

using steady = std::chrono::steady_clock;

// The ranges written (pwrite) and not yet made durable are flushed at least this often.
constexpr auto k_flush_every = std::chrono::seconds(1);
// How long the loop polls at most before it looks at the cancel flag and the timers again.
constexpr auto k_fetch_tick = std::chrono::milliseconds(100);
// The rate cap lets this much time's worth of bytes go at once after a pause.
constexpr double k_rate_burst_s = 0.1;

// Written ranges made durable (partial_blob::mark_done: an fdatasync of the blob, then its
// journal's) on a thread of their own, so that the fetch loop keeps its window of requests full
// while the disk syncs: a sync of 64 MiB can take longer than the window lasts on a gigabit link.
class range_flusher {
 public:
  explicit range_flusher(store::partial_blob& part) : part_(part) {}
  ~range_flusher() {
    if (job_.valid()) job_.wait();
  }
  // Hands the ranges over when no flush is running (and clears them); false when one is.
  bool try_start(std::map<uint64_t, uint64_t>& written, uint64_t bytes) {
    if (job_.valid() && job_.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
      return false;
    finish();
    pending_ = bytes;
    job_ = std::async(std::launch::async, [this, ranges = std::move(written)] {
      for (const auto& [begin, end] : ranges) part_.mark_done(begin, end - begin);
    });
    written.clear();
    return true;
  }
  // Waits for the running flush, if any; its error is thrown here.
  void finish() {
    if (!job_.valid()) return;
    pending_ = 0;
    job_.get();
  }
  // Bytes handed over and not known to be durable yet.
  uint64_t pending() const { return pending_; }

 private:
  store::partial_blob& part_;
  std::future<void> job_;
  uint64_t pending_ = 0;
};

// How one session with one peer ended.
enum class peer_outcome { complete, failed, dropped, cancelled };

struct peer_state {
  const wire::transfer_peer* peer = nullptr;
  bool dropped = false;
  std::string why;  // its last failure
};

class model_copy {
 public:
  model_copy(store::model_store& store, const wire::model_fetch& fetch, const fetch_options& opts,
             const std::function<void(const fetch_progress&)>& progress,
             const std::atomic<bool>* cancel)
      : store_(store), fetch_(fetch), opts_(opts), progress_cb_(progress), cancel_(cancel) {
    for (const auto& p : fetch_.peers) peers_.push_back({&p});
    for (const auto& f : fetch_.files) progress_.bytes_total += f.size;
  }

  result<store::manifest> run() {
    if (auto r = check_request(); !r) return r.err();
    try {
      for (const auto& f : fetch_.files) {
        if (auto r = copy_blob(f); !r) return r.err();
        done_before_ += f.size;
      }
    } catch (const std::exception& e) {  // the disk: a write or a sync that failed
      return error{e.what()};
    }
    return put_manifest();
  }

 private:
  result<void> check_request() const {
    if (!store::model_name_valid(fetch_.name))
      return error{"invalid model name '" + fetch_.name + "'"};
    if (fetch_.files.empty()) return error{"the copy names no files"};
    if (fetch_.files.size() > wire::max_model_files) return error{"the copy names too many files"};
    if (fetch_.peers.empty()) return error{"the copy names no peers"};
    for (const auto& f : fetch_.files) {
      if (!store::model_file_path_valid(f.path)) return error{"invalid file path '" + f.path + "'"};
      if (!store::sha256_digest_valid(f.digest))
        return error{"invalid digest '" + f.digest + "' of " + f.path};
    }
    return {};
  }

  bool cancelled() const { return cancel_ && cancel_->load(); }

  void report() {
    if (progress_cb_) progress_cb_(progress_);
  }

  result<void> copy_blob(const wire::model_file& f) {
    if (store_.has_blob(f.digest)) {
      progress_.bytes_done = done_before_ + f.size;
      report();
      return {};
    }
    std::unique_ptr<store::partial_blob> part;
    try {
      part = store_.open_partial(f.digest, f.size);
    } catch (const std::exception& e) {
      return error{"cannot write " + f.path + ": " + e.what()};
    }
    std::set<size_t> contributors;  // peers whose bytes are in `part` (this call)
    uint32_t failures = 0;          // peer sessions failed since the last chunk
    while (true) {
      if (cancelled()) return error{"cancelled"};
      if (part->missing().empty()) {
        try {
          part->commit();
          return {};
        } catch (const store::digest_mismatch& e) {
          for (size_t i : contributors)
            drop(i, "sent bytes of " + f.path + " that hash to " + e.actual);
          spdlog::warn("copy {}: {} did not verify ({}); fetching it again", fetch_.transfer_id,
                       f.path, e.what());
          contributors.clear();
          try {
            part = store_.open_partial(f.digest, f.size);
          } catch (const std::exception& e2) {
            return error{"cannot write " + f.path + ": " + e2.what()};
          }
          continue;
        }
      }
      const auto pick = next_peer();
      if (!pick) return error{"every peer failed: " + failure_summary()};
      bool got_chunk = false;
      std::string why;
      const peer_outcome o = fetch_from(*pick, f, *part, contributors, got_chunk, why);
      if (o == peer_outcome::complete) continue;
      if (o == peer_outcome::cancelled) return error{"cancelled"};
      if (o == peer_outcome::dropped) {
        drop(*pick, why);
        continue;
      }
      peers_[*pick].why = why;
      failures = got_chunk ? 1 : failures + 1;
      spdlog::warn("copy {}: peer {} failed ({}); going on from the next", fetch_.transfer_id,
                   peers_[*pick].peer->node, why);
      const size_t alive = alive_peers();
      if (failures >= opts_.rounds * alive) return error{"every peer failed: " + failure_summary()};
      current_ = (*pick + 1) % peers_.size();
      // Every peer has failed since the last chunk: give them a moment before the next round.
      if (failures % alive == 0 && !sleep_unless_cancelled(opts_.retry_pause)) {
        return error{"cancelled"};
      }
    }
  }

  std::optional<size_t> next_peer() const {
    for (size_t k = 0; k < peers_.size(); ++k) {
      const size_t i = (current_ + k) % peers_.size();
      if (!peers_[i].dropped) return i;
    }
    return std::nullopt;
  }

  size_t alive_peers() const {
    return size_t(std::count_if(peers_.begin(), peers_.end(), [](auto& p) { return !p.dropped; }));
  }

  void drop(size_t i, const std::string& why) {
    peers_[i].dropped = true;
    peers_[i].why = why;
    spdlog::warn("copy {}: peer {} dropped: {}", fetch_.transfer_id, peers_[i].peer->node, why);
    if (current_ == i) current_ = (i + 1) % peers_.size();
  }

  std::string failure_summary() const {
    std::string s;
    for (const auto& p : peers_) s += (s.empty() ? "" : "; ") + p.peer->node + ": " + p.why;
    return s;
  }

  bool sleep_unless_cancelled(std::chrono::milliseconds d) {
    const auto until = steady::now() + d;
    while (steady::now() < until) {
      if (cancelled()) return false;
      std::this_thread::sleep_for(std::min<steady::duration>(until - steady::now(), k_fetch_tick));
    }
    return true;
  }

  static void add_written(std::map<uint64_t, uint64_t>& written, uint64_t begin, uint64_t end) {
    auto next = written.lower_bound(begin);
    if (next != written.end() && next->first == end) {
      end = next->second;
      next = written.erase(next);
    }
    if (next != written.begin()) {
      auto prev = std::prev(next);
      if (prev->second == begin) {
        prev->second = end;
        return;
      }
    }
    written.emplace(begin, end);
  }

  // One session with peer i: the blob's missing ranges, `window` requests in flight, until the
  // blob is whole or the peer fails.
  peer_outcome fetch_from(size_t i, const wire::model_file& f, store::partial_blob& part,
                          std::set<size_t>& contributors, bool& got_chunk, std::string& why) {
    const wire::transfer_peer& peer = *peers_[i].peer;
    progress_.from = "peer:" + peer.node;
    if (source_peer_.empty()) source_peer_ = peer.node;
    report();
    zmq::socket_t sock = net::make_socket(ctx_, zmq::socket_type::dealer);
    if (!peer.public_key.empty()) {
      if (opts_.key.public_key.empty()) {
        why = "it runs CURVE and this node has no key";
        return peer_outcome::dropped;
      }
      sock.set(zmq::sockopt::curve_serverkey, peer.public_key);
      sock.set(zmq::sockopt::curve_publickey, opts_.key.public_key);
      sock.set(zmq::sockopt::curve_secretkey, opts_.key.secret_key);
    }
    try {
      sock.connect(peer.endpoint);
    } catch (const zmq::error_t& e) {
      why = "cannot connect to " + peer.endpoint + ": " + e.what();
      return peer_outcome::dropped;
    }
    // Under a rate cap a request asks for at most a tenth of a second's worth (at least 64 KiB),
    // so that the cap holds over short spans too, not only on average.
    uint64_t chunk = opts_.chunk_bytes;
    if (opts_.rate_limit > 0) chunk = std::clamp<uint64_t>(opts_.rate_limit / 10, 64 << 10, chunk);
    std::deque<store::byte_range> queue;
    for (const auto& r : part.missing()) {
      for (uint64_t o = r.offset; o < r.offset + r.length; o += chunk)
        queue.push_back({o, std::min<uint64_t>(chunk, r.offset + r.length - o)});
    }
    std::map<uint64_t, store::byte_range> in_flight;  // by request_id
    std::map<uint64_t, uint64_t> written;             // not yet durable: begin -> end
    uint64_t unflushed = 0;
    range_flusher flusher(part);
    auto last_flush = steady::now(), last_answer = steady::now();
    auto end_session = [&](peer_outcome o) {
      flusher.finish();
      flusher.try_start(written, unflushed);
      flusher.finish();
      progress_.bytes_done = done_before_ + part.bytes_done();
      return o;
    };
    while (true) {
      if (cancelled()) return end_session(peer_outcome::cancelled);
      auto now = steady::now();
      std::chrono::milliseconds wait = k_fetch_tick;
      bool send_blocked = false;  // the peer's queue is full, or it was never connected
      while (in_flight.size() < opts_.window && !queue.empty()) {
        const auto r = queue.front();
        // The rate cap: a request goes when the time the bytes asked before it take at the cap
        // has passed (an idle copy saves up at most k_rate_burst_s of it).
        if (opts_.rate_limit > 0) {
          const auto burst = std::chrono::duration_cast<steady::duration>(
              std::chrono::duration<double>(k_rate_burst_s));
          if (paid_until_ < now - burst) paid_until_ = now - burst;
          if (paid_until_ > now) {
            wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(paid_until_ - now));
            break;
          }
          paid_until_ += std::chrono::duration_cast<steady::duration>(
              std::chrono::duration<double>(double(r.length) / double(opts_.rate_limit)));
        }
        const wire::blob_request req{next_request_id_, fetch_.transfer_id, f.digest, r.offset,
                                     uint32_t(r.length)};
        send_blocked = !net::send(sock, "", req);
        if (send_blocked) break;
        if (in_flight.empty()) last_answer = now;
        in_flight[next_request_id_++] = r;
        queue.pop_front();
      }
      if (in_flight.empty() && queue.empty()) return end_session(peer_outcome::complete);
      // Waiting on the rate cap alone is not the peer's silence.
      if (in_flight.empty() && !send_blocked) last_answer = now;
      zmq::pollitem_t item{sock.handle(), 0, ZMQ_POLLIN, 0};
      net::poll(&item, 1, wait);
      while (auto msg = net::try_recv(sock, false)) {
        const auto frames = msg->views();
        const auto env =
            wire::open_envelope(std::span(frames.data(), std::min<size_t>(frames.size(), 3)));
        if (!env.ok) {
          why = "a malformed answer: " + env.err.message;
          return end_session(peer_outcome::dropped);
        }
        if (env.env.cmd == wire::command::error) {
          auto e = wire::decode<wire::error_reply>(env.env.body);
          if (!e) {
            why = "a malformed error: " + e.message();
            return end_session(peer_outcome::dropped);
          }
          if (e->request_id != 0 && !in_flight.contains(e->request_id)) continue;  // stale
          why = std::string(wire::error_code_name(e->code)) + ": " + e->message;
          const bool for_now =
              e->code == wire::error_code::limit_reached || e->code == wire::error_code::internal;
          return end_session(for_now ? peer_outcome::failed : peer_outcome::dropped);
        }
        auto c = env.env.cmd == wire::command::blob_chunk
                     ? wire::decode<wire::blob_chunk>(env.env.body)
                     : result<wire::blob_chunk>(error{
                           "not a blob_chunk but " + std::string(wire::command_name(env.env.cmd))});
        if (!c) {
          why = "a malformed answer: " + c.message();
          return end_session(peer_outcome::dropped);
        }
        auto it = in_flight.find(c->request_id);
        if (it == in_flight.end()) continue;  // an answer to a request given up on
        const store::byte_range r = it->second;
        if (frames.size() != 4 || c->offset != r.offset || c->length != r.length ||
            frames[3].size() != r.length || c->size != f.size) {
          why = "an answer that does not match its request (offset " + std::to_string(c->offset) +
                ", " + std::to_string(frames.size() == 4 ? frames[3].size() : 0) + " bytes, size " +
                std::to_string(c->size) + ")";
          return end_session(peer_outcome::dropped);
        }
        part.write(r.offset, frames[3].data(), frames[3].size());
        in_flight.erase(it);
        add_written(written, r.offset, r.offset + r.length);
        unflushed += r.length;
        progress_.bytes_from_peers += r.length;
        contributors.insert(i);
        got_chunk = true;
        last_answer = steady::now();
        source_peer_ = peer.node;
        progress_.bytes_done = done_before_ + part.bytes_done() + flusher.pending() + unflushed;
        report();
      }
      now = steady::now();
      if ((unflushed >= opts_.flush_bytes ||
           (unflushed > 0 && now - last_flush >= k_flush_every)) &&
          flusher.try_start(written, unflushed)) {
        unflushed = 0;
        last_flush = now;
        progress_.bytes_done = done_before_ + part.bytes_done();
      }
      if ((!in_flight.empty() || send_blocked) && now - last_answer > opts_.peer_timeout) {
        why = "no answer for " + std::to_string(opts_.peer_timeout.count()) + " ms";
        return end_session(peer_outcome::failed);
      }
    }
  }

  result<store::manifest> put_manifest() {
    store::manifest m;
    m.name = fetch_.name;
    const std::string copied_from =
        "peer:" + (source_peer_.empty() ? fetch_.peers.front().node : source_peer_);
    m.source = fetch_.origin.empty() ? copied_from : fetch_.origin;
    for (const auto& f : fetch_.files) m.files.push_back({f.path, f.digest, f.size});
    m.kind = model_kind_of(m.files);
    m.metadata = nlohmann::json{{"copied_from", copied_from}};
    try {
      store_.put_manifest(m);
    } catch (const std::exception& e) {
      return error{"cannot store the model's manifest: " + std::string(e.what())};
    }
    auto stored = store_.find(m.name);
    if (!stored) return error{"the model's manifest is gone right after it was stored"};
    return *stored;
  }

  store::model_store& store_;
  const wire::model_fetch& fetch_;
  const fetch_options& opts_;
  const std::function<void(const fetch_progress&)>& progress_cb_;
  const std::atomic<bool>* cancel_;
  zmq::context_t ctx_;
  std::vector<peer_state> peers_;
  size_t current_ = 0;
  uint64_t done_before_ = 0;  // bytes of the files before the current one
  uint64_t next_request_id_ = 1;
  steady::time_point paid_until_{};  // the rate cap: requests so far take the cap until then
  fetch_progress progress_;
  std::string source_peer_;  // the last peer that sent bytes (else the first asked)
};

}  // namespace

std::string model_kind_of(const std::vector<store::store_file>& files) {
  const bool all_gguf = std::all_of(files.begin(), files.end(),
                                    [](const auto& f) { return f.path.ends_with(".gguf"); });
  if (all_gguf && files.size() == 1) return std::string(store::manifest_kind_gguf);
  if (all_gguf) return std::string(store::manifest_kind_gguf_split);
  return std::string(store::manifest_kind_hf_folder);
}

result<store::manifest> fetch_model(store::model_store& store, const wire::model_fetch& fetch,
                                    const fetch_options& options,
                                    const std::function<void(const fetch_progress&)>& progress,
                                    const std::atomic<bool>* cancel) {
  model_copy copy(store, fetch, options, progress, cancel);
  return copy.run();
}

}  // namespace hearth::node
