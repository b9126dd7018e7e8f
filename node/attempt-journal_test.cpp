// The attempt journal: what is sent again from each chunk boundary, held attempts and their
// bounds (time, bytes, number), drops.
#include "node/attempt-journal.h"

#include <gtest/gtest.h>

namespace hearth::node {
namespace {

using namespace std::chrono_literals;

wire::job_tokens chunk(uint64_t job, uint64_t seq, uint32_t n, std::string text) {
  return {job, 1, seq, n, std::move(text)};
}

wire::job_final final_of(uint64_t job, uint32_t n_gen) {
  wire::job_final f;
  f.job_id = job;
  f.attempt = 1;
  f.state = wire::job_state::completed;
  f.stop_reason = "max_tokens";
  f.n_gen = n_gen;
  return f;
}

// Sends job `job`'s stream: chunks [0,3) "abc", [3,4) "d", [4,8) "efgh".
void stream(attempt_journal& j, uint64_t job) {
  ASSERT_TRUE(j.start({job, 1}));
  j.sent(chunk(job, 0, 3, "abc"));
  j.sent(chunk(job, 3, 1, "d"));
  j.sent(chunk(job, 4, 4, "efgh"));
}

std::string joined(const attempt_journal::replay& r) {
  std::string s;
  for (const auto& c : r.chunks) s += c.text;
  return s;
}

TEST(attempt_journal, resends_from_each_chunk_boundary_what_follows) {
  attempt_journal j;
  stream(j, 7);
  EXPECT_FALSE(j.start({7, 1})) << "an attempt is started once";
  EXPECT_TRUE(j.running({7, 1}));

  auto r = j.resume({7, 1}, 3, 1 << 20);
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->chunks.size(), 1u);
  EXPECT_EQ(r->chunks[0].seq, 3u);
  EXPECT_EQ(r->chunks[0].n_tokens, 5u);
  EXPECT_EQ(r->chunks[0].text, "defgh");
  EXPECT_FALSE(r->final) << "a running attempt has no final yet";

  r = j.resume({7, 1}, 0, 1 << 20);
  ASSERT_TRUE(r);
  EXPECT_EQ(joined(*r), "abcdefgh");

  r = j.resume({7, 1}, 8, 1 << 20);
  ASSERT_TRUE(r) << "all it sent: nothing to send";
  EXPECT_TRUE(r->chunks.empty());
}

TEST(attempt_journal, splits_a_long_resend_at_chunk_boundaries) {
  attempt_journal j;
  stream(j, 7);
  // At most 4 bytes a chunk: "abcd" (tokens 0..3), then "efgh" (4..7).
  auto r = j.resume({7, 1}, 0, 4);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->chunks.size(), 2u);
  EXPECT_EQ(r->chunks[0].seq, 0u);
  EXPECT_EQ(r->chunks[0].n_tokens, 4u);
  EXPECT_EQ(r->chunks[0].text, "abcd");
  EXPECT_EQ(r->chunks[1].seq, 4u);
  EXPECT_EQ(r->chunks[1].n_tokens, 4u);
  EXPECT_EQ(r->chunks[1].text, "efgh");
  // A chunk larger than the bound goes whole, as it was sent.
  r = j.resume({7, 1}, 0, 2);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->chunks.size(), 3u);
  EXPECT_EQ(r->chunks[0].text, "abc");
  EXPECT_EQ(joined(*r), "abcdefgh");
}

TEST(attempt_journal, refuses_seqs_that_are_not_boundaries_and_unknown_attempts) {
  attempt_journal j;
  stream(j, 7);
  auto r = j.resume({7, 1}, 2, 1 << 20);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("not where a chunk"), std::string::npos) << r.message();
  EXPECT_FALSE(j.resume({7, 1}, 9, 1 << 20)) << "past what it sent";
  r = j.resume({7, 2}, 0, 1 << 20);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("does not know attempt 2 of job 7"), std::string::npos) << r.message();
}

TEST(attempt_journal, holds_a_finished_attempt_with_its_final_until_dropped) {
  attempt_journal j;
  stream(j, 7);
  ASSERT_TRUE(j.start({8, 1}));
  const auto t0 = std::chrono::steady_clock::now();
  j.finished(final_of(7, 8), t0);
  EXPECT_FALSE(j.running({7, 1}));
  EXPECT_EQ(j.running_count(), 1u);
  EXPECT_EQ(j.held_count(), 1u);
  const auto refs = j.refs();
  ASSERT_EQ(refs.size(), 2u);
  EXPECT_EQ(refs[0].job_id, 8u) << "running first, then held";
  EXPECT_EQ(refs[1].job_id, 7u);

  auto r = j.resume({7, 1}, 4, 1 << 20);
  ASSERT_TRUE(r);
  EXPECT_EQ(joined(*r), "efgh");
  ASSERT_TRUE(r->final);
  EXPECT_EQ(r->final->n_gen, 8u);
  r = j.resume({7, 1}, 8, 1 << 20);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->chunks.empty());
  EXPECT_TRUE(r->final) << "the final alone";

  j.sent(chunk(7, 8, 1, "late"));  // nothing is added to a finished attempt
  EXPECT_EQ(joined(*j.resume({7, 1}, 0, 1 << 20)), "abcdefgh");

  j.drop({7, 1});
  EXPECT_FALSE(j.knows({7, 1}));
  EXPECT_EQ(j.held_count(), 0u);
  EXPECT_EQ(j.held_bytes(), 0u);
}

TEST(attempt_journal, held_attempts_expire_after_the_hold_time) {
  attempt_journal j({.hold = 10min});
  stream(j, 1);
  stream(j, 2);
  const auto t0 = std::chrono::steady_clock::now();
  j.finished(final_of(1, 8), t0);
  j.finished(final_of(2, 8), t0 + 5min);
  j.expire(t0 + 9min);
  EXPECT_EQ(j.held_count(), 2u);
  j.expire(t0 + 10min);
  EXPECT_FALSE(j.knows({1, 1}));
  EXPECT_TRUE(j.knows({2, 1}));
  j.expire(t0 + 15min);
  EXPECT_EQ(j.held_count(), 0u);
}

TEST(attempt_journal, held_bytes_and_count_are_bounded_oldest_dropped_first) {
  // Each streamed attempt holds 8 bytes of text and 3 chunk marks.
  const uint64_t each = 8 + 3 * sizeof(std::pair<uint64_t, uint64_t>);
  attempt_journal by_bytes({.held_bytes = 2 * each});
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t job = 1; job <= 3; ++job) {
    stream(by_bytes, job);
    by_bytes.finished(final_of(job, 8), t0);
  }
  EXPECT_EQ(by_bytes.held_bytes(), 2 * each);
  EXPECT_FALSE(by_bytes.knows({1, 1}));
  EXPECT_TRUE(by_bytes.knows({2, 1}));
  EXPECT_TRUE(by_bytes.knows({3, 1}));

  attempt_journal by_count({.held_attempts = 2});
  for (uint64_t job = 1; job <= 3; ++job) {
    stream(by_count, job);
    by_count.finished(final_of(job, 8), t0);
  }
  EXPECT_EQ(by_count.held_count(), 2u);
  EXPECT_FALSE(by_count.knows({1, 1}));
  // A held attempt dropped out of order leaves the others' order intact.
  by_count.drop({3, 1});
  stream(by_count, 4);
  by_count.finished(final_of(4, 8), t0);
  stream(by_count, 5);
  by_count.finished(final_of(5, 8), t0);
  EXPECT_FALSE(by_count.knows({2, 1}));
  EXPECT_TRUE(by_count.knows({4, 1}));
  EXPECT_TRUE(by_count.knows({5, 1}));
}

}  // namespace
}  // namespace hearth::node
