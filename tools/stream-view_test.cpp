// The stream view's numbering and restart handling, fed events directly (no sockets).
#include "tools/stream-view.h"

#include <gtest/gtest.h>

#include "schema/codec.h"

namespace hearth::cli {
namespace {

constexpr uint64_t job = 7;

wire::job_tokens chunk(uint32_t attempt, uint64_t seq, uint32_t n, std::string text) {
  return {job, attempt, seq, n, std::move(text)};
}

wire::job_done done(uint32_t attempt, wire::job_state state = wire::job_state::completed,
                    std::string error = {}) {
  wire::job_done d;
  d.job_id = job;
  d.attempt = attempt;
  d.state = state;
  d.stop_reason = "max_tokens";
  d.error = std::move(error);
  return d;
}

// A view writing to two strings.
struct fixture {
  std::string out, err;
  stream_view view{job, [this](std::string_view s) { out += s; },
                   [this](std::string_view s) { err += s; }, false};
};

TEST(StreamView, ACatchUpFromTheResumePointContinuesWithoutDuplicates) {
  fixture f;
  f.view.on_running({job, 1, "desk"});
  f.view.on_tokens(chunk(1, 0, 2, "Once upon"));
  f.view.on_tokens(chunk(1, 2, 1, " a"));
  const stream_resume p = f.view.resume_point();
  EXPECT_EQ(p.attempt, 1u);
  EXPECT_EQ(p.seq, 3u);
  EXPECT_EQ(p.output_offset, std::string("Once upon a").size());
  // The broker restarted; re-attached, it sends job_running again and the rest from {3, 11} in
  // two pages (n_tokens 0 but the last, all at seq 3), then the node's stream goes on.
  f.view.expect_resume();
  f.view.on_running({job, 1, "desk"});
  f.view.on_tokens(chunk(1, 3, 0, " time"));
  f.view.on_tokens(chunk(1, 3, 2, ", there"));
  f.view.on_tokens(chunk(1, 4, 1, " there"));  // late duplicate
  f.view.on_tokens(chunk(1, 5, 1, " was"));
  f.view.on_done(done(1));
  EXPECT_EQ(f.out, "Once upon a time, there was\n");
  EXPECT_EQ(f.err, "");
}

TEST(StreamView, ACatchUpFromTheStartOfTheAttemptPrintsOnlyWhatIsNew) {
  fixture f;
  f.view.on_tokens(chunk(1, 0, 2, "Once upon"));
  f.view.on_tokens(chunk(1, 2, 1, " a"));
  // The restarted broker holds fewer tokens than we do (it stored 2): it sends the attempt from
  // its start, and the node's resent stream continues from token 2.
  f.view.expect_resume();
  f.view.on_tokens(chunk(1, 0, 0, "Once "));
  f.view.on_tokens(chunk(1, 0, 2, "upon"));
  EXPECT_EQ(f.out, "Once upon a");
  EXPECT_EQ(f.view.attempt_text(), "Once upon");
  f.view.on_tokens(chunk(1, 2, 1, " a"));
  f.view.on_tokens(chunk(1, 3, 1, " time"));
  f.view.on_done(done(1));
  EXPECT_EQ(f.out, "Once upon a time\n");
  EXPECT_EQ(f.err, "");
}

TEST(StreamView, ANewAttemptAfterAResumeResetsTheAttempt) {
  fixture f;
  f.view.on_tokens(chunk(1, 0, 2, "Once upon"));
  f.view.expect_resume();
  // The job was requeued meanwhile: the broker starts attempt 2, which says the same at first.
  f.view.on_restarted({job, 2, "tokens 2..5 of the stream were lost"});
  EXPECT_EQ(f.view.resume_point().attempt, 2u);
  EXPECT_EQ(f.view.resume_point().seq, 0u);
  f.view.on_tokens(chunk(2, 0, 1, "Once"));
  f.view.on_tokens(chunk(2, 1, 2, " upon a"));
  f.view.on_tokens(chunk(1, 2, 1, " late"));  // the replaced attempt
  f.view.on_done(done(2));
  EXPECT_EQ(f.out, "Once upon a\n");
  EXPECT_EQ(f.err, "");
}

TEST(StreamView, PrintsChunksOnceInOrder) {
  fixture f;
  f.view.on_tokens(chunk(1, 0, 1, "Hello"));
  f.view.on_tokens(chunk(1, 1, 1, ","));
  f.view.on_tokens(chunk(1, 1, 1, ","));  // duplicate
  f.view.on_tokens(chunk(1, 0, 1, "Hello"));
  f.view.on_tokens(chunk(1, 2, 2, " world"));
  EXPECT_EQ(f.out, "Hello, world");
  f.view.on_done(done(1));
  EXPECT_EQ(f.out, "Hello, world\n");
  EXPECT_EQ(f.err, "");
  EXPECT_TRUE(f.view.done());
  EXPECT_EQ(f.view.exit_code(), 0);
}

TEST(StreamView, IgnoresOldAttemptsAndOtherJobs) {
  fixture f;
  f.view.on_tokens(chunk(1, 0, 1, "old"));
  f.view.on_restarted({job, 2, "node lost"});
  f.view.on_tokens(chunk(1, 1, 1, " late"));  // the dead attempt's chunk, delivered late
  f.view.on_tokens(chunk(2, 0, 1, "old"));
  f.view.on_tokens({job + 1, 2, 1, 1, "other job"});
  f.view.on_tokens(chunk(2, 1, 1, " new"));
  EXPECT_EQ(f.out, "old new");
  EXPECT_EQ(f.err, "");
}

TEST(StreamView, RestartWithIdenticalTextPrintsOnlyTheRest) {
  fixture f;
  f.view.on_running({job, 1, "alpha"});
  f.view.on_tokens(chunk(1, 0, 1, "The cat"));
  f.view.on_tokens(chunk(1, 1, 1, " sat"));
  f.view.on_restarted({job, 2, "node alpha lost"});
  f.view.on_running({job, 2, "beta"});
  // Chunk boundaries of the new attempt need not match the old ones.
  f.view.on_tokens(chunk(2, 0, 1, "The"));
  f.view.on_tokens(chunk(2, 1, 1, " cat s"));
  EXPECT_EQ(f.out, "The cat sat");
  f.view.on_tokens(chunk(2, 2, 1, "at on"));
  f.view.on_tokens(chunk(2, 3, 1, " the mat"));
  f.view.on_done(done(2));
  EXPECT_EQ(f.out, "The cat sat on the mat\n");
  EXPECT_EQ(f.err, "");
  EXPECT_EQ(f.view.exit_code(), 0);
}

TEST(StreamView, RestartWithDivergentTextSaysSoAndPrintsTheNewAttempt) {
  fixture f;
  f.view.on_tokens(chunk(1, 0, 1, "The cat"));
  f.view.on_tokens(chunk(1, 1, 1, " sat"));
  f.view.on_restarted({job, 2, "node alpha lost"});
  f.view.on_tokens(chunk(2, 0, 1, "The cat"));
  EXPECT_EQ(f.out, "The cat sat");
  f.view.on_tokens(chunk(2, 1, 1, " ran"));
  EXPECT_EQ(f.out, "The cat sat\nThe cat ran");
  EXPECT_EQ(f.err,
            "[hearth: job 7 restarted on another node (node alpha lost); output from here is "
            "the new attempt]\n");
  f.view.on_tokens(chunk(2, 2, 1, " away"));
  f.view.on_done(done(2));
  EXPECT_EQ(f.out, "The cat sat\nThe cat ran away\n");
}

TEST(StreamView, ShorterFinalAttemptIsADifference) {
  fixture f;
  f.view.on_tokens(chunk(1, 0, 2, "Hello world"));
  f.view.on_restarted({job, 2, "handed back"});
  f.view.on_tokens(chunk(2, 0, 1, "Hello"));
  EXPECT_EQ(f.err, "");
  f.view.on_done(done(2));
  EXPECT_EQ(f.out, "Hello world\nHello\n");
  EXPECT_NE(f.err.find("(handed back)"), std::string::npos);
}

TEST(StreamView, WatchSnapshotThenLiveChunks) {
  fixture f;
  // A watch on a running job: the output so far as one seq-0 chunk, then a live chunk that the
  // snapshot already covered, then new ones.
  f.view.on_tokens(chunk(1, 0, 3, "one two three"));
  f.view.on_tokens(chunk(1, 2, 1, " three"));
  f.view.on_tokens(chunk(1, 3, 1, " four"));
  EXPECT_EQ(f.out, "one two three four");
  // A second snapshot (the watch sent again) that extends what we have.
  f.view.on_tokens(chunk(1, 0, 5, "one two three four five"));
  EXPECT_EQ(f.out, "one two three four five");
}

TEST(StreamView, FailedAndCancelledJobs) {
  fixture failed;
  failed.view.on_tokens(chunk(1, 0, 1, "partial"));
  failed.view.on_done(done(1, wire::job_state::failed, "out of memory"));
  EXPECT_EQ(failed.out, "partial\n");
  EXPECT_EQ(failed.err, "hearth: error: job 7 failed: out of memory\n");
  EXPECT_EQ(failed.view.exit_code(), 1);

  fixture cancelled;
  cancelled.view.on_done(done(0, wire::job_state::cancelled));
  EXPECT_EQ(cancelled.out, "");
  EXPECT_EQ(cancelled.err, "hearth: job 7 was cancelled\n");
  EXPECT_EQ(cancelled.view.exit_code(), 1);
  // Nothing after the end counts.
  cancelled.view.on_tokens(chunk(0, 0, 1, "late"));
  EXPECT_EQ(cancelled.out, "");
}

TEST(StreamView, StatusLineOnlyOnATerminalAndOnALineOfItsOwn) {
  std::string out, err;
  stream_view v(
      job, [&](std::string_view s) { out += s; }, [&](std::string_view s) { err += s; }, true);
  v.on_queued({job, 2});
  EXPECT_EQ(err, "\rqueued: position 3\x1b[K");
  v.on_tokens(chunk(0, 0, 1, "text"));
  EXPECT_EQ(err, "\rqueued: position 3\x1b[K\r\x1b[K");
  // Requeued mid-line: a status line would overwrite the text, so it starts a line of its own
  // (issue 52: it said nothing).
  err.clear();
  v.on_queued({job, 0});
  EXPECT_EQ(err, "\n\rqueued: position 1\x1b[K");
  v.on_queued({job, 1});  // the same line, updated
  EXPECT_EQ(err, "\n\rqueued: position 1\x1b[K\rqueued: position 2\x1b[K");
  EXPECT_EQ(out, "text");

  // The text to a pipe: only stderr is on the terminal, nothing to break.
  std::string piped_err;
  stream_view piped(
      job, [](std::string_view) {}, [&](std::string_view s) { piped_err += s; }, true, false);
  piped.on_tokens(chunk(0, 0, 1, "text"));
  piped.on_queued({job, 0});
  EXPECT_EQ(piped_err, "\rqueued: position 1\x1b[K");

  fixture plain;
  plain.view.on_queued({job, 2});
  plain.view.on_running({job, 0, "alpha"});
  EXPECT_EQ(plain.err, "");
}

// Issue 52: a notice from outside the stream (the broker does not answer) while the text is
// mid-line goes on a line of its own; text goes on after it.
TEST(StreamView, ANoticeMidLineStartsALineOfItsOwn) {
  std::string out, err;
  stream_view v(
      job, [&](std::string_view s) { out += s; }, [&](std::string_view s) { err += s; }, true);
  v.on_tokens(chunk(1, 0, 1, "Once upon"));
  v.notice("hearth: the broker at X does not answer\n");
  v.notice("hearth: the broker at X answers again\n");
  v.on_tokens(chunk(1, 1, 1, " a time"));
  EXPECT_EQ(out, "Once upon a time");
  EXPECT_EQ(err,
            "\nhearth: the broker at X does not answer\nhearth: the broker at X answers again\n");
  fixture plain;  // not a terminal: stderr as it was
  plain.view.on_tokens(chunk(1, 0, 1, "Once upon"));
  plain.view.notice("hearth: the broker at X does not answer\n");
  EXPECT_EQ(plain.err, "hearth: the broker at X does not answer\n");
}

// Issue 52: on a terminal a failover is told when it happens, and the new attempt's progress
// through the text already on screen is shown on a status line until new text comes.
TEST(StreamView, AFailoverIsToldAndTheCatchUpShownOnATerminal) {
  std::string out, err;
  stream_view v(
      job, [&](std::string_view s) { out += s; }, [&](std::string_view s) { err += s; }, true);
  v.on_running({job, 1, "alpha"});
  v.on_tokens(chunk(1, 0, 2, "Once upon"));
  err.clear();
  v.on_restarted({job, 2, "node alpha was lost"});
  EXPECT_EQ(err,
            "\nhearth: job 7 starts again (node alpha was lost); the text goes on once the "
            "new attempt passes it\n");
  err.clear();
  v.on_running({job, 2, "beta"});
  v.on_tokens(chunk(2, 0, 1, "Once"));
  EXPECT_NE(err.find("attempt 2 on beta: 44% of the text so far made again"), std::string::npos)
      << err;
  v.on_tokens(chunk(2, 1, 2, " upon a"));
  EXPECT_EQ(out, "Once upon a");
  EXPECT_TRUE(err.ends_with("\r\x1b[K")) << err;  // the status line gave way to the text
}

TEST(StreamView, FeedDecodesBodies) {
  fixture f;
  ASSERT_TRUE(f.view.feed(wire::command::job_tokens, wire::encode(chunk(0, 0, 1, "hi"))).ok());
  ASSERT_TRUE(f.view.feed(wire::command::job_done, wire::encode(done(0))).ok());
  EXPECT_EQ(f.out, "hi\n");
  EXPECT_FALSE(f.view.feed(wire::command::job_tokens, "\x01").ok());
}

TEST(StreamView, FinalFromTheJobRecord) {
  fixture f;
  f.view.on_tokens(chunk(1, 0, 1, "abc"));
  wire::job_summary s;
  s.job_id = job;
  s.state = wire::job_state::completed;
  f.view.on_final(s, "abcdef");
  EXPECT_EQ(f.out, "abcdef\n");
  EXPECT_EQ(f.view.exit_code(), 0);
}

}  // namespace
}  // namespace hearth::cli
