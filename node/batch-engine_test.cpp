// The batch engine on the real stories260K model (on the CPU): the reference's greedy
// continuations, concurrent and staggered attempts each giving exactly what engine/generate.cpp
// gives for that prompt alone, cancel, stop, every error path, and least-recently-used unloading
// under a memory budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "backends/select.h"
#include "engine/context.h"
#include "engine/generate.h"
#include "engine/model-file.h"
#include "engine/model.h"
#include "node/fake-job-sink.h"
#include "node/job-engine.h"
#include "schema/job-params.h"
#include "tests/model-variant.h"
#include "tests/testdata.h"

namespace hearth::node {
namespace {

namespace fs = std::filesystem;
using testing::fake_job_sink;

// What generate() gives for a prompt alone in a context of `n_ctx` cells.
struct expected_run {
  std::string text;
  uint32_t n_gen = 0;
  uint32_t n_prompt = 0;
  std::string stop_reason;
};

// A llama2 template with BOS inside the history (TheBloke/FusionNet's), as
// tokenizer.chat_template; chatml is hearth::testing::k_chatml_template.
constexpr const char* k_llama2_bos_template =
    "{%- for idx in range(0, messages|length) -%}{%- if messages[idx]['role'] == 'user' -%}{%- if "
    "idx > 1 -%}{{- bos_token + '[INST] ' + messages[idx]['content'] + ' [/INST]' -}}{%- else "
    "-%}{{- messages[idx]['content'] + ' [/INST]' -}}{%- endif -%}{% elif messages[idx]['role'] == "
    "'system' %}{{- '[INST] <<SYS>>\\n' + messages[idx]['content'] + '\\n<</SYS>>\\n\\n' -}}{%- "
    "elif messages[idx]['role'] == 'assistant' -%}{{- ' '  + messages[idx]['content'] + ' ' + "
    "eos_token -}}{% endif %}{% endfor %}";

class batch_engine_test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string stories = hearth::testing::testdata_path("models/stories260K.gguf");
    const std::string ref = hearth::testing::testdata_path("reference/stories260K.json");
    if (stories.empty() || ref.empty()) return;
    reference_ = new nlohmann::json(nlohmann::json::parse(hearth::testing::read_file_text(ref)));
    model_ = model::load(stories, {}).release();

    dir_ = new fs::path(fs::temp_directory_path() / "hearth_batch_engine_models");
    fs::remove_all(*dir_);
    fs::create_directories(*dir_ / "lru");
    fs::create_symlink(fs::absolute(stories), *dir_ / "stories.gguf");
    fs::create_symlink(fs::absolute(stories), *dir_ / "lru" / "a.gguf");
    fs::create_symlink(fs::absolute(stories), *dir_ / "lru" / "b.gguf");
    std::ofstream(*dir_ / "broken.gguf") << "garbage, not GGUF";
    // '.' (426, the 11th token of the first greedy continuation) as EOS, as in
    // tests/generation_test.cpp.
    eos_path_ = new std::string(hearth::testing::write_stories_variant(
        "node_eos",
        {.metadata = [](gguf_writer& w) { w.set_u32("tokenizer.ggml.eos_token_id", 426); }}));
    fs::copy_file(*eos_path_, *dir_ / "stories-eos.gguf");
    // Random weights over a vocabulary with byte tokens: sampled runs end inside a character.
    const std::string synthetic =
        hearth::testing::testdata_path("models/synthetic/synthetic-llama-a.q8_0.gguf");
    if (!synthetic.empty()) fs::create_symlink(fs::absolute(synthetic), *dir_ / "synthetic.gguf");
    // Chat models: the same weights with a chat template in the metadata (chatml, and llama2
    // with <s> inside the history, which only parse_special turns into BOS).
    auto with_template = [](const std::string& name, const char* tmpl) {
      return hearth::testing::write_stories_variant(name, {.metadata = [tmpl](gguf_writer& w) {
                                                      w.set_string("tokenizer.chat_template", tmpl);
                                                    }});
    };
    fs::copy_file(with_template("node_chatml", hearth::testing::k_chatml_template),
                  *dir_ / "stories-chatml.gguf");
    fs::copy_file(with_template("node_llama2", k_llama2_bos_template),
                  *dir_ / "stories-llama2.gguf");
    // Parses, so the catalog lists it, but does not load.
    fs::copy_file(
        hearth::testing::write_stories_variant(
            "node_mamba",
            {.metadata = [](gguf_writer& w) { w.set_string("general.architecture", "mamba"); }}),
        *dir_ / "mamba.gguf");
  }
  static void TearDownTestSuite() {
    if (dir_) fs::remove_all(*dir_);
    delete dir_;
    delete model_;
    delete reference_;
    delete eos_path_;
  }
  void SetUp() override { ASSERT_TRUE(model_ && reference_) << "stories260K test data missing"; }

  static std::string prompt_of(int i) {
    if (i < 3) return (*reference_)["cases"][i]["prompt"].get<std::string>();
    return "One day, a cat";
  }

  static expected_run alone(const std::string& prompt, const wire::job_params& p, int32_t n_ctx,
                            const hearth::model& m = *model_) {
    return alone_tokens(m.vocab().tokenize(prompt, true, false), p, n_ctx, m);
  }

  static expected_run alone_tokens(const std::vector<int32_t>& tokens, const wire::job_params& p,
                                   int32_t n_ctx, const hearth::model& m = *model_) {
    context ctx(m, {.n_ctx = n_ctx});
    sampler smp(wire::generation_params_of(p).sampling, ctx.n_vocab());
    auto g = generate(ctx, tokens, smp, {.max_tokens = p.max_tokens, .stop = p.stop}, nullptr);
    EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.message());
    if (!g.ok()) return {};
    return {g->text, uint32_t(g->tokens.size()), uint32_t(tokens.size()),
            std::string(stop_reason_name(g->reason))};
  }

  static wire::job_assign job(uint64_t id, const std::string& prompt, wire::job_params p,
                              const std::string& model_name = "stories") {
    wire::job_assign j;
    j.job_id = id;
    j.model = model_name;
    j.prompt = prompt;
    j.params = std::move(p);
    return j;
  }

  static wire::job_params greedy(int32_t max_tokens) {
    wire::job_params p;
    p.max_tokens = max_tokens;
    p.temperature = 0;
    p.seed = 1;
    return p;
  }
  static wire::job_params sampled(int32_t max_tokens, uint64_t seed) {
    wire::job_params p;
    p.max_tokens = max_tokens;
    p.temperature = 0.9f;
    p.repeat_penalty = 1.1f;
    p.seed = seed;
    return p;
  }

  // One engine thread unless asked: the results do not depend on it, and a loaded test machine
  // runs spinning thread pools slowly.
  batch_engine_config config(uint32_t slots, int32_t n_ctx_per_slot, const std::string& sub = "",
                             int32_t threads = 1) {
    batch_engine_config c;
    c.models_dir = (sub.empty() ? *dir_ : *dir_ / sub).string();
    c.slots = slots;
    c.threads = threads;
    c.n_ctx_per_slot = n_ctx_per_slot;
    return c;
  }

  static void expect_matches(const fake_job_sink& sink, uint64_t id, const expected_run& want) {
    const auto r = sink.record(id);
    ASSERT_TRUE(r.final) << "job " << id << " did not finish";
    EXPECT_EQ(r.n_finished, 1) << "job " << id;
    EXPECT_EQ(r.final->state, wire::job_state::completed) << "job " << id << ": " << r.final->error;
    EXPECT_EQ(r.text, want.text) << "job " << id;
    EXPECT_EQ(r.final->n_gen, want.n_gen) << "job " << id;
    EXPECT_EQ(r.n_tokens, want.n_gen) << "job " << id;
    EXPECT_EQ(r.final->n_prompt, want.n_prompt) << "job " << id;
    EXPECT_EQ(r.n_prompt, want.n_prompt) << "job " << id;
    EXPECT_EQ(r.final->stop_reason, want.stop_reason) << "job " << id;
    EXPECT_TRUE(r.started && r.started_before_tokens && r.seq_ok) << "job " << id;
    EXPECT_TRUE(r.text_with_tokens) << "job " << id << ": text came without tokens";
  }

  static std::string failure_of(const fake_job_sink& sink, uint64_t id) {
    const auto r = sink.record(id);
    EXPECT_TRUE(r.final && r.final->state == wire::job_state::failed) << "job " << id;
    EXPECT_FALSE(r.started) << "job " << id;
    return r.final ? r.final->error : "";
  }

  static inline hearth::model* model_ = nullptr;
  static inline nlohmann::json* reference_ = nullptr;
  static inline fs::path* dir_ = nullptr;
  static inline std::string* eos_path_ = nullptr;
};

TEST_F(batch_engine_test, greedy_continuations_match_the_reference) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(3, 128, "", 2), sink);
  EXPECT_EQ(engine->name(), "cpu");
  const auto& cases = (*reference_)["cases"];
  // One after the other, then all three in one batch.
  for (uint64_t i = 0; i < cases.size(); ++i) {
    engine->submit(job(i, cases[i]["prompt"].get<std::string>(), greedy(64)));
    ASSERT_TRUE(sink.wait_finished(i));
  }
  for (uint64_t i = 0; i < cases.size(); ++i)
    engine->submit(job(10 + i, cases[i]["prompt"].get<std::string>(), greedy(64)));
  ASSERT_TRUE(sink.wait_all_finished({10, 11, 12}));
  for (uint64_t i = 0; i < cases.size(); ++i) {
    const expected_run want{cases[i]["greedy_text"].get<std::string>(), 64,
                            uint32_t(cases[i]["prompt_tokens"].size()), "max_tokens"};
    expect_matches(sink, i, want);
    expect_matches(sink, 10 + i, want);
    const auto f = *sink.record(i).final;
    EXPECT_GE(f.prompt_ms, 0);
    EXPECT_GT(f.gen_ms, 0);
  }
}

// backend: vulkan runs on a Vulkan device where there is one (lavapipe in CI) and advertises it;
// elsewhere it falls back to the CPU at load. Either way the reference text, also batched.
TEST_F(batch_engine_test, the_vulkan_backend_gives_the_reference_or_falls_back_to_the_cpu) {
  gpu::backend_choice vulkan;
  vulkan.kind = gpu::backend_kind::vulkan;
  const std::string where = gpu::backend_plan_for(vulkan, gpu::device_registry()).backend_name;
  fake_job_sink sink;
  auto c = config(3, 128);
  c.backend = gpu::backend_kind::vulkan;
  auto engine = make_batch_engine(c, sink);
  EXPECT_EQ(engine->name(), where);
  const auto& cases = (*reference_)["cases"];
  for (uint64_t i = 0; i < cases.size(); ++i)
    engine->submit(job(i, cases[i]["prompt"].get<std::string>(), greedy(64)));
  ASSERT_TRUE(sink.wait_all_finished({0, 1, 2}));
  for (uint64_t i = 0; i < cases.size(); ++i) {
    expect_matches(sink, i,
                   {cases[i]["greedy_text"].get<std::string>(), 64,
                    uint32_t(cases[i]["prompt_tokens"].size()), "max_tokens"});
  }
}

TEST_F(batch_engine_test, concurrent_attempts_each_give_what_they_give_alone) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(4, 128), sink);
  std::vector<wire::job_params> params = {greedy(64), sampled(60, 7), greedy(50), sampled(64, 99)};
  params[2].stop = {"play with the box"};
  for (uint64_t i = 0; i < 4; ++i) engine->submit(job(i, prompt_of(int(i)), params[i]));
  ASSERT_TRUE(sink.wait_all_finished({0, 1, 2, 3}));
  for (uint64_t i = 0; i < 4; ++i)
    expect_matches(sink, i, alone(prompt_of(int(i)), params[i], 128));
  EXPECT_EQ(sink.record(2).final->stop_reason, "stop_string");
}

TEST_F(batch_engine_test, attempts_joining_mid_generation_give_what_they_give_alone) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(4, 128), sink);
  const std::vector<wire::job_params> params = {sampled(64, 3), greedy(64), sampled(64, 5),
                                                greedy(40)};
  // Each attempt's 6th token brings in the next one, so every join lands mid-generation of the
  // attempts already running.
  sink.on_tokens = [&](const wire::job_ref& ref, uint64_t seq, uint32_t) {
    if (seq == 5 && ref.job_id < 3) {
      const uint64_t next = ref.job_id + 1;
      engine->submit(job(next, prompt_of(int(next)), params[next]));
    }
  };
  engine->submit(job(0, prompt_of(0), params[0]));
  ASSERT_TRUE(sink.wait_all_finished({0, 1, 2, 3}));
  for (uint64_t i = 0; i < 4; ++i)
    expect_matches(sink, i, alone(prompt_of(int(i)), params[i], 128));
}

TEST_F(batch_engine_test, a_long_churn_of_attempts_gives_what_each_gives_alone) {
  // Many attempts of different lengths come and go, so freed cells are reused in every order.
  fake_job_sink sink;
  auto engine = make_batch_engine(config(3, 96), sink);
  constexpr uint64_t n_jobs = 24;
  auto params_of = [](uint64_t i) {
    return i % 2 ? sampled(int32_t(10 + (i * 7) % 80), i) : greedy(int32_t(5 + (i * 13) % 85));
  };
  sink.on_tokens = [&](const wire::job_ref& ref, uint64_t seq, uint32_t) {
    if (seq == 3 && ref.job_id + 1 < n_jobs) {
      const uint64_t next = ref.job_id + 1;
      engine->submit(job(next, prompt_of(int(next % 4)), params_of(next)));
    }
  };
  engine->submit(job(0, prompt_of(0), params_of(0)));
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < n_jobs; ++i) ids.push_back(i);
  ASSERT_TRUE(sink.wait_all_finished(ids));
  for (uint64_t i = 0; i < n_jobs; ++i)
    expect_matches(sink, i, alone(prompt_of(int(i % 4)), params_of(i), 96));
}

TEST_F(batch_engine_test, more_attempts_than_slots_wait_for_a_free_sequence) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(2, 128), sink);
  for (uint64_t i = 0; i < 4; ++i) engine->submit(job(i, prompt_of(int(i)), greedy(30)));
  ASSERT_TRUE(sink.wait_all_finished({0, 1, 2, 3}));
  for (uint64_t i = 0; i < 4; ++i)
    expect_matches(sink, i, alone(prompt_of(int(i)), greedy(30), 128));
}

TEST_F(batch_engine_test, a_slot_stops_at_its_share_of_the_context) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(2, 16), sink);
  engine->submit(job(0, prompt_of(0), greedy(64)));  // 5 prompt tokens: 12 fit
  engine->submit(job(1, prompt_of(1), greedy(4)));
  ASSERT_TRUE(sink.wait_all_finished({0, 1}));
  expect_matches(sink, 0, alone(prompt_of(0), greedy(64), 16));
  EXPECT_EQ(sink.record(0).final->stop_reason, "context_full");
  EXPECT_EQ(sink.record(0).final->n_gen, 12u);
  expect_matches(sink, 1, alone(prompt_of(1), greedy(4), 16));
}

TEST_F(batch_engine_test, an_end_of_generation_token_ends_the_attempt) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(2, 128), sink);
  engine->submit(job(0, prompt_of(0), greedy(64), "stories-eos"));
  ASSERT_TRUE(sink.wait_all_finished({0}));
  auto eos_model = model::load(*eos_path_, {});
  expect_matches(sink, 0, alone(prompt_of(0), greedy(64), 128, *eos_model));
  EXPECT_EQ(sink.record(0).final->stop_reason, "end_of_generation");
  EXPECT_EQ(sink.record(0).text, ", there was a little girl named Lily");
}

// The one end rule (engine/sequence.h) and the one parameter check: a job gives what generate()
// gives for the same model, parameters and seed, however it ends; a job the broker would refuse
// fails with the broker's message.
TEST_F(batch_engine_test, a_job_gives_what_generate_gives_for_the_same_params_and_seed) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(2, 64), sink);
  std::vector<wire::job_params> params = {greedy(1), sampled(48, 11), sampled(40, 5),
                                          sampled(64, 8), greedy(64)};
  params[1].top_k = 0;  // the untruncated draw
  params[1].min_p = 0;
  params[2].top_p = 0.5f;
  params[2].repeat_last_n = -1;
  params[3].stop = {"e", "xyz"};  // ends within a few tokens
  params[4].stop = {"Lily."};     // held back over several tokens, then cut
  for (uint64_t i = 0; i < params.size(); ++i)
    engine->submit(job(i, prompt_of(int(i % 4)), params[i]));
  std::vector<uint64_t> ids(params.size());
  for (uint64_t i = 0; i < ids.size(); ++i) ids[i] = i;
  ASSERT_TRUE(sink.wait_all_finished(ids));
  for (uint64_t i = 0; i < params.size(); ++i)
    expect_matches(sink, i, alone(prompt_of(int(i % 4)), params[i], 64));
  EXPECT_EQ(sink.record(0).final->n_gen, 1u);
  EXPECT_EQ(sink.record(0).final->stop_reason, "max_tokens");
  EXPECT_EQ(sink.record(3).final->stop_reason, "stop_string");
  EXPECT_EQ(sink.record(4).final->stop_reason, "stop_string");
}

// A generation cut by max_tokens inside a UTF-8 character ends with U+FFFD, reported with its
// last token (a chunk of text without tokens makes the broker requeue the job and blame the node).
TEST_F(batch_engine_test, a_job_ending_inside_a_character_ends_with_u_fffd_on_its_last_token) {
  const std::string path =
      hearth::testing::testdata_path("models/synthetic/synthetic-llama-a.q8_0.gguf");
  ASSERT_FALSE(path.empty()) << "synthetic-llama-a test data missing";
  auto synthetic = model::load(path, {});
  const std::string k_replacement = "\xEF\xBF\xBD";
  std::vector<uint64_t> seeds;
  std::vector<expected_run> want;
  for (uint64_t seed = 1; seed <= 40 && seeds.size() < 4; ++seed) {
    auto w = alone("hi", sampled(8, seed), 64, *synthetic);
    if (w.text.ends_with(k_replacement)) {
      seeds.push_back(seed);
      want.push_back(w);
    }
  }
  ASSERT_FALSE(seeds.empty()) << "no seed of 40 ends inside a character";
  fake_job_sink sink;
  auto engine = make_batch_engine(config(2, 64), sink);
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < seeds.size(); ++i) {
    engine->submit(job(i, "hi", sampled(8, seeds[i]), "synthetic"));
    ids.push_back(i);
  }
  ASSERT_TRUE(sink.wait_all_finished(ids));
  for (uint64_t i = 0; i < seeds.size(); ++i) {
    expect_matches(sink, i, want[i]);
    EXPECT_EQ(sink.record(i).final->stop_reason, "max_tokens") << "seed " << seeds[i];
    EXPECT_EQ(sink.record(i).n_tokens, 8u) << "seed " << seeds[i];
  }
}

// A model file truncated while a job runs on it (its weights are mapped): the engine survives
// (reads past the new end find zeros, engine/io/mapped-file.h), the job fails saying why before
// any token computed from the changed file is streamed, the truncated file fails to load, and a
// good copy written over it (`cp` keeps the inode) is loaded for the next job.
TEST_F(batch_engine_test, a_model_file_truncated_under_a_job_fails_the_job_not_the_engine) {
  // F32: weights read from the mapping by every product (no packed copy of them).
  const std::string src =
      hearth::testing::testdata_path("models/synthetic/synthetic-llama-a.f32.gguf");
  ASSERT_FALSE(src.empty()) << "synthetic-llama-a test data missing";
  const fs::path sub = *dir_ / "changing";
  fs::create_directories(sub);
  const fs::path file = sub / "model.gguf";
  // Written over below: writable, whatever the test data's mode.
  auto copy_model = [&] {
    if (fs::exists(file)) fs::permissions(file, fs::perms::owner_write, fs::perm_options::add);
    fs::copy_file(src, file, fs::copy_options::overwrite_existing);
    fs::permissions(file, fs::perms::owner_write, fs::perm_options::add);
  };
  copy_model();

  fake_job_sink sink;
  std::atomic<uint64_t> truncated_at{0};
  sink.on_tokens = [&](const wire::job_ref& ref, uint64_t seq, uint32_t n) {
    if (ref.job_id == 1 && seq + n >= 4 && truncated_at.load() == 0) {
      truncated_at = seq + n;
      fs::resize_file(file, 4096);  // on the engine's thread, between two steps
    }
  };
  auto cfg = config(2, 256, "changing");
  cfg.models_rescan_ms = 50;  // the good copy below is found again
  auto engine = make_batch_engine(cfg, sink);
  engine->submit(job(0, "hi", sampled(4, 1), "model"));  // loads it
  ASSERT_TRUE(sink.wait_all_finished({0}));
  ASSERT_EQ(sink.record(0).final->state, wire::job_state::completed) << sink.record(0).final->error;

  engine->submit(job(1, "hi", sampled(200, 3), "model"));
  ASSERT_TRUE(sink.wait_all_finished({1}));
  const auto r1 = sink.record(1);
  ASSERT_GT(truncated_at.load(), 0u) << "the job ended before the file was truncated";
  EXPECT_EQ(r1.final->state, wire::job_state::failed);
  EXPECT_NE(r1.final->error.find("changed on disk"), std::string::npos) << r1.final->error;
  // No token is sampled from a pass that ran after the change (tokens held back for their text
  // before it come with the failure).
  EXPECT_GE(r1.n_tokens, truncated_at.load());
  EXPECT_LE(r1.n_tokens, truncated_at.load() + 3);
  EXPECT_EQ(r1.final->n_gen, r1.n_tokens);

  engine->submit(job(2, "hi", sampled(4, 1), "model"));
  ASSERT_TRUE(sink.wait_all_finished({2}));
  EXPECT_EQ(sink.record(2).final->state, wire::job_state::failed);
  EXPECT_FALSE(sink.record(2).started);

  // The truncated file was dropped from the catalog at once (the node stops advertising it);
  // the good copy comes back with a rescan.
  EXPECT_TRUE(engine->models().empty());
  copy_model();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (engine->models().empty() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  engine->submit(job(3, "hi", sampled(4, 1), "model"));
  ASSERT_TRUE(sink.wait_all_finished({3}));
  EXPECT_EQ(sink.record(3).final->state, wire::job_state::completed) << sink.record(3).final->error;
  EXPECT_EQ(sink.record(3).text, sink.record(0).text);  // the same file again, the same job
  // The attempts that loaded the model say how long it took (job_started.load_ms).
  EXPECT_GT(sink.record(0).load_ms, 0);
  EXPECT_EQ(sink.record(1).load_ms, 0);
  EXPECT_GT(sink.record(3).load_ms, 0);
  engine.reset();
  fs::remove_all(sub);
}

// A model file replaced by a rename (as `mv` or rsync update one) leaves the mapped file intact:
// the job running on it completes as it would have, and the next job reads the new file.
TEST_F(batch_engine_test, a_model_file_renamed_over_lets_its_job_finish_and_the_next_reads_it) {
  const std::string f32 =
      hearth::testing::testdata_path("models/synthetic/synthetic-llama-a.f32.gguf");
  const std::string q8 =
      hearth::testing::testdata_path("models/synthetic/synthetic-llama-a.q8_0.gguf");
  ASSERT_FALSE(f32.empty() || q8.empty()) << "synthetic-llama-a test data missing";
  const fs::path sub = *dir_ / "renamed";
  fs::create_directories(sub);
  const fs::path file = sub / "model.gguf";
  fs::copy_file(f32, file, fs::copy_options::overwrite_existing);

  fake_job_sink sink;
  std::atomic<bool> renamed{false};
  sink.on_tokens = [&](const wire::job_ref& ref, uint64_t seq, uint32_t n) {
    if (ref.job_id == 1 && seq + n >= 4 && !renamed.exchange(true)) {
      fs::copy_file(q8, sub / "model.part", fs::copy_options::overwrite_existing);
      fs::rename(sub / "model.part", file);
    }
  };
  auto engine = make_batch_engine(config(2, 256, "renamed"), sink);
  engine->submit(job(0, "hi", sampled(4, 1), "model"));
  ASSERT_TRUE(sink.wait_all_finished({0}));
  engine->submit(job(1, "hi", greedy(64), "model"));
  ASSERT_TRUE(sink.wait_all_finished({1}));
  ASSERT_TRUE(renamed.load());
  auto f32_model = model::load(f32, {});
  expect_matches(sink, 1, alone("hi", greedy(64), 256, *f32_model));

  engine->submit(job(2, "hi", greedy(8), "model"));
  ASSERT_TRUE(sink.wait_all_finished({2}));
  auto q8_model = model::load(q8, {});
  expect_matches(sink, 2, alone("hi", greedy(8), 256, *q8_model));
  EXPECT_GT(sink.record(2).load_ms, 0);  // read again
  engine.reset();
  fs::remove_all(sub);
}

// The catalog's scan opened the file (its header parsed, the file mapped): a load takes that
// handle and opens nothing again while the file is unchanged.
TEST_F(batch_engine_test, a_load_uses_the_file_the_catalog_scan_opened) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(1, 64, "lru"), sink);
  const uint64_t opened_before = model_file::opened_count();
  engine->submit(job(0, "hi", greedy(4), "a"));
  ASSERT_TRUE(sink.wait_all_finished({0}));
  expect_matches(sink, 0, alone("hi", greedy(4), 64, *model_));
  EXPECT_EQ(model_file::opened_count(), opened_before);
}

TEST_F(batch_engine_test, a_job_the_broker_refuses_fails_with_the_brokers_message) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(1, 64), sink);
  auto cold = greedy(4);
  cold.temperature = -1;
  auto negative_top_k = greedy(4);
  negative_top_k.top_k = -1;
  const std::vector<wire::job_params> bad = {greedy(0), cold, negative_top_k, greedy(1 << 21)};
  for (uint64_t i = 0; i < bad.size(); ++i) engine->submit(job(i, prompt_of(0), bad[i]));
  ASSERT_TRUE(sink.wait_all_finished({0, 1, 2, 3}));
  EXPECT_EQ(failure_of(sink, 0), "max_tokens must be in [1, 1048576], got 0");
  EXPECT_EQ(failure_of(sink, 1), "temperature must be finite and >= 0 (0 = greedy), got -1");
  EXPECT_EQ(failure_of(sink, 2), "top_k must be >= 0 (0 = off), got -1");
  EXPECT_EQ(failure_of(sink, 3), "max_tokens must be in [1, 1048576], got 2097152");
  for (uint64_t i = 0; i < bad.size(); ++i)
    EXPECT_EQ(failure_of(sink, i), wire::job_params_check(bad[i]).message);
}

TEST_F(batch_engine_test, cancel_stops_one_attempt_within_a_token_and_spares_the_others) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(3, 256), sink);
  // Cancelled from the engine's own thread right after its 6th token: no further token may come.
  sink.on_tokens = [&](const wire::job_ref& ref, uint64_t seq, uint32_t) {
    if (ref.job_id == 1 && seq == 5) engine->cancel(ref);
  };
  engine->submit(job(0, prompt_of(0), greedy(64)));
  engine->submit(job(1, prompt_of(1), greedy(200)));
  engine->submit(job(2, prompt_of(2), sampled(64, 11)));
  ASSERT_TRUE(sink.wait_all_finished({0, 1, 2}));
  const auto r = sink.record(1);
  EXPECT_EQ(r.final->state, wire::job_state::cancelled);
  EXPECT_EQ(r.final->stop_reason, "cancelled");
  EXPECT_EQ(r.final->n_gen, 6u);
  EXPECT_EQ(r.n_tokens, 6u);
  expect_matches(sink, 0, alone(prompt_of(0), greedy(64), 256));
  expect_matches(sink, 2, alone(prompt_of(2), sampled(64, 11), 256));
  engine->cancel({12345, 0});  // unknown: ignored
  engine->cancel({1, 0});      // already finished: ignored
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(sink.record(1).n_finished, 1);
}

TEST_F(batch_engine_test, stop_returns_the_unfinished_attempts_without_finishing_them) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(2, 2048), sink);
  // Slow the engine down so nothing can finish before stop().
  sink.on_tokens = [](const wire::job_ref&, uint64_t, uint32_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  };
  for (uint64_t i = 0; i < 3; ++i) engine->submit(job(i, prompt_of(int(i)), greedy(1000)));
  ASSERT_TRUE(sink.wait_until([](const auto& m) {
    return m.count({0, 0}) && m.at({0, 0}).n_tokens > 2 && m.count({1, 0}) &&
           m.at({1, 0}).n_tokens > 2;
  }));
  const auto refs = engine->stop();
  std::set<uint64_t> ids;
  for (const auto& r : refs) ids.insert(r.job_id);
  EXPECT_EQ(ids, (std::set<uint64_t>{0, 1, 2}));  // two running, one waiting for a slot
  EXPECT_TRUE(engine->stop().empty());
  for (uint64_t i = 0; i < 3; ++i) EXPECT_FALSE(sink.record(i).final) << i;

  // Work submitted afterwards is refused at once.
  engine->submit(job(7, prompt_of(0), greedy(4)));
  EXPECT_NE(failure_of(sink, 7).find("stopped"), std::string::npos);
}

TEST_F(batch_engine_test, bad_attempts_fail_with_a_clear_message) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(2, 8), sink);
  engine->submit(job(0, prompt_of(0), greedy(4), "no-such-model"));
  engine->submit(job(1, prompt_of(2), greedy(4)));  // 12 tokens, a slot holds 8
  auto bad_top_p = greedy(4);
  bad_top_p.top_p = 0;
  engine->submit(job(2, prompt_of(0), bad_top_p));
  auto bad_temp = greedy(4);
  bad_temp.temperature = std::numeric_limits<float>::quiet_NaN();
  engine->submit(job(3, prompt_of(0), bad_temp));
  auto chat = job(4, "", greedy(4));
  chat.messages = {{"user", "hello"}};
  engine->submit(chat);
  engine->submit(job(5, "", greedy(4)));
  engine->submit(job(6, prompt_of(0), greedy(-1)));
  engine->submit(job(7, prompt_of(0), greedy(4), "mamba"));
  engine->submit(job(8, prompt_of(0), greedy(4), "broken"));
  // A good attempt among them still runs.
  engine->submit(job(9, prompt_of(0), greedy(3)));
  auto both = job(10, prompt_of(0), greedy(4), "stories-chatml");
  both.messages = {{"user", "hello"}};
  engine->submit(both);
  // The built-in formats know no tool messages (a model's own Jinja template may: job 12).
  auto tool = job(11, "", greedy(4), "stories-chatml");
  tool.messages = {{"user", "hello"}, {"tool", "{}"}};
  tool.params.chat_template = "chatml";
  engine->submit(tool);
  auto jinja_tool = tool;
  jinja_tool.job_id = 12;
  jinja_tool.params.chat_template = "";
  engine->submit(jinja_tool);
  ASSERT_TRUE(sink.wait_all_finished({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));

  EXPECT_EQ(failure_of(sink, 0), "model 'no-such-model' is not in this node's models directory");
  EXPECT_EQ(failure_of(sink, 1), "the prompt has 12 tokens but a slot holds 8");
  EXPECT_NE(failure_of(sink, 2).find("top_p"), std::string::npos);
  EXPECT_NE(failure_of(sink, 3).find("temperature"), std::string::npos);
  EXPECT_EQ(failure_of(sink, 4),
            "cannot format the chat messages for model 'stories': the model has no chat template "
            "(no tokenizer.chat_template in its metadata); name a template or send a prompt "
            "instead");
  EXPECT_NE(failure_of(sink, 5).find("empty"), std::string::npos);
  EXPECT_NE(failure_of(sink, 6).find("max_tokens"), std::string::npos);
  EXPECT_NE(failure_of(sink, 7).find("mamba"), std::string::npos);
  EXPECT_EQ(failure_of(sink, 8), "model 'broken' is not in this node's models directory");
  EXPECT_EQ(sink.record(9).final->state, wire::job_state::completed);
  EXPECT_EQ(failure_of(sink, 10), "the job has both a prompt and chat messages; send one of them");
  EXPECT_EQ(failure_of(sink, 11),
            "message 2 has the role 'tool'; a chat template knows only system, user and assistant");
  // Formatted (the template wrote the tool message), then too long for this node's 8 cells.
  EXPECT_EQ(sink.record(12).final->stop_reason, "prompt_too_long");
  for (uint64_t i = 0; i < 13; ++i) EXPECT_EQ(sink.record(i).n_finished, 1) << i;
  // The request's own faults say so (hearth-gateway answers them 400); the node's do not.
  auto reason = [&](uint64_t id) { return sink.record(id).final->stop_reason; };
  EXPECT_EQ(reason(1), "prompt_too_long");
  for (uint64_t id : {2, 3, 4, 5, 6, 10, 11}) EXPECT_EQ(reason(id), "invalid_request") << id;
  for (uint64_t id : {0, 7, 8}) EXPECT_EQ(reason(id), "") << id;
}

TEST_F(batch_engine_test, chat_messages_go_through_the_models_chat_template) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(2, 256), sink);
  auto chatml = job(0, "", greedy(24), "stories-chatml");
  chatml.messages = {{"system", "Be brief."}, {"user", "Once upon a time"}};
  engine->submit(chatml);
  auto llama2 = job(1, "", greedy(24), "stories-llama2");
  llama2.messages = {{"system", "Be brief."},
                     {"user", "Tell me a story."},
                     {"assistant", "Lily went to the park."},
                     {"user", "And then?"}};
  engine->submit(llama2);
  // A template named by the job: on a file without one, and instead of a file's own.
  auto named = job(2, "", greedy(24));
  named.messages = chatml.messages;
  named.params.chat_template = "chatml";
  engine->submit(named);
  auto overridden = job(3, "", greedy(24), "stories-llama2");
  overridden.messages = chatml.messages;
  overridden.params.chat_template = "chatml";
  engine->submit(overridden);
  auto unknown = job(4, "", greedy(4));
  unknown.messages = chatml.messages;
  unknown.params.chat_template = "chatlm";
  engine->submit(unknown);
  ASSERT_TRUE(sink.wait_all_finished({0, 1, 2, 3, 4}));

  // What the same weights give for the formatted text, its special-token text parsed. The files'
  // own templates render through the Jinja engine as transformers does: llama2's writes " " +
  // content + " " + eos_token for an assistant turn (llama.cpp's built-in format wrote no spaces).
  const std::string chatml_text =
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nOnce upon a time<|im_end|>\n"
      "<|im_start|>assistant\n";
  const std::string llama2_text =
      "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nTell me a story. [/INST] Lily went to the park. "
      "</s><s>[INST] And then? [/INST]";
  const auto chatml_tokens = model_->vocab().tokenize(chatml_text, true, true);
  const auto llama2_tokens = model_->vocab().tokenize(llama2_text, true, true);
  expect_matches(sink, 0, alone_tokens(chatml_tokens, greedy(24), 256));
  expect_matches(sink, 1, alone_tokens(llama2_tokens, greedy(24), 256));
  expect_matches(sink, 2, alone_tokens(chatml_tokens, greedy(24), 256));
  expect_matches(sink, 3, alone_tokens(chatml_tokens, greedy(24), 256));
  EXPECT_NE(failure_of(sink, 4).find("unknown chat template 'chatlm'"), std::string::npos)
      << failure_of(sink, 4);
  // "</s><s>" in the history became EOS and BOS, not text; BOS starts the prompt once.
  EXPECT_EQ(llama2_tokens.front(), model_->vocab().bos());
  EXPECT_EQ(std::count(llama2_tokens.begin(), llama2_tokens.end(), model_->vocab().bos()), 2);
  EXPECT_EQ(std::count(llama2_tokens.begin(), llama2_tokens.end(), model_->vocab().eos()), 1);
}

// A thinking model's template (qwen3, named here): enable_thinking false ends the prompt with the
// empty think block; the model's text is passed through the think filter (stories260K never
// writes "<think>", so hidden or shown, the text is the whole continuation).
TEST_F(batch_engine_test, enable_thinking_false_formats_the_empty_think_block) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(2, 256), sink);
  auto thinking = job(0, "", greedy(24));
  thinking.messages = {{"user", "Once upon a time"}};
  thinking.params.chat_template = "qwen3";
  auto not_thinking = thinking;
  not_thinking.job_id = 1;
  not_thinking.params.enable_thinking = false;
  auto shown = not_thinking;
  shown.job_id = 2;
  shown.params.show_thinking = true;
  engine->submit(thinking);
  engine->submit(not_thinking);
  engine->submit(shown);
  ASSERT_TRUE(sink.wait_all_finished({0, 1, 2}));
  const std::string base = "<|im_start|>user\nOnce upon a time<|im_end|>\n<|im_start|>assistant\n";
  const auto tokens_on = model_->vocab().tokenize(base, true, true);
  const auto tokens_off = model_->vocab().tokenize(base + "<think>\n\n</think>\n\n", true, true);
  expect_matches(sink, 0, alone_tokens(tokens_on, greedy(24), 256));
  expect_matches(sink, 1, alone_tokens(tokens_off, greedy(24), 256));
  expect_matches(sink, 2, alone_tokens(tokens_off, greedy(24), 256));
}

TEST_F(batch_engine_test, the_least_recently_used_idle_model_makes_room_for_another) {
  // A budget for one model and its context, not two.
  const context_params cp{.n_ctx = 2 * 64, .n_seq_max = 2};
  const uint64_t one = memory_needed(model_->hparams(), model_->weight_bytes(), cp).total();
  fake_job_sink sink;
  auto cfg = config(2, 64, "lru");
  cfg.memory_budget = one + one / 2;
  auto engine = make_batch_engine(cfg, sink);
  auto loaded = [&] {
    std::set<std::string> out;
    for (const auto& m : engine->models())
      if (m.loaded) out.insert(m.name);
    return out;
  };
  EXPECT_EQ(engine->models().size(), 2u);
  EXPECT_TRUE(loaded().empty());

  engine->submit(job(0, prompt_of(0), greedy(8), "a"));
  ASSERT_TRUE(sink.wait_finished(0));
  EXPECT_EQ(loaded(), std::set<std::string>{"a"});
  EXPECT_EQ(sink.n_models_changed(), 1);

  engine->submit(job(1, prompt_of(0), greedy(8), "b"));
  ASSERT_TRUE(sink.wait_finished(1));
  EXPECT_EQ(sink.record(1).final->state, wire::job_state::completed);
  EXPECT_EQ(loaded(), std::set<std::string>{"b"});
  EXPECT_EQ(sink.n_models_changed(), 3);  // a unloaded, b loaded

  // While b is busy, a cannot get its room: a fails, b keeps running.
  engine->submit(job(2, prompt_of(1), greedy(60), "b"));
  engine->submit(job(3, prompt_of(0), greedy(8), "a"));
  ASSERT_TRUE(sink.wait_all_finished({2, 3}));
  EXPECT_NE(failure_of(sink, 3).find("memory budget"), std::string::npos);
  EXPECT_EQ(sink.record(2).final->state, wire::job_state::completed);
  EXPECT_EQ(loaded(), std::set<std::string>{"b"});
}

TEST_F(batch_engine_test, what_pipeline_stages_hold_is_not_the_engines_to_give) {
  const context_params cp{.n_ctx = 64, .n_seq_max = 1};
  const uint64_t one = memory_needed(model_->hparams(), model_->weight_bytes(), cp).total();
  fake_job_sink sink;
  auto cfg = config(1, 64, "lru");
  cfg.memory_budget = one + one / 2;
  auto engine = make_batch_engine(cfg, sink);
  // The node's stages hold a model's worth: this one no longer fits.
  engine->set_stage_memory(one);
  engine->submit(job(0, prompt_of(0), greedy(8), "a"));
  ASSERT_TRUE(sink.wait_finished(0));
  EXPECT_NE(failure_of(sink, 0).find("held by pipeline stages"), std::string::npos)
      << failure_of(sink, 0);
  // Released: it fits again.
  engine->set_stage_memory(0);
  engine->submit(job(1, prompt_of(0), greedy(8), "a"));
  ASSERT_TRUE(sink.wait_finished(1));
  EXPECT_EQ(sink.record(1).final->state, wire::job_state::completed);
}

TEST_F(batch_engine_test, a_model_larger_than_the_budget_fails_to_load) {
  fake_job_sink sink;
  auto cfg = config(1, 64, "lru");
  cfg.memory_budget = 1000;
  auto engine = make_batch_engine(cfg, sink);
  engine->submit(job(0, prompt_of(0), greedy(8), "a"));
  ASSERT_TRUE(sink.wait_finished(0));
  EXPECT_NE(failure_of(sink, 0).find("memory budget"), std::string::npos);
  EXPECT_EQ(sink.n_models_changed(), 0);
}

TEST_F(batch_engine_test, a_missing_models_directory_throws) {
  fake_job_sink sink;
  auto cfg = config(1, 64);
  cfg.models_dir = (*dir_ / "absent").string();
  EXPECT_THROW(make_batch_engine(cfg, sink), std::runtime_error);
}

}  // namespace
}  // namespace hearth::node

namespace hearth::node {
namespace {

// The fit rule: mapped weights of a mixture of experts count the non-expert tensors and the share
// of the experts the slots' tokens can be routed to; dense models and uploaded weights count whole.
TEST(model_memory_budget, mapped_experts_count_only_the_active_share) {
  model_hparams hp;
  hp.n_layer = 2;
  hp.n_embd = 64;
  hp.n_head = 4;
  hp.n_head_kv = 4;
  hp.head_dim_k = 16;
  hp.head_dim_v = 16;
  hp.n_vocab = 100;
  hp.n_ctx_train = 256;
  context_params cp{.n_ctx = 64, .n_seq_max = 1};
  const uint64_t context_bytes = memory_needed(hp, 0, cp).total();
  model_weights_count moe;
  moe.n_expert = 8;
  moe.n_expert_used = 2;
  moe.bytes_experts = 8'000'000;
  moe.bytes_other = 1'000'000;
  // One slot: 2 of 8 experts.
  EXPECT_EQ(model_memory_budgeted(moe, true, hp, cp), context_bytes + 1'000'000 + 2'000'000);
  // Uploaded to a device: every expert.
  EXPECT_EQ(model_memory_budgeted(moe, false, hp, cp), context_bytes + 9'000'000);
  // Three slots route to at most 6 experts; five to all 8, never more.
  cp.n_seq_max = 3;
  EXPECT_EQ(model_memory_budgeted(moe, true, hp, cp),
            memory_needed(hp, 0, cp).total() + 1'000'000 + 6'000'000);
  cp.n_seq_max = 5;
  EXPECT_EQ(model_memory_budgeted(moe, true, hp, cp), memory_needed(hp, 0, cp).total() + 9'000'000);
  // A dense model has no expert tensors: the whole file, mapped or not.
  model_weights_count dense;
  dense.bytes_other = 5'000'000;
  cp.n_seq_max = 1;
  EXPECT_EQ(model_memory_budgeted(dense, true, hp, cp), context_bytes + 5'000'000);
  EXPECT_EQ(model_memory_budgeted(dense, false, hp, cp), context_bytes + 5'000'000);
}

// The synthetic Qwen3-MoE file's counts from its tensors, and a node whose budget is below the
// whole file plus context but above its active set serving it.
TEST(model_memory_budget, a_node_serves_an_moe_model_larger_than_its_budget) {
  const std::string moe =
      hearth::testing::testdata_path("models/synthetic2/synthetic-qwen3moe-a.q4_k_m.gguf");
  ASSERT_FALSE(moe.empty());
  auto f = model_file::open(moe);
  ASSERT_TRUE(f.ok()) << f.message();
  const model_weights_count w = model_weights_counted(f->gguf, f->hparams);
  ASSERT_GT(w.n_expert, w.n_expert_used);
  EXPECT_EQ(w.bytes_experts + w.bytes_other, f->weight_bytes);
  EXPECT_LT(w.params_active, w.params_total);

  const fs::path dir = fs::temp_directory_path() / "hearth_batch_engine_moe";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::create_symlink(fs::absolute(moe), dir / "moe.gguf");
  batch_engine_config cfg;
  cfg.models_dir = dir.string();
  cfg.slots = 1;
  cfg.threads = 1;
  cfg.n_ctx_per_slot = 64;
  const context_params cp{.n_ctx = 64, .n_seq_max = 1};
  const uint64_t whole = memory_needed(f->hparams, f->weight_bytes, cp).total();
  const uint64_t active = model_memory_budgeted(w, true, f->hparams, cp);
  ASSERT_LT(active, whole);
  auto run_with_budget = [&](uint64_t budget) {
    fake_job_sink sink;
    cfg.memory_budget = budget;
    auto engine = make_batch_engine(cfg, sink);
    wire::job_assign j;
    j.job_id = 1;
    j.model = "moe";
    j.prompt = "Hello";
    j.params.max_tokens = 4;
    j.params.temperature = 0;
    j.params.seed = 1;
    engine->submit(j);
    EXPECT_TRUE(sink.wait_finished(1));
    const auto r = sink.record(1);
    return r.final ? *r.final : wire::job_final{};
  };
  // Room for the active set and the context, not for the whole file: it loads and runs.
  const wire::job_final ok = run_with_budget(active + (whole - active) / 2);
  EXPECT_EQ(ok.state, wire::job_state::completed) << ok.error;
  EXPECT_EQ(ok.n_gen, 4u);
  // One byte short of the active set: refused, saying what it needs.
  const wire::job_final refused = run_with_budget(active - 1);
  EXPECT_EQ(refused.state, wire::job_state::failed);
  EXPECT_NE(refused.error.find("memory budget"), std::string::npos) << refused.error;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hearth::node
