// A fixed pool of worker threads for the CPU backend. The calling thread takes part as thread 0,
// so a pool of N threads starts N-1 workers. Workers spin on an atomic generation counter for a
// short while before sleeping, because the forward pass dispatches many short jobs back to back;
// a wait longer than a few microseconds yields the core while it spins, so a peer that another
// program's work left without a core can run (thread-pool.cpp).
//
// Most jobs are shared: their threads take work from a shared counter, so the caller does not
// wait for a worker that has not started by the time the work is gone. On a machine where other
// programs keep cores busy, a worker often waits for a core; it then joins whatever job is
// running when it gets one, and the caller never waits for it to arrive only to find nothing.
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
  // Not re-entrant: fn must not call run() or share() again.
  void run(function_ref<void(int ith, int nth)> fn);

  // Runs fn(ith, nth) on the calling thread (ith 0) and on each worker that starts it before the
  // caller's own call has returned; returns when those have finished. ith is unique among them,
  // below nth, but some workers may not run fn at all, so fn must take its work from a shared
  // counter until none is left (the work is done whoever joins).
  void share(function_ref<void(int ith, int nth)> fn);

  // Splits [0, n) into one contiguous range per thread and runs fn(begin, end) on each, the
  // ranges taken from a shared counter by whichever threads share the job (share()), so a thread
  // that is late takes fewer or none. `cost` is the rough work per item (multiply-adds, elements
  // touched): when n * cost is below k_min_parallel_work the calling thread does it all, because
  // waking the workers would take longer than the work (a decode step of a small model is
  // hundreds of microsecond-sized ops).
  void parallel_for(int64_t n, function_ref<void(int64_t begin, int64_t end)> fn, int64_t cost = 1);

  // Like parallel_for, but threads take chunks from a shared counter until none are left, so a
  // thread that was descheduled or runs on a busier core does less, instead of everyone waiting
  // for it (machines here are shared and noisy). Chunks shrink as the work runs out: each is a
  // (2 * nth)-th of what is left, at least min_chunk items. Chunks run in no fixed order.
  void parallel_for_dynamic(int64_t n, int64_t min_chunk,
                            function_ref<void(int64_t begin, int64_t end)> fn, int64_t cost = 1);

  // The smallest chunk for parallel_for_dynamic over n items: a 64th of one thread's share. The
  // last chunks of a product decide how long the first thread done waits for the others.
  int64_t tail_chunk(int64_t n) const;

  // Like share(), but on the calling thread alone (fn(0, 1)) when `work` is below the threshold.
  void share_sized(int64_t work, function_ref<void(int ith, int nth)> fn);

  static constexpr int64_t k_min_parallel_work = 32768;

  // The number of hardware threads (at least 1): the default thread count.
  static int hardware_threads();

 private:
  void worker(int ith);
  // Publishes fn as the next job, runs it as thread 0, then waits for every worker (`all`) or for
  // the workers that joined it before it was closed. With one thread, just fn(0, 1).
  void dispatch(function_ref<void(int, int)> fn, bool all);
  // Whether a worker that saw generation `gen` may run it: the job is still open, and then it
  // counts itself in.
  bool join(uint64_t gen);

  // entry_: the open job's generation (low 32 bits) in the top half, k_closed once the caller has
  // finished its part, and the number of workers that joined in the low bits.
  static constexpr uint64_t k_closed = uint64_t(1) << 31;
  static constexpr uint64_t k_joined_mask = k_closed - 1;

  int n_threads_;
  std::vector<std::thread> workers_;
  const function_ref<void(int, int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> entry_{0};
  std::atomic<int> finished_{0};  // workers that joined this job and have finished it
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};              // workers blocked on wake_
  std::atomic<bool> caller_sleeping_{false};  // dispatch() blocked on done_
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
};

}  // namespace hearth
