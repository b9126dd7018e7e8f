// What the node has sent of each attempt's stream, so that it can send it again from any token
// the broker has (job_resume, schema/PROTOCOL.md section 9.5): the text, and the token at which
// each chunk began (the broker's count of an attempt only ever advances by whole chunks). A
// finished attempt is held, with its job_final, for a while after it ended: the broker may have
// lost the end of its stream or its final (it restarted meanwhile). Held attempts are bounded in
// time, in bytes and in number, oldest dropped first; running ones are bounded by their
// max_tokens.
//
// Used by the node's network thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "schema/messages.h"

namespace hearth::node {

struct attempt_journal_limits {
  std::chrono::milliseconds hold = std::chrono::minutes(10);  // how long a finished one is held
  uint64_t held_bytes = uint64_t(64) << 20;                   // text and chunk marks, all held
  // Every held attempt is listed in node_hello.running, which must stay well within
  // max_array_items and the broker's 1 MiB bound on a hello.
  size_t held_attempts = 1024;
};

class attempt_journal {
 public:
  explicit attempt_journal(attempt_journal_limits limits = {}) : limits_(limits) {}

  // An attempt begins (job_assign). False when it is known already, running or held.
  bool start(const wire::job_ref& ref);
  bool knows(const wire::job_ref& ref) const { return attempts_.contains(key(ref)); }
  bool running(const wire::job_ref& ref) const;
  // A chunk is being sent: tokens [seq, seq + n_tokens) and their text. Chunks of an attempt
  // are recorded in order; chunks of unknown attempts are ignored.
  void sent(const wire::job_tokens& chunk);
  // The attempt ended with `final`: from `now` on it is held.
  void finished(const wire::job_final& final, std::chrono::steady_clock::time_point now);
  // Forgets an attempt (the broker cancelled a held one: it is no longer the broker's).
  void drop(const wire::job_ref& ref);
  // Drops the held attempts held longer than limits.hold.
  void expire(std::chrono::steady_clock::time_point now);

  // What to send again on job_resume{ref, seq}: chunks that carry tokens [seq, sent) in order
  // (none when seq is all it sent), each at most max_chunk_bytes of text unless one chunk as it
  // was sent is larger, and the final of a held attempt. An error saying why when the attempt is
  // unknown or seq is not where a chunk it sent began.
  struct replay {
    std::vector<wire::job_tokens> chunks;
    std::optional<wire::job_final> final;
  };
  result<replay> resume(const wire::job_ref& ref, uint64_t seq, size_t max_chunk_bytes) const;

  // Every attempt it knows: the running ones, then the held ones (node_hello.running).
  std::vector<wire::job_ref> refs() const;
  size_t running_count() const { return attempts_.size() - held_.size(); }
  size_t held_count() const { return held_.size(); }
  uint64_t held_bytes() const { return held_bytes_; }

 private:
  using ref_key = std::pair<uint64_t, uint32_t>;
  static ref_key key(const wire::job_ref& r) { return {r.job_id, r.attempt}; }
  struct entry {
    std::string text;                                  // every chunk's text, in order
    std::vector<std::pair<uint64_t, uint64_t>> marks;  // (seq, byte in text) where chunks began
    uint64_t sent = 0;                                 // tokens [0, sent) were sent
    std::optional<wire::job_final> final;              // set: held
    uint64_t bytes() const { return text.size() + marks.size() * sizeof(marks[0]); }
  };
  struct held_entry {
    ref_key ref;
    std::chrono::steady_clock::time_point since;
  };
  void forget_held(std::deque<held_entry>::iterator it);

  attempt_journal_limits limits_;
  std::map<ref_key, entry> attempts_;
  std::deque<held_entry> held_;  // oldest first
  uint64_t held_bytes_ = 0;
};

}  // namespace hearth::node
