// Tokenizer conformance: llama.cpp's test-tokenizer-0 vectors for the SentencePiece vocabularies
// we support, the Llama 2 tokenizer.model run by the sentencepiece library as a second reference,
// and detokenize(tokenize(x)) == x.
#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/gguf.h"
#include "engine/sp-model.h"
#include "engine/vocab.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

using ids = std::vector<int32_t>;

struct vector_case {
  std::string input;
  ids expected;
};

// `.inp`: inputs joined by "\n__ggml_vocab_test__\n", the file ending in that separator (so the
// piece after the last one is not an input; an input may itself be empty). `.out`: one line per
// input, ids separated by spaces (with a leading space), an empty line for no tokens.
std::vector<vector_case> read_vectors(const std::string& name) {
  const std::string inp = testing::testdata_path("vocab/" + name + ".inp");
  const std::string out = testing::testdata_path("vocab/" + name + ".out");
  if (inp.empty() || out.empty()) return {};

  const std::string sep = "\n__ggml_vocab_test__\n";
  const std::string text = testing::read_file_text(inp);
  std::vector<std::string> inputs;
  size_t start = 0;
  for (size_t hit; (hit = text.find(sep, start)) != std::string::npos; start = hit + sep.size()) {
    inputs.push_back(text.substr(start, hit - start));
  }
  EXPECT_EQ(start, text.size()) << inp << " does not end with the separator";

  std::vector<vector_case> cases;
  std::istringstream lines(testing::read_file_text(out));
  std::string line;
  for (size_t k = 0; std::getline(lines, line); ++k) {
    vector_case c;
    if (k < inputs.size()) c.input = inputs[k];
    std::istringstream fields(line);
    for (int32_t id; fields >> id;) c.expected.push_back(id);
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(cases.size(), inputs.size()) << inp << " and " << out << " disagree on the count";
  EXPECT_GE(cases.size(), 40u) << "too few vectors in " << inp;
  return cases;
}

// Input bytes shown unambiguously: printable ASCII as is, everything else escaped.
std::string quoted(const std::string& s) {
  std::string q = "\"";
  for (unsigned char c : s) {
    if (c == '\n') {
      q += "\\n";
    } else if (c == '\t') {
      q += "\\t";
    } else if (c == '"' || c == '\\') {
      q += '\\';
      q += char(c);
    } else if (c >= 0x20 && c < 0x7F) {
      q += char(c);
    } else {
      static constexpr char k_hex[] = "0123456789abcdef";
      q += "\\x";
      q += k_hex[c >> 4];
      q += k_hex[c & 15];
    }
  }
  return q + "\"";
}

std::string utf8_encode(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | cp >> 6);
    s += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += char(0xE0 | cp >> 12);
    s += char(0x80 | (cp >> 6 & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xF0 | cp >> 18);
    s += char(0x80 | (cp >> 12 & 0x3F));
    s += char(0x80 | (cp >> 6 & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

std::string joined(const ids& v) {
  std::string s = "[";
  for (size_t k = 0; k < v.size(); ++k) s += (k ? " " : "") + std::to_string(v[k]);
  return s + "]";
}

vocab load_vocab(const std::string& name) {
  const std::string path = testing::testdata_path("vocab/" + name);
  EXPECT_FALSE(path.empty());
  auto f = gguf_file::open(path);
  EXPECT_TRUE(f.ok()) << f.message();
  auto v = vocab::from_gguf(*f);
  EXPECT_TRUE(v.ok()) << path << ": " << v.message();
  return std::move(v).value();
}

class TokenizerVectors : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerVectors, MatchLlamaCpp) {
  const std::string name = GetParam();
  const vocab v = load_vocab(name);
  const std::vector<vector_case> cases = read_vectors(name);
  ASSERT_FALSE(cases.empty());
  for (const vector_case& c : cases) {
    const ids actual = v.tokenize(c.input, /*add_special=*/false, /*parse_special=*/false);
    EXPECT_EQ(actual, c.expected) << name << " input " << quoted(c.input) << "\n  expected "
                                  << joined(c.expected) << "\n  actual   " << joined(actual);
  }
}

// detokenize drops the space that tokenize prefixed (add_space_prefix), as llama.cpp's
// common_detokenize does for the first token, so every input comes back byte for byte. With BOS
// first, llama.cpp strips nothing (BOS is the first token), so the prefix space stays.
TEST_P(TokenizerVectors, RoundTrip) {
  const std::string name = GetParam();
  const vocab v = load_vocab(name);
  const std::vector<vector_case> cases = read_vectors(name);
  ASSERT_FALSE(cases.empty());
  for (const vector_case& c : cases) {
    const ids tokens = v.tokenize(c.input, false, false);
    EXPECT_EQ(v.detokenize(tokens, false), c.input)
        << name << " input " << quoted(c.input) << " ids " << joined(tokens);
    if (c.input.empty()) continue;
    EXPECT_EQ(v.detokenize(v.tokenize(c.input, true, false), false), " " + c.input)
        << name << " input " << quoted(c.input) << " with BOS";
  }
}

// gtest names the instances from the file name: "llama_spm", "phi_3".
std::string vector_file_label(const ::testing::TestParamInfo<const char*>& param) {
  std::string s = param.param;
  s = s.substr(std::string("ggml-vocab-").size());
  s = s.substr(0, s.find(".gguf"));
  for (char& c : s) {
    if (c == '-') c = '_';
  }
  return s;
}

INSTANTIATE_TEST_SUITE_P(Spm, TokenizerVectors,
                         ::testing::Values("ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf"),
                         vector_file_label);

// The Llama 2 tokenizer.model holds the same vocabulary as ggml-vocab-llama-spm.gguf; the
// sentencepiece library (which adds the dummy-prefix space itself) must agree with our GGUF
// tokenizer on every vector, and decode our ids back to the same text.
TEST(TokenizerVectors, SentencePieceLibraryAgrees) {
  const std::string model = testing::testdata_path("tokenizers/llama2/tokenizer.model");
  ASSERT_FALSE(model.empty());
  auto sp = sp_model::load(model);
  ASSERT_TRUE(sp.ok()) << sp.message();
  const vocab v = load_vocab("ggml-vocab-llama-spm.gguf");
  ASSERT_EQ(sp->n_tokens(), v.n_tokens());

  const std::vector<vector_case> cases = read_vectors("ggml-vocab-llama-spm.gguf");
  ASSERT_FALSE(cases.empty());
  for (const vector_case& c : cases) {
    const ids ours = v.tokenize(c.input, false, false);
    const ids theirs = sp->encode(c.input);
    EXPECT_EQ(ours, theirs) << "input " << quoted(c.input) << "\n  sentencepiece " << joined(theirs)
                            << "\n  hearth        " << joined(ours);
    EXPECT_EQ(sp->decode(ours), v.detokenize(ours, false)) << "input " << quoted(c.input);
  }
}

// Beyond the fixed vectors: seeded random text mixing ASCII, other scripts, emoji, whitespace
// runs and special-token look-alikes. Any split that differs from the library fails here.
TEST(TokenizerVectors, SentencePieceLibraryAgreesOnRandomText) {
  const std::string model = testing::testdata_path("tokenizers/llama2/tokenizer.model");
  ASSERT_FALSE(model.empty());
  auto sp = sp_model::load(model);
  ASSERT_TRUE(sp.ok()) << sp.message();
  const vocab v = load_vocab("ggml-vocab-llama-spm.gguf");

  const std::vector<std::string> words = {"the",   " ",    "  ",    "\n", "\t", "\r",   "ing",
                                          "Hello", "3",    "..",    "'s", "é",  "中文", "🦙",
                                          "<s>",   "</s>", "<unk>", "-",  "="};
  std::mt19937 rng(4748);
  for (int n = 0; n < 5000; ++n) {
    std::string text;
    for (int k = int(rng() % 12); k > 0; --k) {
      const uint32_t pick = rng() % 4;
      if (pick == 0) {
        text += words[rng() % words.size()];
        continue;
      }
      uint32_t cp = pick == 1 ? 0x20 + rng() % 0x5F : 1 + rng() % (pick == 2 ? 0x2FFF : 0x1FFFF);
      if (cp >= 0xD800 && cp < 0xE000) cp = 'x';  // surrogates are not characters
      text += utf8_encode(cp);
    }
    const ids ours = v.tokenize(text, false, false);
    const ids theirs = sp->encode(text);
    ASSERT_EQ(ours, theirs) << "input " << quoted(text) << "\n  sentencepiece " << joined(theirs)
                            << "\n  hearth        " << joined(ours);
  }
}

TEST(TokenizerVectors, SentencePieceModelLoadErrorNamesTheFile) {
  auto sp = sp_model::load("/nonexistent/tokenizer.model");
  ASSERT_FALSE(sp.ok());
  EXPECT_NE(sp.message().find("/nonexistent/tokenizer.model"), std::string::npos) << sp.message();
}

}  // namespace
}  // namespace hearth
