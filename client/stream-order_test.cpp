// The one stream-ordering algorithm, fed chunks and events directly (no sockets): the verdicts the
// blocking face's callers use, and the follower's stream the asynchronous face passes on.
#include "client/stream-order.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hearth::client {
namespace {

constexpr uint64_t job = 7;

wire::job_tokens chunk(uint32_t attempt, uint64_t seq, uint32_t n, std::string text) {
  return {job, attempt, seq, n, std::move(text)};
}

TEST(StreamOrder, NumbersChunksAcrossAttempts) {
  stream_order o;
  EXPECT_EQ(o.accept(chunk(1, 0, 2, "ab")).verdict, chunk_verdict::append);
  EXPECT_EQ(o.accept(chunk(1, 0, 2, "ab")).verdict, chunk_verdict::duplicate);
  EXPECT_EQ(o.accept(chunk(1, 2, 1, "c")).verdict, chunk_verdict::append);
  EXPECT_EQ(o.accept(chunk(1, 1, 1, "b")).verdict, chunk_verdict::duplicate);
  EXPECT_EQ(o.next_seq(), 3u);
  EXPECT_EQ(o.accept(chunk(2, 0, 1, "x")).verdict, chunk_verdict::append);
  EXPECT_EQ(o.attempt(), 2u);
  EXPECT_EQ(o.accept(chunk(1, 3, 1, "d")).verdict, chunk_verdict::old_attempt);
  EXPECT_EQ(o.accept(chunk(2, 5, 1, "y")).verdict, chunk_verdict::append);
  EXPECT_EQ(o.gaps(), 1u);
  EXPECT_FALSE(o.begin_attempt(1));
  EXPECT_TRUE(o.begin_attempt(3));
  EXPECT_EQ(o.next_seq(), 0u);
}

TEST(StreamOrder, SeqZeroSnapshotRestatesTheAttempt) {
  stream_order o;
  EXPECT_EQ(o.accept(chunk(0, 0, 1, "a")).verdict, chunk_verdict::append);
  EXPECT_EQ(o.accept(chunk(0, 0, 3, "abc")).verdict, chunk_verdict::restate);
  EXPECT_EQ(o.next_seq(), 3u);
  EXPECT_EQ(o.accept(chunk(0, 0, 3, "abc")).verdict, chunk_verdict::duplicate);
}

TEST(StreamOrder, AfterAResumeSeqZeroRewindsAndTheNextSeqContinues) {
  stream_order o;
  EXPECT_EQ(o.accept(chunk(1, 0, 4, "abcd")).verdict, chunk_verdict::append);
  o.expect_resume();
  // The broker sent the attempt again from its start: what we have is replaced.
  EXPECT_EQ(o.accept(chunk(1, 0, 0, "ab")).verdict, chunk_verdict::rewind);
  EXPECT_EQ(o.next_seq(), 0u);
  EXPECT_EQ(o.accept(chunk(1, 0, 2, "c")).verdict, chunk_verdict::append);
  EXPECT_EQ(o.next_seq(), 2u);
  // Without a resume, a seq-0 chunk that does not reach further is a duplicate, as before.
  EXPECT_EQ(o.accept(chunk(1, 0, 1, "a")).verdict, chunk_verdict::duplicate);

  stream_order p;
  EXPECT_EQ(p.accept(chunk(1, 0, 4, "abcd")).verdict, chunk_verdict::append);
  p.expect_resume();
  EXPECT_EQ(p.accept(chunk(1, 4, 2, "ef")).verdict, chunk_verdict::append);  // it continued
  EXPECT_EQ(p.accept(chunk(1, 0, 0, "ab")).verdict, chunk_verdict::duplicate);
}

TEST(StreamOrder, AResumePointAsksForTheAttemptFromItsStartAfterAGap) {
  stream_order o;
  EXPECT_EQ(o.resume_point().attempt, 0u);
  o.accept(chunk(2, 0, 3, "abc"));
  auto p = o.resume_point();
  EXPECT_EQ(p.attempt, 2u);
  EXPECT_EQ(p.seq, 3u);
  EXPECT_EQ(p.output_offset, 3u);
  o.accept(chunk(2, 5, 1, "f"));  // tokens 3 and 4 never came
  p = o.resume_point();
  EXPECT_EQ(p.attempt, 2u);
  EXPECT_EQ(p.seq, 0u);
  EXPECT_EQ(p.output_offset, 0u);
}

// The broker's catch-up pages of a restatement (a second watch on the connection) carry no token
// boundaries: each is placed after the one before, by byte.
TEST(StreamOrder, ARestatementInPagesIsPlacedByByte) {
  stream_order o;
  o.accept(chunk(1, 0, 3, "one"));
  o.accept(chunk(1, 3, 3, "two"));
  EXPECT_EQ(o.accept(chunk(1, 0, 0, "onet")).verdict, chunk_verdict::duplicate);
  const chunk_place p = o.accept(chunk(1, 0, 0, "wothr"));
  EXPECT_EQ(p.verdict, chunk_verdict::append);
  EXPECT_EQ(p.pos, 4u);
  EXPECT_EQ(p.fresh, 2u);  // "thr" is beyond what was given
  const chunk_place q = o.accept(chunk(1, 0, 9, "ee"));
  EXPECT_EQ(q.pos, 9u);
  EXPECT_EQ(q.fresh, 0u);
  EXPECT_EQ(o.next_seq(), 9u);
  EXPECT_EQ(o.resume_point(), (stream_resume{1, 9, 11}));
}

TEST(StreamOrder, TheAttemptSentAgainFromItsStartAfterAGapIsWholeAgain) {
  stream_order o;
  o.accept(chunk(2, 0, 3, "abc"));
  o.accept(chunk(2, 5, 1, "f"));
  EXPECT_FALSE(o.attempt_whole());
  o.expect_resume();  // with {2, 0, 0}
  const chunk_place p = o.accept(chunk(2, 0, 6, "abcdef"));
  EXPECT_EQ(p.pos, 0u);
  EXPECT_TRUE(o.attempt_whole());
  EXPECT_EQ(o.resume_point(), (stream_resume{2, 6, 6}));
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

// What a follower made of the events: the text of its current attempt, how many job_restarted
// it saw, and whether the tokens it got were numbered without gaps or overlaps.
struct seen {
  std::string text;
  int restarts = 0;
  int running = 0;
  uint64_t next_seq = 0;
  bool numbered = true;
  bool done = false;
  bool failed = false;
};

void take(seen& v, const std::vector<job_event>& out) {
  for (const auto& o : out) {
    if (auto* t = std::get_if<wire::job_tokens>(&o)) {
      if (t->seq != v.next_seq) v.numbered = false;
      v.next_seq = t->seq + t->n_tokens;
      v.text += t->text;
    } else if (std::get_if<wire::job_restarted>(&o)) {
      ++v.restarts;
      v.text.clear();
      v.next_seq = 0;
    } else if (std::get_if<wire::job_running>(&o)) {
      ++v.running;
    } else if (std::get_if<wire::job_done>(&o)) {
      v.done = true;
    } else if (std::get_if<link_failure>(&o)) {
      v.failed = true;
    }
  }
}

void feed(stream_order& s, seen& v, const job_event& e) {
  std::vector<job_event> out;
  s.feed(e, out);
  take(v, out);
}

TEST(StreamOrderFollower, LiveChunksPassUnchanged) {
  stream_order s;
  seen v;
  feed(s, v, wire::job_running{job, 1, "n"});
  feed(s, v, chunk(1, 0, 2, "ab"));
  feed(s, v, chunk(1, 2, 3, "cde"));
  EXPECT_EQ(v.text, "abcde");
  EXPECT_EQ(v.next_seq, 5u);
  EXPECT_TRUE(v.numbered);
  EXPECT_EQ((s.resume_point()), (stream_resume{1, 5, 5}));
}

TEST(StreamOrderFollower, ExactRepeatsAreDropped) {
  stream_order s;
  seen v;
  feed(s, v, chunk(1, 0, 2, "ab"));
  feed(s, v, chunk(1, 0, 2, "ab"));  // the same chunk twice (no re-attach): seq 0 = byte 0
  feed(s, v, chunk(1, 2, 1, "c"));
  feed(s, v, chunk(1, 2, 1, "c"));  // below the cursor and not at 0: no byte offset known
  feed(s, v, chunk(1, 1, 1, "b"));  // inside what was had: no byte offset known
  EXPECT_EQ(v.text, "abc") << "duplicates must not reach the follower";
  EXPECT_TRUE(v.numbered);
}

// A second watch on the same connection (another follower joining) makes the broker send the
// attempt again from its start in pages with n_tokens 0, the last with the count.
TEST(StreamOrderFollower, RestatementFromTheStartGivesOnlyWhatIsNew) {
  stream_order s;
  seen v;
  feed(s, v, wire::job_running{job, 1, "n"});
  feed(s, v, chunk(1, 0, 3, "one"));
  feed(s, v, chunk(1, 3, 3, "two"));
  feed(s, v, wire::job_running{job, 1, "n"});  // said again with the restatement
  feed(s, v, chunk(1, 0, 0, "onet"));
  feed(s, v, chunk(1, 0, 0, "wothr"));
  feed(s, v, chunk(1, 0, 9, "ee"));  // two tokens beyond what it had
  feed(s, v, chunk(1, 9, 1, "!"));
  EXPECT_EQ(v.text, "onetwothree!");
  EXPECT_EQ(v.running, 1);
  EXPECT_TRUE(v.numbered);
  EXPECT_EQ(v.next_seq, 10u);
}

// After a broker restart the link re-attaches with the mark; the broker resumes there.
TEST(StreamOrderFollower, ResumeFromTheMarkContinues) {
  stream_order s;
  seen v;
  feed(s, v, chunk(1, 0, 4, "abcd"));
  const stream_resume m = s.resume_point();
  EXPECT_EQ(m, (stream_resume{1, 4, 4}));
  s.expect_resume(m);
  feed(s, v, wire::job_running{job, 1, "n"});
  feed(s, v, chunk(1, 4, 0, "ef"));  // catch-up pages from the mark
  feed(s, v, chunk(1, 4, 3, "g"));
  feed(s, v, chunk(1, 7, 1, "h"));
  EXPECT_EQ(v.text, "abcdefgh");
  EXPECT_TRUE(v.numbered);
}

// The restarted broker held less than the follower had (its output is flushed every 250 ms):
// it restates what it has from the start, then the node sends the rest again from the broker's
// count, below what the follower had.
TEST(StreamOrderFollower, BrokerBehindTheFollowerLosesNothingAndRepeatsNothing) {
  stream_order s;
  seen v;
  feed(s, v, chunk(1, 0, 2, "ab"));
  feed(s, v, chunk(1, 2, 2, "cd"));
  feed(s, v, chunk(1, 4, 2, "ef"));
  s.expect_resume(s.resume_point());  // (6, 6): more than the broker holds, so it starts over
  feed(s, v, chunk(1, 0, 2, "ab"));   // all it had: tokens [0, 2)
  feed(s, v, chunk(1, 2, 2, "cd"));   // the node's stream again from seq 2 (job_resume)
  feed(s, v, chunk(1, 4, 3, "efg"));
  feed(s, v, chunk(1, 7, 1, "h"));
  EXPECT_EQ(v.text, "abcdefgh");
  EXPECT_TRUE(v.numbered);
  EXPECT_EQ(v.next_seq, 8u);
}

TEST(StreamOrderFollower, ANewAttemptIsAnnouncedOnce) {
  stream_order s;
  seen v;
  feed(s, v, wire::job_running{job, 1, "a"});
  feed(s, v, chunk(1, 0, 2, "xy"));
  feed(s, v, wire::job_restarted{job, 2, "node a died"});
  feed(s, v, wire::job_queued{job, 0});
  feed(s, v, wire::job_running{job, 2, "b"});
  feed(s, v, chunk(1, 2, 1, "z"));  // a late chunk of the old attempt
  feed(s, v, chunk(2, 0, 2, "pq"));
  EXPECT_EQ(v.restarts, 1);
  EXPECT_EQ(v.running, 2);
  EXPECT_EQ(v.text, "pq");
}

// The job_restarted was sent while the link re-attached: the next attempt's job_running (or its
// first chunk) must still tell the follower that the text starts over.
TEST(StreamOrderFollower, AMissedRestartIsAnnounced) {
  stream_order s;
  seen v;
  feed(s, v, wire::job_running{job, 1, "a"});
  feed(s, v, chunk(1, 0, 2, "xy"));
  feed(s, v, wire::job_running{job, 3, "b"});
  feed(s, v, chunk(3, 0, 1, "p"));
  EXPECT_EQ(v.restarts, 1);
  EXPECT_EQ(v.text, "p");

  stream_order s2;
  seen v2;
  feed(s2, v2, chunk(1, 0, 2, "xy"));
  feed(s2, v2, chunk(2, 0, 1, "p"));
  EXPECT_EQ(v2.restarts, 1);
  EXPECT_EQ(v2.text, "p");
}

TEST(StreamOrderFollower, AFollowerJoiningLateStartsAtTheLatestAttemptWithoutARestart) {
  stream_order s;
  seen v;
  feed(s, v, wire::job_running{job, 2, "b"});
  feed(s, v, chunk(2, 0, 0, "hello "));
  feed(s, v, chunk(2, 0, 5, "world"));
  EXPECT_EQ(v.restarts, 0);
  EXPECT_EQ(v.text, "hello world");
  EXPECT_TRUE(v.numbered);
}

TEST(StreamOrderFollower, NothingAfterTheEnd) {
  stream_order s;
  seen v;
  feed(s, v, chunk(1, 0, 1, "a"));
  feed(s, v, wire::job_done{job, 1, wire::job_state::completed, "max_tokens", "", 3, 1});
  feed(s, v, chunk(1, 1, 1, "b"));
  feed(s, v, wire::job_done{job, 1, wire::job_state::completed, "max_tokens", "", 3, 1});
  EXPECT_TRUE(v.done);
  EXPECT_TRUE(s.done());
  EXPECT_EQ(v.text, "a");

  stream_order f;
  seen w;
  feed(f, w, link_failure{true, wire::error_code::internal, "gone"});
  feed(f, w, chunk(1, 0, 1, "a"));
  EXPECT_TRUE(w.failed);
  EXPECT_EQ(w.text, "");
}

// The job ended while the follower was away: its record gives what was not given, then the end;
// a record of a newer attempt first says that the text starts over.
TEST(StreamOrderFollower, TheRecordGivesWhatWasMissedThenTheEnd) {
  wire::job_summary s;
  s.job_id = job;
  s.state = wire::job_state::completed;
  s.attempts = 1;
  s.n_gen = 4;
  stream_order o;
  seen v;
  feed(o, v, wire::job_running{job, 1, "n"});
  feed(o, v, chunk(1, 0, 2, "ab"));
  std::vector<job_event> out;
  o.feed_final(s, "abcd", out);
  take(v, out);
  EXPECT_EQ(v.text, "abcd");
  EXPECT_TRUE(v.numbered);
  EXPECT_EQ(v.next_seq, 4u);
  EXPECT_TRUE(v.done);
  EXPECT_TRUE(o.done());

  s.attempts = 2;
  stream_order p;
  seen w;
  feed(p, w, chunk(1, 0, 2, "xy"));
  out.clear();
  p.feed_final(s, "abcd", out);
  take(w, out);
  EXPECT_EQ(w.restarts, 1);
  EXPECT_EQ(w.text, "abcd");
  EXPECT_TRUE(w.done);
}

}  // namespace
}  // namespace hearth::client
