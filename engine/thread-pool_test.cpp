// The thread pool: every item runs exactly once whatever the split, jobs back to back reuse the
// spinning workers, and jobs after an idle pause (workers asleep) still run on every thread.
#include "engine/thread-pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace hearth {
namespace {

void expect_each_once(const std::vector<std::atomic<int>>& hits) {
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), 1) << "item " << i;
}

TEST(thread_pool, parallel_for_runs_every_item_once) {
  thread_pool pool(3);
  for (int64_t n : {1, 2, 3, 7, 100, 100000}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(
        n,
        [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
        },
        thread_pool::k_min_parallel_work);
    expect_each_once(hits);
  }
}

TEST(thread_pool, dynamic_chunks_run_every_item_once) {
  thread_pool pool(2);
  for (int64_t chunk : {1, 3, 64, 1000}) {
    const int64_t n = 9999;
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for_dynamic(
        n, chunk,
        [&](int64_t b, int64_t e) {
          EXPECT_LE(e - b, chunk);
          for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
        },
        thread_pool::k_min_parallel_work);
    expect_each_once(hits);
  }
}

TEST(thread_pool, every_thread_takes_part_back_to_back_and_after_sleeping) {
  thread_pool pool(2);
  for (int round = 0; round < 2000; ++round) {
    std::atomic<int> mask{0};
    pool.run([&](int ith, int nth) {
      EXPECT_EQ(nth, 2);
      mask.fetch_or(1 << ith);
    });
    ASSERT_EQ(mask.load(), 3) << "round " << round;
    // Now and then wait past the workers' spin time so they go to sleep and must be woken.
    if (round % 500 == 499) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TEST(thread_pool, a_slow_worker_is_waited_for) {
  thread_pool pool(2);
  std::atomic<int> done{0};
  pool.run([&](int ith, int) {
    if (ith == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    done.fetch_add(1);
  });
  EXPECT_EQ(done.load(), 2);
}

TEST(thread_pool, one_thread_runs_on_the_caller) {
  thread_pool pool(1);
  const auto caller = std::this_thread::get_id();
  pool.run([&](int ith, int nth) {
    EXPECT_EQ(ith, 0);
    EXPECT_EQ(nth, 1);
    EXPECT_EQ(std::this_thread::get_id(), caller);
  });
}

}  // namespace
}  // namespace hearth
