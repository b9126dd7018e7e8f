#include "engine/tokenizer/vocab.h"

#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "engine/tokenizer/utf8-stream.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

// Builds a tensor-free GGUF v3 file in memory, key by key; setting a key again replaces it.
class gguf_metadata {
 public:
  gguf_metadata& str(const std::string& key, const std::string& v) {
    std::vector<uint8_t> b;
    put<uint32_t>(b, 8);
    put_str(b, v);
    return set(key, std::move(b));
  }
  gguf_metadata& u32(const std::string& key, uint32_t v) { return scalar(key, 4, v); }
  gguf_metadata& i32(const std::string& key, int32_t v) { return scalar(key, 5, v); }
  gguf_metadata& boolean(const std::string& key, bool v) { return scalar(key, 7, uint8_t(v)); }
  gguf_metadata& strings(const std::string& key, const std::vector<std::string>& v) {
    std::vector<uint8_t> b = array_header(8, v.size());
    for (const auto& s : v) put_str(b, s);
    return set(key, std::move(b));
  }
  gguf_metadata& f32s(const std::string& key, const std::vector<float>& v) {
    std::vector<uint8_t> b = array_header(6, v.size());
    for (float x : v) put(b, x);
    return set(key, std::move(b));
  }
  gguf_metadata& i32s(const std::string& key, const std::vector<int32_t>& v) {
    std::vector<uint8_t> b = array_header(5, v.size());
    for (int32_t x : v) put(b, x);
    return set(key, std::move(b));
  }
  gguf_metadata& erase(const std::string& key) {
    std::erase_if(kv_, [&](const auto& kv) { return kv.first == key; });
    return *this;
  }

  result<vocab> load() const {
    std::vector<uint8_t> b;
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    put<uint32_t>(b, 3);
    put<uint64_t>(b, 0);
    put<uint64_t>(b, kv_.size());
    for (const auto& [key, value] : kv_) {
      put_str(b, key);
      b.insert(b.end(), value.begin(), value.end());
    }
    auto f = gguf_file::parse(b);
    if (!f) return f.err();
    return vocab::from_gguf(*f);
  }

 private:
  template <typename T>
  static void put(std::vector<uint8_t>& b, T v) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    b.insert(b.end(), raw, raw + sizeof(T));
  }
  static void put_str(std::vector<uint8_t>& b, const std::string& s) {
    put<uint64_t>(b, s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
  static std::vector<uint8_t> array_header(uint32_t elem_type, size_t n) {
    std::vector<uint8_t> b;
    put<uint32_t>(b, 9);
    put<uint32_t>(b, elem_type);
    put<uint64_t>(b, n);
    return b;
  }
  template <typename T>
  gguf_metadata& scalar(const std::string& key, uint32_t type, T v) {
    std::vector<uint8_t> b;
    put<uint32_t>(b, type);
    put(b, v);
    return set(key, std::move(b));
  }
  gguf_metadata& set(const std::string& key, std::vector<uint8_t> value) {
    for (auto& kv : kv_) {
      if (kv.first == key) {
        kv.second = std::move(value);
        return *this;
      }
    }
    kv_.emplace_back(key, std::move(value));
    return *this;
  }

  std::vector<std::pair<std::string, std::vector<uint8_t>>> kv_;
};

// A toy SentencePiece vocabulary whose merges and fallbacks are easy to follow by hand.
// Token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte.
enum toy : int32_t {
  t_unk,
  t_bos,
  t_eos,
  t_0a,
  t_e2,
  t_82,
  t_ac,
  t_space,
  t_a,
  t_b,
  t_c,
  t_ab,
  t_bc,
  t_space_a,
  t_user,
  t_im_end,
  t_x,
  t_xx,
};

gguf_metadata toy_vocab() {
  gguf_metadata m;
  m.str("general.architecture", "llama")
      .str("tokenizer.ggml.model", "llama")
      .strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "<0x0A>", "<0xE2>", "<0x82>",
                                         "<0xAC>", "\xE2\x96\x81", "a", "b", "c", "ab", "bc",
                                         "\xE2\x96\x81"
                                         "a",
                                         "<user>", "<|im_end|>", "x", "xx"})
      .f32s("tokenizer.ggml.scores",
            {0, 0, 0, 0, 0, 0, 0, -1, -2, -3, -4, -5, -1, -6, 0, 0, -2, -1})
      .i32s("tokenizer.ggml.token_type", {2, 3, 3, 6, 6, 6, 6, 1, 1, 1, 1, 1, 1, 1, 4, 1, 1, 1});
  return m;
}

vocab load_toy(const gguf_metadata& m = toy_vocab()) {
  auto v = m.load();
  EXPECT_TRUE(v.ok()) << v.message();
  return std::move(v).value();
}

using ids = std::vector<int32_t>;

TEST(Vocab, ToyVocabularyDefaults) {
  const vocab v = load_toy();
  EXPECT_EQ(v.kind(), vocab_kind::spm);
  EXPECT_EQ(v.n_tokens(), 18);
  EXPECT_EQ(v.bos(), t_bos);
  EXPECT_EQ(v.eos(), t_eos);
  EXPECT_EQ(v.unk(), t_unk);
  EXPECT_TRUE(v.add_bos());
  EXPECT_FALSE(v.add_eos());
  EXPECT_TRUE(v.add_space_prefix());
  EXPECT_EQ(v.attr(t_user), token_attr::user_defined);
  EXPECT_EQ(v.attr(t_0a), token_attr::byte);
  EXPECT_EQ(v.text(t_ab), "ab");
  EXPECT_FLOAT_EQ(v.score(t_bc), -1.0f);
  EXPECT_EQ(v.find("bc"), t_bc);
  EXPECT_EQ(v.find("abc"), std::nullopt);
}

TEST(Vocab, MergesTheHighestScoringPairFirst) {
  const vocab v = load_toy();
  // "▁abc": "bc" (-1) beats "ab" (-5); then "▁a" (-6) is the only pair left that is a token.
  EXPECT_EQ(v.tokenize("abc", false, false), (ids{t_space_a, t_bc}));
}

TEST(Vocab, BreaksScoreTiesByTheLeftmostPair) {
  const vocab v = load_toy();
  EXPECT_EQ(v.tokenize("xxx", false, false), (ids{t_space, t_xx, t_x}));
}

TEST(Vocab, FallsBackToByteTokensThenToUnknown) {
  const vocab v = load_toy();
  EXPECT_EQ(v.tokenize("\xE2\x82\xAC", false, false), (ids{t_space, t_e2, t_82, t_ac}));
  // U+00E9 = C3 A9 has no byte tokens in this vocabulary.
  EXPECT_EQ(v.tokenize("\xC3\xA9", false, false), (ids{t_space, t_unk, t_unk}));
}

TEST(Vocab, TruncatedUtf8AtTheEndStaysInsideTheText) {
  const vocab v = load_toy();
  // E2 announces 3 bytes but ends the text; E2 82 likewise. Neither may read past the end.
  EXPECT_EQ(v.tokenize("a\xE2", false, false), (ids{t_space_a, t_e2}));
  EXPECT_EQ(v.tokenize("a\xE2\x82", false, false), (ids{t_space_a, t_e2, t_82}));
}

TEST(Vocab, SpacesBecomeTheSentencePieceSpace) {
  const vocab v = load_toy();
  EXPECT_EQ(v.tokenize("a a", false, false), (ids{t_space_a, t_space_a}));
  EXPECT_EQ(v.tokenize("", false, false), ids{});
  EXPECT_EQ(v.tokenize("", true, false), ids{t_bos});
}

TEST(Vocab, UserDefinedTokensAreAlwaysMatched) {
  const vocab v = load_toy();
  // Each raw fragment after a special token gets the dummy-prefix space again.
  EXPECT_EQ(v.tokenize("a<user>b", false, false), (ids{t_space_a, t_user, t_space, t_b}));
  EXPECT_EQ(v.tokenize("a<user>b", false, true), (ids{t_space_a, t_user, t_space, t_b}));
}

TEST(Vocab, ControlTokensInTheTextNeedParseSpecial) {
  const vocab v = load_toy();
  EXPECT_EQ(v.tokenize("<s>a", false, true), (ids{t_bos, t_space_a}));
  // As plain text '<', 's', '>' have neither tokens nor byte tokens here.
  EXPECT_EQ(v.tokenize("<s>a", false, false), (ids{t_space, t_unk, t_unk, t_unk, t_a}));
  EXPECT_EQ(v.tokenize("<unk>", false, true), (ids{t_unk}));
}

TEST(Vocab, AddSpecialAddsBosAndEosAsConfigured) {
  EXPECT_EQ(load_toy().tokenize("a", true, false), (ids{t_bos, t_space_a}));
  const vocab v = load_toy(toy_vocab()
                               .boolean("tokenizer.ggml.add_bos_token", false)
                               .boolean("tokenizer.ggml.add_eos_token", true));
  EXPECT_EQ(v.tokenize("a", true, false), (ids{t_space_a, t_eos}));
  EXPECT_EQ(v.tokenize("a", false, false), (ids{t_space_a}));
}

TEST(Vocab, AddSpacePrefixCanBeTurnedOff) {
  const vocab v = load_toy(toy_vocab().boolean("tokenizer.ggml.add_space_prefix", false));
  EXPECT_FALSE(v.add_space_prefix());
  EXPECT_EQ(v.tokenize("ab", false, false), (ids{t_ab}));
  EXPECT_EQ(v.detokenize(ids{t_space_a}, false), " a");
}

TEST(Vocab, EndOfGenerationTokens) {
  const vocab v = load_toy();
  EXPECT_TRUE(v.is_eog(t_eos));
  // "<|im_end|>" is recognised by its text, made a control token, and taken as EOT.
  EXPECT_TRUE(v.is_eog(t_im_end));
  EXPECT_EQ(v.attr(t_im_end), token_attr::control);
  EXPECT_EQ(v.eot(), t_im_end);
  EXPECT_FALSE(v.is_eog(t_bos));
  EXPECT_FALSE(v.is_eog(t_a));
  EXPECT_FALSE(v.is_eog(-1));
}

TEST(Vocab, EotFromMetadataWins) {
  const vocab v = load_toy(toy_vocab().u32("tokenizer.ggml.eot_token_id", t_user));
  EXPECT_EQ(v.eot(), t_user);
  EXPECT_TRUE(v.is_eog(t_user));
  EXPECT_TRUE(v.is_eog(t_im_end));  // still end-of-generation by its text
}

TEST(Vocab, TokenToPiece) {
  const vocab v = load_toy();
  EXPECT_EQ(v.token_to_piece(t_space_a, false), " a");
  EXPECT_EQ(v.token_to_piece(t_0a, false), "\n");
  EXPECT_EQ(v.token_to_piece(t_e2, false), "\xE2");
  EXPECT_EQ(v.token_to_piece(t_bos, false), "");
  EXPECT_EQ(v.token_to_piece(t_bos, true), "<s>");
  // llama.cpp (since mid-2024) treats unknown like control: nothing, or its text when special.
  EXPECT_EQ(v.token_to_piece(t_unk, false), "");
  EXPECT_EQ(v.token_to_piece(t_unk, true), "<unk>");
  EXPECT_EQ(v.token_to_piece(t_user, false), "<user>");
  EXPECT_EQ(v.token_to_piece(-1, true), "");
  EXPECT_EQ(v.token_to_piece(v.n_tokens(), true), "");
}

TEST(Vocab, DetokenizeRemovesThePrefixSpaceOfTheFirstTokenOnly) {
  const vocab v = load_toy();
  EXPECT_EQ(v.detokenize(v.tokenize("abc a", false, false), false), "abc a");
  EXPECT_EQ(v.detokenize(ids{t_space, t_space_a}, false), " a");
  // As llama.cpp's common_detokenize: a leading BOS is the "first token", so the space stays.
  EXPECT_EQ(v.detokenize(v.tokenize("abc", true, false), false), " abc");
  EXPECT_EQ(v.detokenize(v.tokenize("abc", true, false), true), "<s> abc");
  EXPECT_EQ(v.detokenize(ids{t_e2, t_82, t_ac}, false), "\xE2\x82\xAC");
}

TEST(Vocab, Phi3NameStripsWhitespaceAfterSpecialTokens) {
  // llama.cpp recognises Phi-3 by general.name and drops the whitespace after added tokens.
  const vocab plain = load_toy();
  EXPECT_EQ(plain.tokenize("<user>  a", false, false), (ids{t_user, t_space, t_space, t_space_a}));
  const vocab phi3 = load_toy(toy_vocab().str("general.name", "Phi-3 mini"));
  EXPECT_EQ(phi3.tokenize("<user>  a", false, false), (ids{t_user, t_space_a}));
}

TEST(Vocab, SpecialIdKeys) {
  // Converters write 0xFFFFFFFF or -1 for "none": the key counts as absent, the default stays.
  EXPECT_EQ(load_toy(toy_vocab().u32("tokenizer.ggml.bos_token_id", 0xFFFFFFFFu)).bos(), t_bos);
  EXPECT_EQ(load_toy(toy_vocab().i32("tokenizer.ggml.eos_token_id", -1)).eos(), t_eos);
  EXPECT_EQ(load_toy(toy_vocab().i32("tokenizer.ggml.eot_token_id", -1)).eot(), t_im_end);
  EXPECT_EQ(load_toy(toy_vocab().u32("tokenizer.ggml.unknown_token_id", t_x)).unk(), t_x);
}

void expect_error(const gguf_metadata& m, const std::string& needle) {
  auto v = m.load();
  ASSERT_FALSE(v.ok()) << "expected an error mentioning " << needle;
  EXPECT_NE(v.message().find(needle), std::string::npos) << v.message();
}

TEST(Vocab, BadMetadataIsReportedWithItsKey) {
  expect_error(toy_vocab().erase("tokenizer.ggml.model"), "tokenizer.ggml.model");
  // A byte-level BPE vocabulary is nothing without its merges.
  expect_error(toy_vocab().str("tokenizer.ggml.model", "gpt2"), "tokenizer.ggml.merges");
  expect_error(toy_vocab().str("tokenizer.ggml.model", "wordpiece"), "'wordpiece'");
  expect_error(toy_vocab().erase("tokenizer.ggml.tokens"), "tokenizer.ggml.tokens");
  expect_error(toy_vocab()
                   .strings("tokenizer.ggml.tokens", {})
                   .erase("tokenizer.ggml.scores")
                   .erase("tokenizer.ggml.token_type"),
               "tokenizer.ggml.tokens");
  expect_error(toy_vocab().f32s("tokenizer.ggml.scores", {0, 1}), "tokenizer.ggml.scores");
  expect_error(toy_vocab().i32s("tokenizer.ggml.token_type", {1}), "tokenizer.ggml.token_type");
  expect_error(toy_vocab().u32("tokenizer.ggml.bos_token_id", 18), "tokenizer.ggml.bos_token_id");
  expect_error(toy_vocab().i32("tokenizer.ggml.eos_token_id", -5), "tokenizer.ggml.eos_token_id");
  expect_error(toy_vocab().str("tokenizer.ggml.unknown_token_id", "0"),
               "tokenizer.ggml.unknown_token_id");
  expect_error(toy_vocab().u32("tokenizer.ggml.add_bos_token", 1), "tokenizer.ggml.add_bos_token");
  auto types = std::vector<int32_t>{2, 3, 3, 6, 6, 6, 6, 1, 1, 1, 1, 1, 1, 1, 4, 1, 1, 9};
  expect_error(toy_vocab().i32s("tokenizer.ggml.token_type", types), "tokenizer.ggml.token_type");
  types.back() = 6;  // "xx" is no <0xXX> text
  expect_error(toy_vocab().i32s("tokenizer.ggml.token_type", types), "tokenizer.ggml.token_type");
  expect_error(toy_vocab().strings("tokenizer.ggml.tokens",
                                   {"<unk>", "<s>", "</s>", "<0x0A>", "<0xE2>", "<0x82>", "<0xAC>",
                                    "a", "a", "b", "c", "ab", "bc", "d", "<user>", "e", "x", "xx"}),
               "appears twice");
}

TEST(Vocab, Stories260kPromptsMatchLlamaCpp) {
  const std::string model = testing::testdata_path("models/stories260K.gguf");
  const std::string ref = testing::testdata_path("reference/stories260K.json");
  ASSERT_FALSE(model.empty());
  ASSERT_FALSE(ref.empty());
  auto f = gguf_file::open(model);
  ASSERT_TRUE(f.ok()) << f.message();
  auto v = vocab::from_gguf(*f);
  ASSERT_TRUE(v.ok()) << v.message();
  EXPECT_EQ(v->n_tokens(), 512);
  EXPECT_EQ(v->bos(), 1);
  EXPECT_EQ(v->eos(), 2);
  EXPECT_EQ(v->unk(), 0);
  EXPECT_EQ(v->eot(), -1);
  EXPECT_TRUE(v->is_eog(2));

  const auto json = nlohmann::json::parse(testing::read_file_text(ref));
  for (const auto& c : json.at("cases")) {
    const std::string prompt = c.at("prompt");
    EXPECT_EQ(v->tokenize(prompt, true, false), c.at("prompt_tokens").get<ids>()) << prompt;
    // The continuation printed token by token, as a stream would.
    utf8_stream stream;
    std::string text;
    for (int32_t id : c.at("greedy_tokens").get<ids>()) {
      text += stream.push(v->token_to_piece(id, false));
    }
    text += stream.flush();
    EXPECT_EQ(text, c.at("greedy_text").get<std::string>()) << prompt;
  }
}

}  // namespace
}  // namespace hearth
