#include "engine/thread-pool.h"

#include <algorithm>
#include <chrono>

namespace hearth {
namespace {
// How long a worker keeps spinning for the next job before it sleeps on the condition variable.
// A decode step dispatches hundreds of short jobs with gaps of microseconds between them; a
// sleeping worker costs tens of microseconds to wake, so workers stay awake across a step and
// only sleep once the engine has been idle this long.
constexpr auto k_spin_time = std::chrono::microseconds(2000);
// The caller's wait for the last worker spins this many polls before blocking.
constexpr int k_caller_spin = 1 << 20;
// A thread that has waited this long yields its core at every clock check while it goes on
// spinning. A late peer is usually a peer without a core: when another program keeps one busy,
// the peer waits in a run queue, maybe this core's, while this thread spins. TinyLlama Q4_K_M on
// 2 cores, 2 threads, with `yes` busy on one core (Zen 5), `hearth bench -p 64 -n 32`: tg32
// 18-24 -> 37.5-38.5 t/s, pp64 142-190 -> 206-236; alone unchanged in alternation (the host's read
// level moved both between 65 and 84). Yielding from the first check measured 36.6-36.7 t/s,
// after 100 us 29-33, and checking every 128 polls from the first 24-25.
constexpr auto k_yield_after = std::chrono::microseconds(20);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Poll `spin` (from 1) of a spin wait that began at `start`: a pause, and at every 1,024th poll
// a clock check that yields the core past k_yield_after. Returns how long the wait has lasted at
// a clock check, zero between them.
std::chrono::steady_clock::duration spin_poll(int spin,
                                              std::chrono::steady_clock::time_point start) {
  cpu_relax();
  if (spin % 1024 != 0) return {};
  const auto waited = std::chrono::steady_clock::now() - start;
  if (waited > k_yield_after) std::this_thread::yield();
  return waited;
}
}  // namespace

int thread_pool::hardware_threads() {
  return std::max(1u, std::thread::hardware_concurrency());
}

thread_pool::thread_pool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

thread_pool::~thread_pool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void thread_pool::worker(int ith) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    if (gen == seen) {
      const auto start = std::chrono::steady_clock::now();
      for (int spin = 1; gen == seen; ++spin) {
        const bool long_enough = spin_poll(spin, start) > k_spin_time;
        gen = generation_.load(std::memory_order_acquire);
        if (long_enough) break;
      }
    }
    if (gen == seen) {
      // Sleep. Counting sleepers lets dispatch() skip the mutex and the notify while every worker
      // is spinning, which is the common case; seq_cst on both sides makes it safe: either
      // dispatch() sees this sleeper, or the predicate below sees its new generation.
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
      sleepers_.fetch_sub(1);
      gen = generation_.load();
    }
    seen = gen;
    if (stop_) return;
    // A worker that arrives after a shared job was closed skips it; the caller did not wait.
    if (!join(gen)) continue;
    (*job_)(ith, n_threads_);
    finished_.fetch_add(1);
    if (caller_sleeping_.load()) {
      std::lock_guard<std::mutex> lock(mu_);
      done_.notify_one();
    }
  }
}

bool thread_pool::join(uint64_t gen) {
  uint64_t e = entry_.load(std::memory_order_acquire);
  // A newer job than the one this worker saw has replaced it: the worker will see that one next.
  while ((e >> 32) == (gen & 0xffffffffu) && !(e & k_closed)) {
    if (entry_.compare_exchange_weak(e, e + 1, std::memory_order_acq_rel)) return true;
  }
  return false;
}

void thread_pool::dispatch(function_ref<void(int, int)> fn, bool all) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  job_ = &fn;
  finished_.store(0, std::memory_order_relaxed);
  // Whoever sees the new generation sees the open entry and the job (seq_cst store after both).
  const uint64_t gen = generation_.load(std::memory_order_relaxed) + 1;
  entry_.store((gen & 0xffffffffu) << 32, std::memory_order_relaxed);
  generation_.store(gen);
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    wake_.notify_all();
  }
  fn(0, n_threads_);
  // The workers to wait for. A shared job closes here: a worker that has not joined yet will
  // find no work left, so it is not waited for (it may be waiting for a core).
  const int expected = all ? n_threads_ - 1 : int(entry_.fetch_or(k_closed) & k_joined_mask);
  const auto start = std::chrono::steady_clock::now();
  for (int spin = 1; finished_.load(std::memory_order_acquire) != expected && spin < k_caller_spin;
       ++spin)
    spin_poll(spin, start);
  if (finished_.load() != expected) {
    std::unique_lock<std::mutex> lock(mu_);
    caller_sleeping_.store(true);
    done_.wait(lock, [&] { return finished_.load() == expected; });
    caller_sleeping_.store(false);
  }
  job_ = nullptr;
}

void thread_pool::run(function_ref<void(int, int)> fn) {
  dispatch(fn, true);
}

void thread_pool::share(function_ref<void(int, int)> fn) {
  dispatch(fn, false);
}

void thread_pool::share_sized(int64_t work, function_ref<void(int, int)> fn) {
  if (work < k_min_parallel_work) {
    fn(0, 1);
  } else {
    share(fn);
  }
}

void thread_pool::parallel_for(int64_t n, function_ref<void(int64_t, int64_t)> fn, int64_t cost) {
  if (n <= 0) return;
  const int64_t nth = std::min<int64_t>(n_threads_, n);
  parallel_for_dynamic(n, (n + nth - 1) / nth, fn, cost);
}

int64_t thread_pool::tail_chunk(int64_t n) const {
  return std::max<int64_t>(1, n / (64 * int64_t(n_threads_)));
}

void thread_pool::parallel_for_dynamic(int64_t n, int64_t min_chunk,
                                       function_ref<void(int64_t, int64_t)> fn, int64_t cost) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  if (n * cost < k_min_parallel_work || n_threads_ == 1 || n <= min_chunk) {
    fn(0, n);
    return;
  }
  // Guided: each claim takes a (2 * threads)-th of what is left, at least min_chunk. A thread
  // claims a few times per job and the last chunks are small, so the threads finish together.
  // Against fixed chunks of a 16th of a thread's share (the products' before), TinyLlama
  // `hearth bench -p 128 -n 64` on 2 threads (Zen 5), 3 alternations per file: tg64 faster in
  // all 9, Q4_K_M 66.2 / 68.2 / 67.7 -> 67.4 / 70.2 / 70.5 t/s, Q8_0 41.7 / 41.1 / 41.5 ->
  // 41.9 / 41.8 / 41.7, F16 22.9 / 22.8 / 23.0 -> 23.4 / 23.4 / 23.6; pp128 level or faster.
  const int64_t spread = 2 * int64_t(n_threads_);
  std::atomic<int64_t> next{0};
  share([&](int, int) {
    int64_t begin = next.load(std::memory_order_relaxed);
    while (begin < n) {
      const int64_t size = std::max(min_chunk, (n - begin) / spread);
      if (next.compare_exchange_weak(begin, begin + size, std::memory_order_relaxed)) {
        fn(begin, std::min(n, begin + size));
        begin = next.load(std::memory_order_relaxed);
      }
    }
  });
}

}  // namespace hearth
