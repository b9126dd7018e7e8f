// The follower's filter on its own: repeats after a re-attach or a second watch dropped by byte,
// new attempts announced, chunks passed on numbered without gaps.
#include "client/follow-stream.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hearth::client {
namespace {

constexpr uint64_t job = 7;

wire::job_tokens chunk(uint32_t attempt, uint64_t seq, uint32_t n, std::string text) {
  return wire::job_tokens{job, attempt, seq, n, std::move(text)};
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

void feed(follow_stream& s, seen& v, const job_event& e) {
  std::vector<job_event> out;
  s.feed(e, out);
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

TEST(FollowStream, LiveChunksPassUnchanged) {
  follow_stream s(job);
  seen v;
  feed(s, v, wire::job_running{job, 1, "n"});
  feed(s, v, chunk(1, 0, 2, "ab"));
  feed(s, v, chunk(1, 2, 3, "cde"));
  EXPECT_EQ(v.text, "abcde");
  EXPECT_EQ(v.next_seq, 5u);
  EXPECT_TRUE(v.numbered);
  EXPECT_EQ((s.resume_mark()), (stream_mark{1, 5, 5}));
}

TEST(FollowStream, ExactRepeatsAreDropped) {
  follow_stream s(job);
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
TEST(FollowStream, RestatementFromTheStartGivesOnlyWhatIsNew) {
  follow_stream s(job);
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
TEST(FollowStream, ResumeFromTheMarkContinues) {
  follow_stream s(job);
  seen v;
  feed(s, v, chunk(1, 0, 4, "abcd"));
  const stream_mark m = s.resume_mark();
  EXPECT_EQ(m, (stream_mark{1, 4, 4}));
  s.resume_from(m);
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
TEST(FollowStream, BrokerBehindTheFollowerLosesNothingAndRepeatsNothing) {
  follow_stream s(job);
  seen v;
  feed(s, v, chunk(1, 0, 2, "ab"));
  feed(s, v, chunk(1, 2, 2, "cd"));
  feed(s, v, chunk(1, 4, 2, "ef"));
  s.resume_from(s.resume_mark());    // (6, 6): more than the broker holds, so it starts over
  feed(s, v, chunk(1, 0, 2, "ab"));  // all it had: tokens [0, 2)
  feed(s, v, chunk(1, 2, 2, "cd"));  // the node's stream again from seq 2 (job_resume)
  feed(s, v, chunk(1, 4, 3, "efg"));
  feed(s, v, chunk(1, 7, 1, "h"));
  EXPECT_EQ(v.text, "abcdefgh");
  EXPECT_TRUE(v.numbered);
  EXPECT_EQ(v.next_seq, 8u);
}

TEST(FollowStream, ANewAttemptIsAnnouncedOnce) {
  follow_stream s(job);
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
TEST(FollowStream, AMissedRestartIsAnnounced) {
  follow_stream s(job);
  seen v;
  feed(s, v, wire::job_running{job, 1, "a"});
  feed(s, v, chunk(1, 0, 2, "xy"));
  feed(s, v, wire::job_running{job, 3, "b"});
  feed(s, v, chunk(3, 0, 1, "p"));
  EXPECT_EQ(v.restarts, 1);
  EXPECT_EQ(v.text, "p");

  follow_stream s2(job);
  seen v2;
  feed(s2, v2, chunk(1, 0, 2, "xy"));
  feed(s2, v2, chunk(2, 0, 1, "p"));
  EXPECT_EQ(v2.restarts, 1);
  EXPECT_EQ(v2.text, "p");
}

TEST(FollowStream, AFollowerJoiningLateStartsAtTheLatestAttemptWithoutARestart) {
  follow_stream s(job);
  seen v;
  feed(s, v, wire::job_running{job, 2, "b"});
  feed(s, v, chunk(2, 0, 0, "hello "));
  feed(s, v, chunk(2, 0, 5, "world"));
  EXPECT_EQ(v.restarts, 0);
  EXPECT_EQ(v.text, "hello world");
  EXPECT_TRUE(v.numbered);
}

TEST(FollowStream, NothingAfterTheEnd) {
  follow_stream s(job);
  seen v;
  feed(s, v, chunk(1, 0, 1, "a"));
  feed(s, v, wire::job_done{job, 1, wire::job_state::completed, "max_tokens", "", 3, 1});
  feed(s, v, chunk(1, 1, 1, "b"));
  feed(s, v, wire::job_done{job, 1, wire::job_state::completed, "max_tokens", "", 3, 1});
  EXPECT_TRUE(v.done);
  EXPECT_TRUE(s.done());
  EXPECT_EQ(v.text, "a");

  follow_stream f(job);
  seen w;
  feed(f, w, link_failure{true, wire::error_code::internal, "gone"});
  feed(f, w, chunk(1, 0, 1, "a"));
  EXPECT_TRUE(w.failed);
  EXPECT_EQ(w.text, "");
}

}  // namespace
}  // namespace hearth::client
