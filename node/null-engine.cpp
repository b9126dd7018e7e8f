// The null engine: every model of the catalog, no weights. Each attempt streams max_tokens words
// at a fixed rate, each word a pure function of (prompt, seed, index), so a restarted attempt
// streams exactly the text the first one did and a broker test can check what it relays.
//
// One worker thread keeps the live attempts in a min-heap by the time their next token is due and
// sleeps until the earliest one (or a submit/cancel) instead of polling. Per token it does a heap
// pop/push, a hash and one sink call with a short string (no allocation), so it keeps up with
// benchmark rates of a million tokens per second across many attempts.
#include <spdlog/spdlog.h>
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "node/catalog-engine.h"
#include "node/job-engine.h"
#include "node/model-catalog.h"
#include "schema/job-params.h"

namespace hearth::node {
namespace {

using clock = std::chrono::steady_clock;

constexpr std::array<std::string_view, 16> k_words = {
    "the ", "a ",   "little ", "dog ", "cat ",    "ran ",  "to ",   "park ",
    "sun ", "was ", "happy ",  "and ", "played ", "with ", "ball ", "home ",
};

// splitmix64's finalizer: a cheap, well-mixed 64-bit hash.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// FNV-1a rather than std::hash: the text must not change with the standard library of a node.
uint64_t fnv1a(std::string_view s, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

uint32_t count_words(std::string_view s) {
  uint32_t n = 0;
  bool in_word = false;
  for (unsigned char c : s) {
    const bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
    if (!space && !in_word) ++n;
    in_word = !space;
  }
  return n;
}

struct null_attempt {
  wire::job_ref ref;
  uint64_t key = 0;  // hash of (prompt, seed)
  uint32_t max_tokens = 0;
  uint32_t n_prompt = 0;
  uint32_t n_gen = 0;
  clock::time_point start;
  bool done = false;  // finished (cancelled) while its heap entry is still queued
};

struct due_entry {
  clock::time_point due;
  uint64_t order;  // FIFO among equal times: round-robin when there is no rate limit
  null_attempt* attempt;
  // std::push_heap builds a max-heap: "less" means "due later".
  bool operator<(const due_entry& o) const { return due != o.due ? due > o.due : order > o.order; }
};

using ref_key = std::pair<uint64_t, uint32_t>;

class null_engine final : public catalog_engine {
 public:
  null_engine(const null_engine_config& cfg, job_sink& sink)
      : catalog_engine(cfg, sink), sink_(sink) {
    if (cfg.tokens_per_s > 0) {
      period_ = std::chrono::duration_cast<clock::duration>(
          std::chrono::duration<double>(1.0 / cfg.tokens_per_s));
    }
    worker_ = std::thread([this] { run(); });
  }
  ~null_engine() override { stop(); }

  std::string name() const override { return "null"; }

  // Nothing needs loading, so every model counts as loaded: it answers at once.
  std::vector<wire::model_info> models() const override {
    auto out = catalog_.get()->models();
    for (auto& m : out) m.loaded = true;
    return out;
  }

  void submit(const wire::job_assign& job) override {
    {
      std::lock_guard lk(mu_);
      if (!stopping_) {
        inbox_.push_back(job);
        pending_.store(true, std::memory_order_release);
        cv_.notify_one();
        return;
      }
    }
    report_failed(job, "the engine has stopped");
  }

  void cancel(const wire::job_ref& ref) override {
    std::lock_guard lk(mu_);
    if (stopping_) return;
    cancels_.push_back(ref);
    pending_.store(true, std::memory_order_release);
    cv_.notify_one();
  }

  std::vector<wire::job_ref> stop() override {
    {
      std::lock_guard lk(mu_);
      if (stopping_) return {};
      stopping_ = true;
      pending_.store(true, std::memory_order_release);
      cv_.notify_one();
    }
    worker_.join();
    std::vector<wire::job_ref> out;
    for (const auto& [k, a] : attempts_) {
      if (!a->done) out.push_back(a->ref);
    }
    for (const auto& j : inbox_) out.push_back({j.job_id, j.attempt});
    return out;
  }

 private:
  // job_sink::failed: "" when the node failed (the broker tries another node), or
  // wire::stop_reason_invalid_request when the request itself cannot run.
  void report_failed(const wire::job_assign& job, std::string error, std::string stop_reason = {}) {
    sink_.failed({job.job_id, job.attempt}, std::move(error), std::move(stop_reason));
  }

  void finish(null_attempt& a, wire::job_state state, std::string_view reason) {
    wire::job_final f;
    f.job_id = a.ref.job_id;
    f.attempt = a.ref.attempt;
    f.state = state;
    f.stop_reason = std::string(reason);
    f.n_prompt = a.n_prompt;
    f.n_gen = a.n_gen;
    f.gen_ms = std::chrono::duration<double, std::milli>(clock::now() - a.start).count();
    a.done = true;
    sink_.finished(f);
  }

  void admit(const wire::job_assign& job, clock::time_point now) {
    if (!catalog_.get()->find(job.model)) {
      return report_failed(job, "model '" + job.model + "' is not in this node's models directory");
    }
    // The same check, with the same messages, as the broker and the batch engine.
    if (auto e = wire::job_params_check(job.params); !e.ok()) {
      return report_failed(job, e.message, wire::stop_reason_invalid_request);
    }
    // There is no template to apply: a conversation's words count as its prompt.
    std::string prompt = job.prompt;
    for (const auto& m : job.messages) prompt += "\n" + m.content;
    auto a = std::make_unique<null_attempt>();
    a->ref = {job.job_id, job.attempt};
    a->key = mix64(fnv1a(prompt) ^ mix64(job.params.seed));
    a->max_tokens = uint32_t(job.params.max_tokens);
    a->n_prompt = std::max<uint32_t>(1, count_words(prompt));
    a->start = now;
    const ref_key k{job.job_id, job.attempt};
    if (attempts_.contains(k)) {
      return report_failed(job, "attempt " + std::to_string(job.attempt) + " of job " +
                                    std::to_string(job.job_id) + " is already running");
    }
    sink_.started(a->ref, a->n_prompt, 0);  // no weights to load
    push(a.get());
    attempts_.emplace(k, std::move(a));
  }

  void push(null_attempt* a) {
    const clock::time_point due =
        period_.count() > 0 ? a->start + period_ * int64_t(a->n_gen + 1) : clock::time_point{};
    heap_.push_back({due, next_order_++, a});
    std::push_heap(heap_.begin(), heap_.end());
  }

  // Takes submits and cancels; false when the engine is stopping.
  bool take_inbox() {
    std::vector<wire::job_assign> jobs;
    std::vector<wire::job_ref> cancels;
    {
      std::lock_guard lk(mu_);
      if (stopping_) return false;
      jobs.swap(inbox_);
      cancels.swap(cancels_);
      pending_.store(false, std::memory_order_relaxed);
    }
    const auto now = clock::now();
    for (const auto& j : jobs) admit(j, now);
    for (const auto& r : cancels) {
      auto it = attempts_.find({r.job_id, r.attempt});
      if (it != attempts_.end() && !it->second->done)
        finish(*it->second, wire::job_state::cancelled, "cancelled");
    }
    return true;
  }

  void emit(null_attempt& a) {
    const uint64_t h = mix64(a.key ^ mix64(a.n_gen));
    const std::string_view word = k_words[h % k_words.size()];
    sink_.tokens(a.ref, a.n_gen, 1, std::string(word));
    ++a.n_gen;
  }

  void run() {
    clock::time_point now = clock::now();
    for (;;) {
      if (pending_.load(std::memory_order_acquire) && !take_inbox()) return;
      if (heap_.empty()) {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return pending_.load(std::memory_order_relaxed); });
        continue;
      }
      null_attempt* a = heap_.front().attempt;
      if (a->done) {
        std::pop_heap(heap_.begin(), heap_.end());
        heap_.pop_back();
        attempts_.erase({a->ref.job_id, a->ref.attempt});
        continue;
      }
      const clock::time_point due = heap_.front().due;
      if (due > now) {
        now = clock::now();
        if (due > now) {
          std::unique_lock lk(mu_);
          cv_.wait_until(lk, due, [&] { return pending_.load(std::memory_order_relaxed); });
          now = clock::now();
          continue;
        }
      }
      std::pop_heap(heap_.begin(), heap_.end());
      heap_.pop_back();
      emit(*a);
      if (a->n_gen == a->max_tokens) {
        finish(*a, wire::job_state::completed, "max_tokens");
        attempts_.erase({a->ref.job_id, a->ref.attempt});
      } else {
        push(a);
      }
    }
  }

  job_sink& sink_;
  clock::duration period_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<wire::job_assign> inbox_;
  std::vector<wire::job_ref> cancels_;
  std::atomic<bool> pending_{false};  // inbox_ or cancels_ has something, or stopping_

  // Worker state (read by stop() only after the worker has joined).
  std::map<ref_key, std::unique_ptr<null_attempt>> attempts_;
  std::vector<due_entry> heap_;
  uint64_t next_order_ = 0;
  std::thread worker_;
};

}  // namespace

std::unique_ptr<job_engine> make_null_engine(const null_engine_config& cfg, job_sink& sink) {
  return std::make_unique<null_engine>(cfg, sink);
}

}  // namespace hearth::node
