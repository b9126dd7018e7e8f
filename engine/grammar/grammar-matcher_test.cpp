// The matcher on real vocabularies: every mask (trie walk, clipped counters, caches) equals the
// per-token check of each token's bytes from the same text on a second matcher, along whole
// documents; and pieces, EOG and special tokens are treated as the module comment says.
#include "engine/grammar/grammar-matcher.h"

#include <gtest/gtest.h>

#include "engine/grammar/json-schema.h"
#include "engine/io/gguf.h"
#include "engine/tokenizer/vocab.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

std::shared_ptr<const vocab> load_vocab(const std::string& name) {
  const std::string path = testing::testdata_path("vocab/" + name);
  if (path.empty()) return nullptr;
  auto f = gguf_file::open(path);
  if (!f.ok()) return nullptr;
  auto v = vocab::from_gguf(*f);
  if (!v.ok()) return nullptr;
  return std::make_shared<const vocab>(std::move(*v));
}

// Follows `doc` token by token (its own tokenization) and at every `every`-th step compares the
// mask with the naive check: each token's piece fed byte by byte to a second matcher at the same
// text.
void expect_masks_equal_naive(const vocab& voc, std::shared_ptr<const grammar_vocab> gv,
                              std::shared_ptr<const grammar> g, const std::string& doc,
                              size_t every = 1) {
  grammar_matcher fast(g, gv);
  grammar_matcher naive(g, gv);
  const std::vector<int32_t> tokens = voc.tokenize(doc, false, false);
  std::string text;
  for (size_t step = 0; step <= tokens.size(); ++step) {
    if (step % every == 0 || step == tokens.size()) {
      const auto mask = fast.allowed();
      size_t differences = 0, allowed = 0;
      for (int32_t t = 0; t < gv->n_tokens(); ++t) {
        const bool in_mask = (mask[size_t(t) / 64] >> (t % 64)) & 1;
        // The naive matcher never computes a mask: it walks the piece's bytes from its exact
        // (unclipped) state.
        const bool ok = gv->is_eog(t) ? naive.can_end() : naive.is_allowed(t);
        allowed += ok;
        if (in_mask != ok && differences++ < 5) {
          ADD_FAILURE() << "after \"" << text << "\": token " << t << " \"" << gv->piece(t)
                        << "\" mask " << in_mask << " naive " << ok;
        }
      }
      EXPECT_EQ(differences, 0u) << "after \"" << text << "\"";
      EXPECT_GT(allowed, 0u) << "after \"" << text << "\"";
    }
    if (step == tokens.size()) break;
    ASSERT_TRUE(fast.accept(tokens[step])) << "token " << step << " of " << doc;
    ASSERT_TRUE(naive.accept(tokens[step]));
    text += gv->piece(tokens[step]);
  }
  EXPECT_TRUE(fast.can_end());
}

TEST(grammar_matcher, masks_equal_the_naive_check_on_gpt2) {
  auto voc = load_vocab("ggml-vocab-gpt-2.gguf");
  ASSERT_TRUE(voc);
  auto gv = grammar_vocab::make(*voc);
  EXPECT_EQ(gv->n_tokens(), voc->n_tokens());
  auto gbnf = json_schema_to_gbnf(R"({"type": "object", "additionalProperties": false,
    "properties": {"name": {"type": "string", "maxLength": 12}, "n": {"type": "integer",
    "minimum": 0, "maximum": 500}, "ok": {"type": "boolean"}}, "required": ["name", "n", "ok"]})");
  ASSERT_TRUE(gbnf.ok()) << gbnf.message();
  auto g = grammar_from_gbnf(*gbnf);
  ASSERT_TRUE(g.ok()) << g.message();
  expect_masks_equal_naive(*voc, gv, *g, R"({"name": "Émile Zola", "n": 417, "ok": true})", 3);
}

TEST(grammar_matcher, clipped_counters_give_exact_masks_on_llama_spm) {
  auto voc = load_vocab("ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(voc);
  auto gv = grammar_vocab::make(*voc);
  // Bounds farther apart than the longest piece, so clipping is used and then left.
  const size_t n = gv->max_piece_bytes() + 40;
  auto g = grammar_from_gbnf("root ::= [a-z ]{" + std::to_string(n / 2) + "," + std::to_string(n) +
                             "} \".\"");
  ASSERT_TRUE(g.ok()) << g.message();
  std::string doc;
  while (doc.size() + 6 < n) doc += "hello ";
  doc += ".";
  expect_masks_equal_naive(*voc, gv, *g, doc, 4);
}

TEST(grammar_matcher, eog_and_special_tokens) {
  auto voc = load_vocab("ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(voc);
  auto gv = grammar_vocab::make(*voc);
  ASSERT_FALSE(gv->eog().empty());
  auto g = grammar_from_gbnf("root ::= \"yes\" | \"no\"");
  ASSERT_TRUE(g.ok());
  grammar_matcher m(*g, gv);
  const int32_t eos = voc->eos();
  EXPECT_FALSE(m.is_allowed(eos));
  EXPECT_FALSE(m.is_allowed(voc->bos()));  // a control token: empty piece
  ASSERT_TRUE(m.accept_bytes("yes"));
  EXPECT_TRUE(m.can_end());
  // Complete and nothing can follow: only EOG.
  const auto mask = m.allowed();
  size_t n = 0;
  for (int32_t t = 0; t < gv->n_tokens(); ++t) n += (mask[size_t(t) / 64] >> (t % 64)) & 1;
  EXPECT_EQ(n, gv->eog().size());
  EXPECT_TRUE(m.is_allowed(eos));
  EXPECT_TRUE(m.accept(eos));
}

TEST(grammar_matcher, long_pieces_near_a_bound_on_gpt2) {
  // maxLength 60: counts within 17 of the bound are exact states, the others share the
  // short-piece mask and have their long pieces (dashes, spaces) checked one by one.
  auto voc = load_vocab("ggml-vocab-gpt-2.gguf");
  ASSERT_TRUE(voc);
  auto gv = grammar_vocab::make(*voc);
  ASSERT_FALSE(gv->long_tokens().empty());
  auto gbnf = json_schema_to_gbnf(R"({"type": "string", "maxLength": 60})");
  ASSERT_TRUE(gbnf.ok()) << gbnf.message();
  auto g = grammar_from_gbnf(*gbnf);
  ASSERT_TRUE(g.ok()) << g.message();
  expect_masks_equal_naive(*voc, gv, *g,
                           "\"--------------------------------                 the end\"", 1);
}

}  // namespace
}  // namespace hearth
