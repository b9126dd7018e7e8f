// The node's side of job_resume against a fake broker: a ROUTER socket in the test speaking the
// wire protocol to a real node_daemon (null engine) on a thread. A running attempt sends again
// exactly what follows the broker's count; a finished one is held, listed when the node says
// hello again, sent again with its final, and dropped on job_cancel; what the node cannot resume
// is handed back.
#include "node/node.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <thread>

#include "node/fake-broker.h"
#include "schema/zmq-io.h"
#include "tests/testdata.h"

namespace hearth::node {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

using test_fakes::fake_broker;
using test_fakes::stream_record;

bool lists(const wire::node_hello& h, uint64_t job_id) {
  return std::any_of(h.running.begin(), h.running.end(),
                     [&](const wire::job_ref& r) { return r.job_id == job_id && r.attempt == 1; });
}

class node_resume_test : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string stories = hearth::testing::testdata_path("models/stories260K.gguf");
    ASSERT_FALSE(stories.empty()) << "stories260K test data missing";
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::create_symlink(fs::absolute(stories), dir_ / "stories.gguf");
    node_config cfg;
    cfg.broker = broker_.endpoint();
    cfg.models_dir = dir_.string();
    cfg.name = "resume-node";
    cfg.engine = "null";
    // About 5 tokens a chunk (a chunk waits 5 ms): chunks of several tokens, so that some seqs
    // are not chunk boundaries.
    cfg.null_tokens_per_s = 1000;
    cfg.memory_limit = uint64_t(3) << 30;
    node_ = std::make_unique<node_daemon>(cfg);
    thread_ = std::thread([this] { node_->run(stop_); });
    auto hello = broker_.wait_for<wire::node_hello>();
    ASSERT_TRUE(hello);
    EXPECT_TRUE(hello->running.empty());
    // What the node offers, for the broker's split plans.
    EXPECT_EQ(hello->hardware.memory_limit, uint64_t(3) << 30);
    broker_.welcome();
  }
  void TearDown() override {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    fs::remove_all(dir_);
  }
  void assign(uint64_t job_id, int32_t max_tokens) {
    wire::job_assign a;
    a.job_id = job_id;
    a.attempt = 1;
    a.model = "stories";
    a.prompt = "Once upon a time";
    a.params.max_tokens = max_tokens;
    a.params.seed = 42;
    broker_.send(a);
  }
  std::optional<wire::job_handback> handback_of(uint64_t job_id) {
    return broker_.wait_for<wire::job_handback>(
        [&](const wire::job_handback& h) { return h.job_id == job_id; });
  }

  fs::path dir_ = fs::temp_directory_path() / ("hearth_node_resume_" + std::to_string(getpid()));
  fake_broker broker_;
  std::unique_ptr<node_daemon> node_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_F(node_resume_test, resends_the_rest_of_a_running_and_of_a_held_attempt) {
  assign(7, 3000);
  auto& s = broker_.stream(7);
  // Let it stream a part, then ask again from a chunk boundary in the middle of what came.
  ASSERT_TRUE(broker_.wait_for<wire::job_tokens>([&](const auto&) { return s.next >= 600; }));
  const uint64_t mid = std::next(s.starts.begin(), ptrdiff_t(s.starts.size() / 2))->first;
  ASSERT_GT(mid, 0u);
  broker_.send(wire::job_resume{7, 1, mid});
  ASSERT_TRUE(broker_.wait_for<wire::job_tokens>([&](const auto&) { return !s.again.empty(); }))
      << "no chunk sent again";
  const auto again = s.again.front();
  EXPECT_EQ(again.seq, mid);
  // Everything sent since mid, up to what was sent live before it: exactly the rest.
  EXPECT_EQ(again.seq + again.n_tokens, s.next);
  EXPECT_EQ(again.text, s.text_from(mid));

  // It finishes; the broker "loses" the final and forgets the node. The hello lists the held
  // attempt.
  ASSERT_TRUE(broker_.wait_for<wire::job_final>([](const auto& f) { return f.job_id == 7; }));
  ASSERT_TRUE(s.final);
  EXPECT_EQ(s.final->state, wire::job_state::completed);
  EXPECT_EQ(s.final->n_gen, 3000u);
  EXPECT_EQ(s.next, 3000u);
  auto hello = broker_.forget_node();
  ASSERT_TRUE(hello);
  EXPECT_TRUE(lists(*hello, 7)) << "the finished attempt is held and listed";

  // Resumed from a boundary in the second half: the rest again, then the final again.
  const uint64_t late = std::prev(s.starts.end(), 3)->first;
  s.again.clear();
  broker_.send(wire::job_resume{7, 1, late});
  auto final2 =
      broker_.wait_for<wire::job_final>([](const wire::job_final& f) { return f.job_id == 7; });
  ASSERT_TRUE(final2);
  EXPECT_EQ(final2->state, wire::job_state::completed);
  EXPECT_EQ(final2->n_gen, 3000u);
  std::string resent;
  uint64_t seq = late;
  for (const auto& c : s.again) {
    EXPECT_EQ(c.seq, seq) << "the chunks sent again follow each other";
    resent += c.text;
    seq += c.n_tokens;
  }
  EXPECT_EQ(seq, 3000u);
  EXPECT_EQ(resent, s.text_from(late));

  // Resumed from all it sent: the final alone.
  s.again.clear();
  broker_.send(wire::job_resume{7, 1, 3000});
  ASSERT_TRUE(broker_.wait_for<wire::job_final>([](const auto& f) { return f.job_id == 7; }));
  EXPECT_TRUE(s.again.empty());

  // A seq inside a chunk cannot be resumed: handed back, and the attempt forgotten.
  auto wide = std::adjacent_find(s.starts.begin(), s.starts.end(),
                                 [](auto& a, auto& b) { return b.first > a.first + 1; });
  ASSERT_NE(wide, s.starts.end()) << "no chunk of several tokens";
  broker_.send(wire::job_resume{7, 1, wide->first + 1});
  auto back = handback_of(7);
  ASSERT_TRUE(back);
  EXPECT_NE(back->reason.find("not where a chunk"), std::string::npos) << back->reason;
  hello = broker_.forget_node();
  ASSERT_TRUE(hello);
  EXPECT_FALSE(lists(*hello, 7));
}

TEST_F(node_resume_test, job_cancel_drops_a_held_attempt) {
  assign(8, 20);
  ASSERT_TRUE(broker_.wait_for<wire::job_final>([](const auto& f) { return f.job_id == 8; }));
  auto hello = broker_.forget_node();
  ASSERT_TRUE(hello);
  ASSERT_TRUE(lists(*hello, 8));
  broker_.send(wire::job_cancel{8, 1});
  hello = broker_.forget_node();
  ASSERT_TRUE(hello);
  EXPECT_FALSE(lists(*hello, 8)) << "the cancelled attempt is no longer held";
  // An attempt it does not know: handed back, saying so.
  broker_.send(wire::job_resume{8, 1, 0});
  auto back = handback_of(8);
  ASSERT_TRUE(back);
  EXPECT_NE(back->reason.find("does not know"), std::string::npos) << back->reason;
}

}  // namespace
}  // namespace hearth::node
