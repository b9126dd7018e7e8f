// The thread pool: every item runs exactly once whatever the split, jobs back to back reuse the
// spinning workers, and jobs after an idle pause (workers asleep) still run on every thread. A
// shared job is done whoever joins it, waits for the workers that did, and never runs on a worker
// after it has returned.
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
  for (int64_t min_chunk : {1, 3, 64, 1000}) {
    const int64_t n = 9999;
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::atomic<int> chunks{0};
    pool.parallel_for_dynamic(
        n, min_chunk,
        [&](int64_t b, int64_t e) {
          // A quarter (2 threads) of what was left when it was taken, at least min_chunk, and
          // only the last chunk shorter.
          EXPECT_EQ(e - b, std::min(n - b, std::max(min_chunk, (n - b) / 4))) << "from " << b;
          chunks.fetch_add(1);
          for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
        },
        thread_pool::k_min_parallel_work);
    expect_each_once(hits);
    // Shrinking chunks: far fewer claims than n / min_chunk for a small min_chunk.
    EXPECT_LE(chunks.load(), min_chunk == 1 ? 40 : n / min_chunk + 1) << "min_chunk " << min_chunk;
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

TEST(thread_pool, a_shared_job_is_done_whoever_joins_it) {
  thread_pool pool(3);
  for (int round = 0; round < 3000; ++round) {
    const int64_t n = 1 + round % 50;
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::atomic<int64_t> next{0};
    std::atomic<int> threads{0};
    bool caller_ran = false;
    const auto caller = std::this_thread::get_id();
    pool.share([&](int ith, int nth) {
      EXPECT_EQ(nth, 3);
      ASSERT_TRUE(ith >= 0 && ith < nth);
      EXPECT_EQ(ith == 0, std::this_thread::get_id() == caller);
      if (ith == 0) caller_ran = true;
      EXPECT_EQ(threads.fetch_or(1 << ith) & (1 << ith), 0) << "ith " << ith << " twice";
      for (int64_t i = next++; i < n; i = next++) hits[size_t(i)].fetch_add(1);
    });
    EXPECT_TRUE(caller_ran);
    expect_each_once(hits);
    // Now and then let the workers fall asleep, so they arrive late for the next job.
    if (round % 300 == 299) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TEST(thread_pool, a_shared_job_waits_for_the_workers_that_joined_it) {
  thread_pool pool(2);
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> next{0};
    std::atomic<int> done{0};
    pool.share([&](int ith, int) {
      // The caller leaves the first item to a worker for up to a second (it has joined by then
      // unless it was kept from its core), and a worker is slow with its item; the caller must
      // not return before it is done.
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      while (ith == 0 && next.load() == 0 && std::chrono::steady_clock::now() < until) {
      }
      for (int i = next++; i < 2; i = next++) {
        if (ith != 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        done.fetch_add(1);
      }
    });
    EXPECT_EQ(done.load(), 2) << "round " << round;
  }
}

TEST(thread_pool, a_late_worker_never_runs_a_finished_job) {
  // Each job's function checks that its job is the one in progress. Workers asleep or busy
  // joining arrive late for short jobs; they must skip those, not run them after share() has
  // returned (their function and its captures are gone by then).
  thread_pool pool(3);
  std::atomic<int> current{-1};
  for (int round = 0; round < 2000; ++round) {
    current = round;
    pool.share([&, round](int, int) { EXPECT_EQ(current.load(), round); });
    current = -1;
    if (round % 100 == 99) std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
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
