// A fixed pool of worker threads for the CPU backend. The calling thread takes part as thread 0,
// so a pool of N threads starts N-1 workers. Workers spin on an atomic generation counter for a
// short while before sleeping, because the forward pass dispatches many short jobs back to back;
// a wait longer than a few microseconds yields the core while it spins, so a peer that another
// program's work left without a core can run (thread-pool.cpp).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/function-ref.h"

namespace hearth {

class thread_pool {
 public:
  explicit thread_pool(int n_threads);
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  int n_threads() const { return n_threads_; }

  // Runs fn(ith, nth) once on each of the nth threads and returns when all have finished.
  // Not re-entrant: fn must not call run() again.
  void run(function_ref<void(int ith, int nth)> fn);

  // Splits [0, n) into nth contiguous ranges and runs fn(begin, end) on each. `cost` is the
  // rough work per item (multiply-adds, elements touched): when n * cost is below
  // k_min_parallel_work the calling thread does it all, because waking the workers would take
  // longer than the work (a decode step of a small model is hundreds of microsecond-sized ops).
  void parallel_for(int64_t n, function_ref<void(int64_t begin, int64_t end)> fn, int64_t cost = 1);

  // Like parallel_for, but threads take chunks of `chunk` items from a shared counter until none
  // are left, so a thread that was descheduled or runs on a busier core does less, instead of
  // everyone waiting for it (machines here are shared and noisy). Chunks run in no fixed order.
  void parallel_for_dynamic(int64_t n, int64_t chunk,
                            function_ref<void(int64_t begin, int64_t end)> fn, int64_t cost = 1);

  // Like run(), but on the calling thread alone (fn(0, 1)) when `work` is below the threshold.
  void run_sized(int64_t work, function_ref<void(int ith, int nth)> fn);

  static constexpr int64_t k_min_parallel_work = 32768;

  // The number of hardware threads (at least 1): the default thread count.
  static int hardware_threads();

 private:
  void worker(int ith);

  int n_threads_;
  std::vector<std::thread> workers_;
  const function_ref<void(int, int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};              // workers blocked on wake_
  std::atomic<bool> caller_sleeping_{false};  // run() blocked on done_
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
};

}  // namespace hearth
