#include "node/attempt-journal.h"

#include <algorithm>

namespace hearth::node {

bool attempt_journal::start(const wire::job_ref& ref) {
  return attempts_.try_emplace(key(ref)).second;
}

bool attempt_journal::running(const wire::job_ref& ref) const {
  auto it = attempts_.find(key(ref));
  return it != attempts_.end() && !it->second.final;
}

void attempt_journal::sent(const wire::job_tokens& chunk) {
  auto it = attempts_.find({chunk.job_id, chunk.attempt});
  if (it == attempts_.end() || it->second.final) return;
  entry& e = it->second;
  e.marks.emplace_back(chunk.seq, e.text.size());
  e.text += chunk.text;
  e.sent = chunk.seq + chunk.n_tokens;
}

void attempt_journal::finished(const wire::job_final& final,
                               std::chrono::steady_clock::time_point now) {
  auto it = attempts_.find({final.job_id, final.attempt});
  if (it == attempts_.end() || it->second.final) return;
  entry& e = it->second;
  e.final = final;
  // A chunk mark costs as much as a few tokens of text: shrink the vector to what it holds.
  e.marks.shrink_to_fit();
  e.text.shrink_to_fit();
  held_.push_back({it->first, now});
  held_bytes_ += e.bytes();
  while (!held_.empty() &&
         (held_bytes_ > limits_.held_bytes || held_.size() > limits_.held_attempts)) {
    forget_held(held_.begin());
  }
}

void attempt_journal::forget_held(std::deque<held_entry>::iterator it) {
  auto a = attempts_.find(it->ref);
  held_bytes_ -= a->second.bytes();
  attempts_.erase(a);
  held_.erase(it);
}

void attempt_journal::drop(const wire::job_ref& ref) {
  auto it = attempts_.find(key(ref));
  if (it == attempts_.end()) return;
  if (!it->second.final) {
    attempts_.erase(it);
    return;
  }
  auto h = std::find_if(held_.begin(), held_.end(),
                        [&](const held_entry& e) { return e.ref == key(ref); });
  forget_held(h);
}

void attempt_journal::expire(std::chrono::steady_clock::time_point now) {
  while (!held_.empty() && now - held_.front().since >= limits_.hold) forget_held(held_.begin());
}

result<attempt_journal::replay> attempt_journal::resume(const wire::job_ref& ref, uint64_t seq,
                                                        size_t max_chunk_bytes) const {
  auto it = attempts_.find(key(ref));
  if (it == attempts_.end()) {
    return error{"this node does not know attempt " + std::to_string(ref.attempt) + " of job " +
                 std::to_string(ref.job_id) + " (it ended long ago, or the node restarted)"};
  }
  const entry& e = it->second;
  replay r;
  r.final = e.final;
  if (seq == e.sent) return r;
  auto m = std::lower_bound(e.marks.begin(), e.marks.end(), std::pair(seq, uint64_t(0)));
  if (m == e.marks.end() || m->first != seq) {
    return error{"token " + std::to_string(seq) + " is not where a chunk of attempt " +
                 std::to_string(ref.attempt) + " of job " + std::to_string(ref.job_id) +
                 " began (it sent tokens [0, " + std::to_string(e.sent) + "))"};
  }
  // Whole chunks as they were sent, merged up to max_chunk_bytes, so that each resent chunk ends
  // where one the broker could have counted ended.
  const size_t n = e.marks.size();
  auto byte_at = [&](size_t k) { return k < n ? e.marks[k].second : e.text.size(); };
  auto seq_at = [&](size_t k) { return k < n ? e.marks[k].first : e.sent; };
  for (size_t i = size_t(m - e.marks.begin()); i < n;) {
    size_t j = i + 1;
    while (j < n && byte_at(j + 1) - byte_at(i) <= max_chunk_bytes) ++j;
    wire::job_tokens c;
    c.job_id = ref.job_id;
    c.attempt = ref.attempt;
    c.seq = seq_at(i);
    c.n_tokens = uint32_t(seq_at(j) - seq_at(i));
    c.text = e.text.substr(byte_at(i), byte_at(j) - byte_at(i));
    r.chunks.push_back(std::move(c));
    i = j;
  }
  return r;
}

std::vector<wire::job_ref> attempt_journal::refs() const {
  std::vector<wire::job_ref> out;
  out.reserve(attempts_.size());
  for (const auto& [k, e] : attempts_) {
    if (!e.final) out.push_back({k.first, k.second});
  }
  for (const auto& h : held_) out.push_back({h.ref.first, h.ref.second});
  return out;
}

}  // namespace hearth::node
