// The Jinja engine (engine/chat/jinja.h) against Hugging Face: every template of
// ../shared/testdata/chat-templates rendered with every conversation there must be, byte for byte,
// what transformers' apply_chat_template made of it (renders/T/C.txt), or fail where transformers
// failed (renders/T/C.error), with the template's own raise_exception message when it has one.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "engine/chat/jinja.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

namespace fs = std::filesystem;

fs::path templates_root() {
  return fs::path(testing::testdata_root()) / "chat-templates";
}

std::vector<std::string> stems(const fs::path& dir, const std::string& ext) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ext) out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The README's fixed clock: strftime_now sees 2026-12-01T09:30:00 local time.
jinja::render_options fixed_clock() {
  jinja::render_options o;
  o.now = *jinja::parse_local_time("2026-12-01T09:30:00");
  return o;
}

TEST(ChatTemplates, EveryPairRendersAsTransformers) {
  const fs::path root = templates_root();
  const auto templates = stems(root / "templates", ".jinja");
  const auto contexts = stems(root / "contexts", ".json");
  ASSERT_EQ(templates.size(), 31u) << root;
  ASSERT_EQ(contexts.size(), 10u) << root;
  const auto opts = fixed_clock();
  int pairs = 0, matched = 0;
  for (const auto& t : templates) {
    auto program =
        jinja::parse(testing::read_file_text((root / "templates" / (t + ".jinja")).string()));
    ASSERT_TRUE(program.ok()) << t << ": " << program.message();
    for (const auto& c : contexts) {
      ++pairs;
      auto ctx = nlohmann::ordered_json::parse(
          testing::read_file_text((root / "contexts" / (c + ".json")).string()));
      if (!ctx.contains("add_generation_prompt")) ctx["add_generation_prompt"] = true;
      auto got = jinja::render(**program, ctx, opts);
      const fs::path error_file = root / "renders" / t / (c + ".error");
      if (fs::exists(error_file)) {
        std::string want = testing::read_file_text(error_file.string());
        while (!want.empty() && (want.back() == '\n' || want.back() == '\r')) want.pop_back();
        if (got.ok()) {
          ADD_FAILURE() << t << " / " << c << ": rendered, transformers failed with " << want;
          continue;
        }
        // The template's own message as is; else jinja2's error class leads ours.
        EXPECT_NE(got.message().find(want), std::string::npos)
            << t << " / " << c << ": " << got.message();
        matched += got.message().find(want) != std::string::npos;
        continue;
      }
      const std::string want =
          testing::read_file_text((root / "renders" / t / (c + ".txt")).string());
      if (!got.ok()) {
        ADD_FAILURE() << t << " / " << c << ": " << got.message();
        continue;
      }
      EXPECT_EQ(*got, want) << t << " / " << c;
      matched += *got == want;
    }
  }
  std::printf("chat templates: %d of %d template/context pairs match transformers\n", matched,
              pairs);
  EXPECT_EQ(matched, pairs);
}

// Parsing once and rendering many times is the node's way (the program cached per model): the
// same program renders the same text again, and renders concurrently.
TEST(ChatTemplates, ProgramRendersRepeatedly) {
  const fs::path root = templates_root();
  auto program = jinja::parse(
      testing::read_file_text((root / "templates" / "Qwen-Qwen3-0.6B.jinja").string()));
  ASSERT_TRUE(program.ok()) << program.message();
  auto ctx = nlohmann::ordered_json::parse(
      testing::read_file_text((root / "contexts" / "c05_tool_round.json").string()));
  ctx["add_generation_prompt"] = true;
  const std::string want = testing::read_file_text(
      (root / "renders" / "Qwen-Qwen3-0.6B" / "c05_tool_round.txt").string());
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      for (int k = 0; k < 25; ++k) {
        auto r = jinja::render(**program, ctx);
        ok += r.ok() && *r == want;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 100);
}

}  // namespace
}  // namespace hearth
