// A pipeline's stages across real sockets in one process (node/stage-host.h,
// node/pipeline-link.h): three stage hosts with CURVE keys on loopback holding stories260K's
// layers [0, 2), [2, 4) and [4, 5), the last one's link driving each step round the ring. What
// the last stage computes from the rows it gets back is the whole model's logits, bit for bit; a
// step from a key that is not the stage before is dropped; a stage that fails a step says so to
// the last stage.
#include "node/stage-host.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <thread>

#include "engine/context.h"
#include "engine/model.h"
#include "node/stage-message.h"
#include "schema/codec.h"
#include "schema/curve-cert.h"
#include "schema/zmq-io.h"
#include "tests/testdata.h"

namespace hearth::node {
namespace {

using namespace std::chrono_literals;

std::string stories() {
  return hearth::testing::testdata_path("models/stories260K.gguf");
}

result<std::unique_ptr<model>> load_range(const std::string&, layer_range r) {
  model_params mp;
  mp.layers = r;
  return model::load(stories(), mp);
}

net::curve_cert key(const std::string& name) {
  auto k = net::curve_cert_generate(name);
  EXPECT_TRUE(k.ok());
  return k.ok() ? *k : net::curve_cert{};
}

bool wait_for(const std::function<bool()>& cond) {
  for (int i = 0; i < 500 && !cond(); ++i) std::this_thread::sleep_for(10ms);
  return cond();
}

// Three hosts on loopback and pipeline 7 over them: [0, 2), [2, 4), [4, 5); the last runs the
// steps.
struct ring {
  std::vector<net::curve_cert> keys{key("a"), key("b"), key("c")};
  std::vector<std::unique_ptr<stage_host>> hosts;
  // What each host said its stages hold (stage_host_options::on_memory).
  std::array<std::atomic<uint64_t>, 3> memory{};
  wire::stage_assign assign;
  // `assign_first` false: the first stage is not told yet.
  explicit ring(bool assign_first = true) {
    for (const auto& k : keys) {
      stage_host_options o;
      o.endpoint = "tcp://127.0.0.1:*";
      o.key = k;
      o.step_timeout = 10s;
      o.on_memory = [this, i = hosts.size()](uint64_t b) { memory[i] = b; };
      hosts.push_back(std::make_unique<stage_host>(o, load_range));
    }
    assign.pipeline_id = 7;
    assign.version = 1;
    assign.model = "stories260K";
    const int32_t cuts[] = {0, 2, 4, 5};
    for (size_t i = 0; i < 3; ++i) {
      assign.stages.push_back({"n" + std::to_string(i), cuts[i], cuts[i + 1],
                               "tcp://127.0.0.1:" + std::to_string(hosts[i]->port()),
                               keys[i].public_key});
    }
    for (uint32_t i = assign_first ? 0 : 1; i < 3; ++i) {
      assign.index = i;
      hosts[i]->assign(assign);
    }
  }
};

std::vector<batch_token> prompt_batch(const std::vector<int32_t>& ids, int32_t seq) {
  std::vector<batch_token> b;
  for (size_t i = 0; i < ids.size(); ++i)
    b.push_back({ids[i], int32_t(i), seq, i + 1 == ids.size()});
  return b;
}

TEST(StageHost, StepsRoundTheRingGiveTheWholeModelsLogitsBitForBit) {
  ring r;
  auto link = r.hosts[2]->driver(7);
  ASSERT_TRUE(link);
  EXPECT_EQ(link->range(), (layer_range{4, 5}));
  auto last = load_range("", {4, 5});
  ASSERT_TRUE(last.ok());
  auto whole = model::load(stories(), model_params{});
  context_params cp;
  cp.n_ctx = 128;
  cp.n_seq_max = 2;
  context split_ctx(**last, cp), whole_ctx(*whole, cp);
  link->open(2, 64);
  const uint32_t n_embd = uint32_t(whole->hparams().n_embd);

  auto step = [&](const std::vector<batch_token>& batch) {
    auto rows = link->run(batch, n_embd, cp.n_batch);
    ASSERT_TRUE(rows.ok()) << rows.message();
    ASSERT_TRUE(split_ctx.decode(batch, *rows).ok());
    ASSERT_TRUE(whole_ctx.decode(batch).ok());
    ASSERT_EQ(split_ctx.n_logits(), whole_ctx.n_logits());
    const size_t n = size_t(whole_ctx.n_logits()) * size_t(whole_ctx.n_vocab());
    EXPECT_EQ(std::memcmp(split_ctx.logits(0), whole_ctx.logits(0), n * sizeof(float)), 0);
  };
  // Two prompts, then a step of both, then one sequence cleared (on every stage) and begun again.
  ASSERT_NO_FATAL_FAILURE(step(prompt_batch({1, 400, 20, 33, 7}, 0)));
  ASSERT_NO_FATAL_FAILURE(step(prompt_batch({1, 9, 300}, 1)));
  ASSERT_NO_FATAL_FAILURE(step({{45, 5, 0, true}, {46, 3, 1, true}}));
  split_ctx.seq_clear(1);
  whole_ctx.seq_clear(1);
  link->seq_clear(1);
  ASSERT_NO_FATAL_FAILURE(step(prompt_batch({1, 77, 78, 79}, 1)));
  EXPECT_EQ(r.hosts[0]->stats().steps, 4u);
  EXPECT_EQ(r.hosts[1]->stats().steps, 4u);
  EXPECT_EQ(r.hosts[0]->stats().dropped, 0u);
  // The stages that compute hold their layers and the cache the first step opened, and say so
  // (the node's engine fits its own models in the rest); the last stage's are the engine's own.
  auto w0 = load_range("", {0, 2});
  ASSERT_TRUE(w0.ok());
  EXPECT_GT(r.memory[0].load(), (*w0)->weight_bytes());
  EXPECT_GT(r.memory[1].load(), 0u);
  EXPECT_EQ(r.memory[2].load(), 0u);
}

TEST(StageHost, AStepFromAKeyThatIsNotTheStageBeforeIsDropped) {
  ring r;
  // A stranger with a valid CURVE key of its own sends the first stage a well-formed step.
  zmq::context_t ctx;
  auto s = net::make_socket(ctx, zmq::socket_type::dealer);
  const auto stranger = key("stranger");
  s.set(zmq::sockopt::curve_serverkey, r.keys[0].public_key);
  s.set(zmq::sockopt::curve_publickey, stranger.public_key);
  s.set(zmq::sockopt::curve_secretkey, stranger.secret_key);
  s.connect(r.assign.stages[0].endpoint);
  wire::stage_batch m;
  m.pipeline_id = 7;
  m.version = 1;
  m.ops = {{"open", 1, 16}};
  stage_tokens_set(m, prompt_batch({1, 2, 3}, 0));
  ASSERT_TRUE(net::send(s, "", m));
  ASSERT_TRUE(wait_for([&] { return r.hosts[0]->stats().dropped == 1; }));
  // An older version: dropped too.
  m.version = 0;
  ASSERT_TRUE(net::send(s, "", m));
  ASSERT_TRUE(wait_for([&] { return r.hosts[0]->stats().dropped == 2; }));
  // A pipeline not assigned here: held for its assignment (which may be on its way from the
  // broker), not computed.
  m.pipeline_id = 8;
  m.version = 1;
  ASSERT_TRUE(net::send(s, "", m));
  ASSERT_TRUE(wait_for([&] { return r.hosts[0]->stats().held == 1; }));
  EXPECT_EQ(r.hosts[0]->stats().steps, 0u);
  EXPECT_EQ(r.hosts[1]->stats().steps, 0u);
  // Rows to the second stage from the stranger: refused by the header, the rows never decoded.
  auto s2 = net::make_socket(ctx, zmq::socket_type::dealer);
  s2.set(zmq::sockopt::curve_serverkey, r.keys[1].public_key);
  s2.set(zmq::sockopt::curve_publickey, stranger.public_key);
  s2.set(zmq::sockopt::curve_secretkey, stranger.secret_key);
  s2.connect(r.assign.stages[1].endpoint);
  m.pipeline_id = 7;
  m.hidden_type = "f32";
  m.n_embd = 64;
  const std::string body = wire::encode(m);
  const std::string code(1, char(wire::command::stage_batch));
  const std::string rows(3 * 64 * 4, '\0');
  s2.send(zmq::buffer(wire::signature), zmq::send_flags::sndmore);
  s2.send(zmq::buffer(code), zmq::send_flags::sndmore);
  s2.send(zmq::buffer(body), zmq::send_flags::sndmore);
  s2.send(zmq::buffer(rows), zmq::send_flags::none);
  ASSERT_TRUE(wait_for([&] { return r.hosts[1]->stats().dropped == 1; }));
  EXPECT_EQ(r.hosts[1]->stats().steps, 0u);
  // The pipeline still works for its own last stage.
  auto link = r.hosts[2]->driver(7);
  link->open(1, 16);
  EXPECT_TRUE(link->run(prompt_batch({1, 2, 3}, 0), 64, 512).ok());
}

TEST(StageHost, AStepThatArrivesBeforeItsAssignmentWaitsForIt) {
  ring r(false);
  auto link = r.hosts[2]->driver(7);
  link->open(1, 16);
  std::thread late([&] {
    std::this_thread::sleep_for(200ms);
    wire::stage_assign a = r.assign;
    a.index = 0;
    r.hosts[0]->assign(a);
  });
  auto rows = link->run(prompt_batch({1, 2, 3}, 0), 64, 512);
  late.join();
  EXPECT_TRUE(rows.ok()) << rows.message();
  EXPECT_EQ(r.hosts[0]->stats().steps, 1u);
  EXPECT_EQ(r.hosts[0]->stats().dropped, 0u);
}

TEST(StageHost, AStageThatFailsAStepTellsTheLastStage) {
  ring r;
  auto link = r.hosts[2]->driver(7);
  link->open(1, 16);
  // A token outside the vocabulary: the first stage's decode refuses it.
  const std::vector<batch_token> bad = {{100000, 0, 0, true}};
  auto rows = link->run(bad, 64, 512);
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.message().find("stage 1 of 3"), std::string::npos) << rows.message();
  // The link is not used again: the stages' caches are unknown.
  const std::vector<batch_token> one = {{1, 0, 0, true}};
  EXPECT_FALSE(link->run(one, 64, 512).ok());
  // A release closes the last stage's link.
  auto link2 = r.hosts[2]->driver(7);
  r.hosts[2]->release(7);
  ASSERT_TRUE(wait_for([&] { return !r.hosts[2]->driver(7); }));
  EXPECT_FALSE(link2->run(one, 64, 512).ok());
}

TEST(StageHost, StageMessagesAreCheckedWhole) {
  wire::stage_batch m;
  stage_tokens_set(m, prompt_batch({1, 2}, 0));
  m.hidden_type = "f32";
  m.n_embd = 4;
  const std::string body = wire::encode(m);
  const std::string code(1, char(wire::command::stage_batch));
  const std::string rows(2 * 4 * 4, '\0');
  std::vector<std::string_view> frames = {wire::signature, code, body, rows};
  ASSERT_TRUE(stage_message_read(frames).ok());
  const std::string short_rows(2 * 4 * 4 - 1, '\0');
  frames[3] = short_rows;
  EXPECT_FALSE(stage_message_read(frames).ok());
  frames.pop_back();  // rows promised, none sent
  EXPECT_FALSE(stage_message_read(frames).ok());
  m.logits.pop_back();  // lists of different lengths
  const std::string uneven = wire::encode(m);
  frames = {wire::signature, code, uneven, rows};
  EXPECT_NE(stage_message_read(frames).message().find("differ in length"), std::string::npos);
  // A NaN in the rows.
  m.logits.push_back(1);
  const std::string body2 = wire::encode(m);
  std::string nan_rows = rows;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(nan_rows.data(), &nan, 4);
  frames = {wire::signature, code, body2, nan_rows};
  EXPECT_FALSE(stage_message_read(frames).ok());
}

}  // namespace
}  // namespace hearth::node
