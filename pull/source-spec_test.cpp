// Source strings, URL helpers and GGUF file names, without a server.
#include "pull/source-spec.h"

#include <gtest/gtest.h>

#include "pull/http-client.h"
#include "pull/pull-plan.h"

namespace hearth::pull {

TEST(pull_source, hf_forms) {
  auto a = parse_source("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M");
  ASSERT_TRUE(a) << a.message();
  EXPECT_EQ(a->kind, source_kind::hf);
  EXPECT_EQ(a->repo, "Qwen/Qwen2.5-0.5B-Instruct-GGUF");
  EXPECT_EQ(a->quant, "Q4_K_M");
  EXPECT_EQ(a->revision, "main");
  auto b = parse_source("hf:org/repo/sub/model-q8_0.gguf@refs/pr/1");
  ASSERT_TRUE(b) << b.message();
  EXPECT_EQ(b->file, "sub/model-q8_0.gguf");
  EXPECT_EQ(b->revision, "refs/pr/1");
  EXPECT_TRUE(b->quant.empty());
  auto c = parse_source("hf:org/repo@0123abcd");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->revision, "0123abcd");
  for (const char* bad : {"hf:", "hf:repo", "hf:../x/y", "hf:org/repo@a..b", "hf:org/re po",
                          "hf:org/repo:", "hf:org/repo@"}) {
    EXPECT_FALSE(parse_source(bad)) << bad;
  }
}

TEST(pull_source, ollama_url_local) {
  auto a = parse_source("ollama:llama3.2:1b");
  ASSERT_TRUE(a) << a.message();
  EXPECT_EQ(a->ollama_repo, "library/llama3.2");
  EXPECT_EQ(a->ollama_tag, "1b");
  auto b = parse_source("ollama:someone/model");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->ollama_repo, "someone/model");
  EXPECT_EQ(b->ollama_tag, "latest");
  EXPECT_FALSE(parse_source("ollama:../x"));
  EXPECT_EQ(parse_source("HTTPS://example.com/a.gguf")->kind, source_kind::url);
  EXPECT_EQ(parse_source("./models/a.gguf")->kind, source_kind::local);
}

TEST(pull_source, urls) {
  EXPECT_EQ(url_origin("https://HuggingFace.co/a/b"), "https://huggingface.co:443");
  EXPECT_EQ(url_origin("http://127.0.0.1:8080/x?y"), "http://127.0.0.1:8080");
  EXPECT_NE(url_origin("http://localhost:80/"), url_origin("http://127.0.0.1/"));
  EXPECT_EQ(url_resolve("https://h/a/b?q", "/c"), "https://h/c");
  EXPECT_EQ(url_resolve("https://h/a/b", "c"), "https://h/a/c");
  EXPECT_EQ(url_resolve("https://h/a/b", "//cdn/x"), "https://cdn/x");
  EXPECT_EQ(url_resolve("https://h/a", "http://o/z"), "http://o/z");
  EXPECT_EQ(url_escape("a b/c"), "a%20b%2Fc");
  EXPECT_EQ(url_host("https://huggingface.co/x"), "huggingface.co");
}

TEST(pull_source, gguf_names) {
  std::string prefix;
  int count = 0;
  EXPECT_TRUE(gguf_split_part("d/M-Q4_K_M-00002-of-00003.gguf", &prefix, &count));
  EXPECT_EQ(prefix, "d/M-Q4_K_M");
  EXPECT_EQ(count, 3);
  EXPECT_FALSE(gguf_split_part("M-Q4_K_M.gguf", nullptr, nullptr));
  EXPECT_EQ(gguf_model_stem("a/Model-Q4_K_M.gguf"), "Model-Q4_K_M");
  EXPECT_EQ(gguf_model_stem("Model-00001-of-00002.gguf"), "Model");
}

}  // namespace hearth::pull
