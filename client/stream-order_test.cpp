// The stream's numbering across attempts and re-attaches, fed chunks directly (no sockets).
#include "client/stream-order.h"

#include <gtest/gtest.h>

namespace hearth::client {
namespace {

constexpr uint64_t job = 7;

wire::job_tokens chunk(uint32_t attempt, uint64_t seq, uint32_t n, std::string text) {
  return {job, attempt, seq, n, std::move(text)};
}

TEST(StreamOrder, NumbersChunksAcrossAttempts) {
  stream_order o;
  EXPECT_EQ(o.accept(chunk(1, 0, 2, "ab")), chunk_verdict::append);
  EXPECT_EQ(o.accept(chunk(1, 0, 2, "ab")), chunk_verdict::duplicate);
  EXPECT_EQ(o.accept(chunk(1, 2, 1, "c")), chunk_verdict::append);
  EXPECT_EQ(o.accept(chunk(1, 1, 1, "b")), chunk_verdict::duplicate);
  EXPECT_EQ(o.next_seq(), 3u);
  EXPECT_EQ(o.accept(chunk(2, 0, 1, "x")), chunk_verdict::append);
  EXPECT_EQ(o.attempt(), 2u);
  EXPECT_EQ(o.accept(chunk(1, 3, 1, "d")), chunk_verdict::old_attempt);
  EXPECT_EQ(o.accept(chunk(2, 5, 1, "y")), chunk_verdict::append);
  EXPECT_EQ(o.gaps(), 1u);
  EXPECT_FALSE(o.begin_attempt(1));
  EXPECT_TRUE(o.begin_attempt(3));
  EXPECT_EQ(o.next_seq(), 0u);
}

TEST(StreamOrder, SeqZeroSnapshotRestatesTheAttempt) {
  stream_order o;
  EXPECT_EQ(o.accept(chunk(0, 0, 1, "a")), chunk_verdict::append);
  EXPECT_EQ(o.accept(chunk(0, 0, 3, "abc")), chunk_verdict::restate);
  EXPECT_EQ(o.next_seq(), 3u);
  EXPECT_EQ(o.accept(chunk(0, 0, 3, "abc")), chunk_verdict::duplicate);
}

TEST(StreamOrder, AfterAResumeSeqZeroRewindsAndTheNextSeqContinues) {
  stream_order o;
  EXPECT_EQ(o.accept(chunk(1, 0, 4, "abcd")), chunk_verdict::append);
  o.expect_resume();
  // The broker sent the attempt again from its start: what we have is replaced.
  EXPECT_EQ(o.accept(chunk(1, 0, 0, "ab")), chunk_verdict::rewind);
  EXPECT_EQ(o.next_seq(), 0u);
  EXPECT_EQ(o.accept(chunk(1, 0, 2, "c")), chunk_verdict::append);
  EXPECT_EQ(o.next_seq(), 2u);
  // Without a resume, a seq-0 chunk that does not reach further is a duplicate, as before.
  EXPECT_EQ(o.accept(chunk(1, 0, 1, "a")), chunk_verdict::duplicate);

  stream_order p;
  EXPECT_EQ(p.accept(chunk(1, 0, 4, "abcd")), chunk_verdict::append);
  p.expect_resume();
  EXPECT_EQ(p.accept(chunk(1, 4, 2, "ef")), chunk_verdict::append);  // it continued
  EXPECT_EQ(p.accept(chunk(1, 0, 0, "ab")), chunk_verdict::duplicate);
}

TEST(StreamOrder, AResumePointAsksForTheAttemptFromItsStartAfterAGap) {
  stream_order o;
  EXPECT_EQ(stream_resume_of(o, "").attempt, 0u);
  o.accept(chunk(2, 0, 3, "abc"));
  auto p = stream_resume_of(o, "abc");
  EXPECT_EQ(p.attempt, 2u);
  EXPECT_EQ(p.seq, 3u);
  EXPECT_EQ(p.output_offset, 3u);
  o.accept(chunk(2, 5, 1, "f"));  // tokens 3 and 4 never came
  p = stream_resume_of(o, "abcf");
  EXPECT_EQ(p.attempt, 2u);
  EXPECT_EQ(p.seq, 0u);
  EXPECT_EQ(p.output_offset, 0u);
}

TEST(StreamOrder, JobDoneOfTheRecord) {
  wire::job_summary s;
  s.job_id = job;
  s.state = wire::job_state::failed;
  s.error = "node lost";
  s.n_gen = 3;
  const wire::job_done d = job_done_of(s, 2);
  EXPECT_EQ(d.job_id, job);
  EXPECT_EQ(d.attempt, 2u);
  EXPECT_EQ(d.state, wire::job_state::failed);
  EXPECT_EQ(d.error, "node lost");
  EXPECT_EQ(d.n_gen, 3u);
  EXPECT_EQ(chunk_verdict_name(chunk_verdict::rewind), "rewind");
}

}  // namespace
}  // namespace hearth::client
