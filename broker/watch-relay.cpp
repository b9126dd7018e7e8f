// The watch relay (watch-relay.h): job events to watchers, and the catch-up of those behind.
#include "broker/watch-relay.h"

#include <algorithm>
#include <optional>
#include <unordered_map>

namespace hearth::broker {
namespace {

// What a lagging watcher is sent per turn once its pipe has room again (at most: its pipe's room,
// peer-outbox.h), and the least room worth sending a page into.
constexpr uint64_t k_catch_up_bytes = 1 << 20;
constexpr uint64_t k_catch_up_min_bytes = 16 << 10;

}  // namespace

std::string_view utf8_page(std::string_view text, uint64_t offset, uint64_t max_bytes) {
  if (offset >= text.size()) return {};
  const size_t begin = size_t(offset);
  const size_t limit = std::min<uint64_t>(text.size(), begin + max_bytes);
  auto continuation = [&](size_t i) { return (uint8_t(text[i]) & 0xC0) == 0x80; };
  size_t end = limit;
  while (end > begin && end < text.size() && continuation(end)) --end;
  if (end == begin) {
    end = std::min(limit + 1, text.size());
    while (end < text.size() && continuation(end)) ++end;
  }
  return text.substr(begin, end - begin);
}

output_mark watch_relay::send_output_from(const std::string& rid, uint64_t job_id, uint32_t attempt,
                                          output_mark from, uint64_t end_seq,
                                          const std::string& output, uint64_t max_bytes) {
  return send_output_window(rid, job_id, attempt, from, end_seq, output, 0, output.size(),
                            max_bytes);
}

output_mark watch_relay::send_stored_output_from(const std::string& rid, uint64_t job_id,
                                                 uint32_t attempt, output_mark from,
                                                 uint64_t end_seq, uint64_t total_bytes,
                                                 uint64_t max_bytes) {
  // A few bytes more than it sends, so that its pages can end on character boundaries.
  const std::string window = store_.read_output(job_id, from.byte, max_bytes + k_utf8_lookahead);
  return send_output_window(rid, job_id, attempt, from, end_seq, window, from.byte, total_bytes,
                            max_bytes);
}

output_mark watch_relay::send_output_window(const std::string& rid, uint64_t job_id,
                                            uint32_t attempt, output_mark from, uint64_t end_seq,
                                            std::string_view window, uint64_t base, uint64_t total,
                                            uint64_t max_bytes) {
  // Pages of at most the default page size. The text carries no token boundaries, so every chunk
  // but the one reaching the end has n_tokens 0 at from.seq (never below the next expected seq:
  // none is dropped as a duplicate) and that one carries the count (PROTOCOL.md section 11).
  // `window` holds bytes [base, base + window.size()) of the attempt's `total` bytes; one that
  // stops short of the end keeps its last bytes for looking ahead at character boundaries.
  uint64_t offset = from.byte;
  if (offset >= total && end_seq == from.seq) return from;
  const uint64_t window_end = base + window.size();
  const uint64_t usable_end =
      window_end >= total ? total
                          : window_end - std::min<uint64_t>(k_utf8_lookahead, window.size());
  uint64_t sent = 0;
  do {
    std::string_view page;
    if (offset < usable_end) {
      // At least 4 bytes, so that a page always holds a whole character.
      const uint64_t room =
          std::min<uint64_t>({wire::job_page_bytes_default, usable_end - offset,
                              std::max<uint64_t>(max_bytes - sent, k_utf8_lookahead)});
      page = utf8_page(window, offset - base, room);
    }
    offset += page.size();
    sent += page.size();
    const bool last = offset >= total;
    out_.send(rid, wire::job_tokens{job_id, attempt, from.seq,
                                    last ? uint32_t(end_seq - from.seq) : 0, std::string(page)});
    if (page.empty()) break;
  } while (offset < total && sent < max_bytes);
  return offset >= total ? output_mark{end_seq, offset} : output_mark{from.seq, offset};
}

void watch_relay::deliver(const live_job& j, const std::string& rid, wire::command cmd,
                          const std::string& body) {
  auto lag = lagging_.find({j.row.id, rid});
  switch (cmd) {
    case wire::command::job_tokens:
      if (lag != lagging_.end()) return;  // catch_up_lagging() sends it later, in one piece
      if (outboxes_.bytes_of(rid) > 0) {
        // Its pipe is full: rather than queueing every chunk, remember what it has.
        if (auto t = wire::decode<wire::job_tokens>(body)) {
          watcher_lag& l = lagging_[{j.row.id, rid}];
          l.has = {t->seq, j.output.size() - t->text.size()};
          l.attempt = j.row.attempts;
          return;
        }
      }
      break;
    case wire::command::job_done:
      // The job leaves memory at the end of the turn: the lagging watcher keeps its output (and
      // its job_done) until it has been sent the rest.
      if (lag != lagging_.end()) {
        lag->second.finished = true;
        lag->second.final_seq = j.next_seq;
        lag->second.final_bytes = j.output.size();
        lag->second.done_body = body;
        return;
      }
      break;
    case wire::command::job_running:
    case wire::command::job_restarted:
      // A new attempt: the one it lagged behind is abandoned.
      if (lag != lagging_.end()) lagging_.erase(lag);
      break;
    default:
      break;
  }
  out_.queue_out(rid, cmd, body);
}

void watch_relay::catch_up(zmq::socket_t& router, const job_map& jobs) {
  // What each watcher's pipe has room for this turn, shared by the jobs it lags behind on.
  std::unordered_map<std::string, uint64_t> room;
  // And what all peers together may still be given (max_outbox_bytes counts outboxes and pipes),
  // shared by this turn's catch-ups: 500 watchers of a large output that never read took a page
  // each turn, 3.7 MiB each, 1.9 GiB in all.
  uint64_t total_left = outboxes_.total_room();
  const auto now = net::steady::now();
  for (auto it = lagging_.begin(); it != lagging_.end();) {
    if (total_left < k_catch_up_min_bytes) {
      outboxes_.want_room();  // the peers holding the most are asked to read, or dropped
      break;
    }
    const auto& [job_id, rid] = it->first;
    auto r = room.find(rid);
    if (r == room.end()) {
      r = room.emplace(rid, outboxes_.room(router, rid, k_catch_up_bytes, now)).first;
    }
    // Too little room to be worth a page: its pipe is nearly full, it is sent more later.
    if (r->second < k_catch_up_min_bytes) {
      ++it;
      continue;
    }
    const uint64_t budget = std::min({k_catch_up_bytes, r->second, total_left});
    const uint64_t queued_before = out_.queued_to(rid);
    watcher_lag& l = it->second;
    const auto spent = [&] {
      const uint64_t queued = out_.queued_to(rid);
      const uint64_t took = queued == turn_output::k_peer_dropped ? budget : queued - queued_before;
      r->second = queued == turn_output::k_peer_dropped ? 0 : r->second - std::min(r->second, took);
      total_left -= std::min(total_left, took);
    };
    if (l.finished) {
      // The job's output is in the store: it finished in a turn that has committed.
      l.has = send_stored_output_from(rid, job_id, l.attempt, l.has, l.final_seq, l.final_bytes,
                                      budget);
      spent();
      if (l.has.seq == l.final_seq) {
        out_.queue_out(rid, wire::command::job_done, std::move(l.done_body));
        it = lagging_.erase(it);
      } else {
        ++it;
      }
      continue;
    }
    auto j = jobs.find(job_id);
    if (j == jobs.end() || j->second.row.state != wire::job_state::running) {
      it = lagging_.erase(it);
      continue;
    }
    const live_job& live = j->second;
    l.has =
        send_output_from(rid, job_id, live.row.attempts, l.has, live.next_seq, live.output, budget);
    spent();
    if (l.has.seq == live.next_seq) {
      it = lagging_.erase(it);
    } else {
      ++it;
    }
  }
}

void watch_relay::notify(const live_job& j, wire::command cmd, const std::string& body) {
  for (const auto& w : j.watchers) deliver(j, w, cmd, body);
}

void watch_relay::queue_positions(
    const std::map<std::string, job_queue>& queues, job_map& jobs,
    const std::function<std::string(const std::string&)>& waiting_reason) {
  for (const auto& [model, q] : queues) {
    uint32_t pos = 0;
    std::optional<std::string> waiting;  // the model's, worked out once a round
    for (const auto& [key, id] : q) {
      auto& j = jobs.at(id);
      if (!j.watchers.empty()) {
        if (!waiting) waiting = waiting_reason(model);
        if (j.last_position_sent != pos || j.last_waiting_sent != *waiting) {
          j.last_position_sent = pos;
          j.last_waiting_sent = *waiting;
          notify(j, wire::command::job_queued, wire::encode(wire::job_queued{id, pos, *waiting}));
        }
      }
      ++pos;
    }
  }
}

void watch_relay::catch_up_running(const live_job& j, const std::string& rid, output_mark from) {
  watcher_lag& l = lagging_[{j.row.id, rid}];
  l = {};
  l.has = from;
  l.attempt = j.row.attempts;
}

void watch_relay::catch_up_finished(const job_row& row, const std::string& rid, output_mark from,
                                    std::string done_body) {
  watcher_lag& l = lagging_[{row.id, rid}];
  l = {};
  l.has = from;
  l.attempt = row.attempts;
  l.finished = true;
  l.final_seq = row.n_gen;
  l.final_bytes = row.output_bytes;
  l.done_body = std::move(done_body);
}

void watch_relay::forget_peer(const std::string& rid) {
  std::erase_if(lagging_, [&](const auto& kv) { return kv.first.second == rid; });
}

void watch_relay::reloaded(const job_map& jobs) {
  std::erase_if(lagging_, [&](const auto& kv) {
    auto j = jobs.find(kv.first.first);
    return j == jobs.end() || kv.second.finished || kv.second.attempt != j->second.row.attempts ||
           kv.second.has.byte > j->second.output.size();
  });
}

}  // namespace hearth::broker
