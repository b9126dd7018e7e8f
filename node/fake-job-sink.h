// A job_sink test fake for the engine tests: records every event per attempt, thread-safely, and
// lets a test wait (with a timeout) until a condition on the records holds.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "node/job-engine.h"

namespace hearth::node::testing {

// What one attempt reported.
struct fake_attempt_record {
  bool started = false;
  uint32_t n_prompt = 0;
  double load_ms = -1;    // started(): the model's load for it
  uint64_t n_tokens = 0;  // sum of n_tokens over tokens() calls
  uint64_t n_calls = 0;   // tokens() calls
  std::string text;
  bool seq_ok = true;            // every tokens() call continued where the previous one ended
  bool text_with_tokens = true;  // no tokens() call had text without tokens (PROTOCOL.md 11)
  bool started_before_tokens = true;
  int n_finished = 0;
  std::optional<wire::job_final> final;
};

class fake_job_sink final : public job_sink {
 public:
  using key = std::pair<uint64_t, uint32_t>;

  // job_sink: each event is recorded under its attempt.
  void started(const wire::job_ref& ref, uint32_t n_prompt, double load_ms) override {
    std::lock_guard lk(mu_);
    auto& r = records_[{ref.job_id, ref.attempt}];
    r.started = true;
    r.n_prompt = n_prompt;
    r.load_ms = load_ms;
    cv_.notify_all();
  }
  void tokens(const wire::job_ref& ref, uint64_t seq, uint32_t n_tokens,
              std::string text) override {
    {
      std::lock_guard lk(mu_);
      auto& r = records_[{ref.job_id, ref.attempt}];
      if (!r.started) r.started_before_tokens = false;
      if (seq != r.n_tokens) r.seq_ok = false;
      if (n_tokens == 0 && !text.empty()) r.text_with_tokens = false;
      r.n_tokens += n_tokens;
      ++r.n_calls;
      r.text += text;
      cv_.notify_all();
    }
    if (on_tokens) on_tokens(ref, seq, n_tokens);
  }
  void finished(const wire::job_final& final) override {
    std::lock_guard lk(mu_);
    auto& r = records_[{final.job_id, final.attempt}];
    ++r.n_finished;
    r.final = final;
    cv_.notify_all();
  }
  void models_changed() override {
    std::lock_guard lk(mu_);
    ++n_models_changed_;
    cv_.notify_all();
  }

  // Waits until `pred` holds for the records so far; false on timeout.
  bool wait_until(const std::function<bool(const std::map<key, fake_attempt_record>&)>& pred,
                  std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, timeout, [&] { return pred(records_); });
  }
  // Waits until the attempt has finished; false on timeout.
  bool wait_finished(uint64_t job_id, uint32_t attempt = 0,
                     std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    return wait_until(
        [&](const auto& m) {
          auto it = m.find({job_id, attempt});
          return it != m.end() && it->second.final.has_value();
        },
        timeout);
  }
  // Waits until every attempt of these jobs (attempt 0) has finished.
  bool wait_all_finished(const std::vector<uint64_t>& job_ids,
                         std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    return wait_until(
        [&](const auto& m) {
          for (uint64_t id : job_ids) {
            auto it = m.find({id, 0u});
            if (it == m.end() || !it->second.final) return false;
          }
          return true;
        },
        timeout);
  }

  // A copy of what the attempt reported so far (empty when nothing).
  fake_attempt_record record(uint64_t job_id, uint32_t attempt = 0) const {
    std::lock_guard lk(mu_);
    auto it = records_.find({job_id, attempt});
    return it == records_.end() ? fake_attempt_record{} : it->second;
  }
  // Attempts that reported anything.
  size_t n_records() const {
    std::lock_guard lk(mu_);
    return records_.size();
  }
  // models_changed() calls so far.
  int n_models_changed() const {
    std::lock_guard lk(mu_);
    return n_models_changed_;
  }

  // Called after each tokens() is recorded, on the engine's thread (to cancel from there, or to
  // slow the engine down).
  std::function<void(const wire::job_ref&, uint64_t seq, uint32_t n_tokens)> on_tokens;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<key, fake_attempt_record> records_;
  int n_models_changed_ = 0;
};

}  // namespace hearth::node::testing
