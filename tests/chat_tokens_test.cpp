// Chat templates down to token ids on real tokenizers:
//  - Mistral's own instruct tokenization (mistral-common's no-tools sample, ids in
//    tests/data/mistral/) from the mistral-v1 and mistral-v3 formats, through the sentencepiece
//    library and Mistral's tokenizer.model files, splitting on control pieces as mistral-common
//    assembles them; and how far vocab::tokenize on a GGUF vocabulary of the same file (what
//    `hearth run --chat` and llama.cpp do) is from those ids;
//  - `hearth run --chat`'s tokenization (add_special and parse_special, as llama.cpp): BOS once
//    at the start, "</s>" / "<s>" in the history as EOS / BOS, turn markers as single tokens (the
//    Llama 2 and Phi-3 vocabularies of llama.cpp's test files).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "engine/import/sp-model.h"
#include "engine/io/gguf-writer.h"
#include "engine/io/gguf.h"
#include "engine/tokenizer/chat-template.h"
#include "engine/tokenizer/vocab.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

using ids = std::vector<int32_t>;

// tests/data/ beside this file (checked-in expectations, unlike ../shared/testdata).
std::string local_data(const std::string& relative) {
  return (std::filesystem::path(HEARTH_SOURCE_DIR) / "tests" / "data" / relative).string();
}

// The pieces of a SentencePiece model file, read from its protobuf: ModelProto.pieces = 1
// (repeated SentencePiece { piece = 1; score = 2; type = 3 }, type NORMAL 1, UNKNOWN 2,
// CONTROL 3, USER_DEFINED 4, UNUSED 5, BYTE 6: the values of GGUF's token_type).
struct sp_piece {
  std::string text;
  float score = 0;
  uint32_t type = 1;
};

struct control_piece {
  std::string text;
  int32_t id;
};

class proto_reader {
 public:
  explicit proto_reader(std::string_view b) : b_(b) {}
  bool done() const { return pos_ >= b_.size(); }
  bool ok() const { return ok_; }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= b_.size()) return fail();
      const auto byte = uint8_t(b_[pos_++]);
      v |= uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return v;
    }
    return fail();
  }
  std::string_view bytes() {
    const uint64_t n = varint();
    if (!ok_ || n > b_.size() - pos_) return fail(), std::string_view();
    const std::string_view s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::string_view fixed32() {
    if (4 > b_.size() - pos_) return fail(), std::string_view();
    const std::string_view s = b_.substr(pos_, 4);
    pos_ += 4;
    return s;
  }
  void skip(uint32_t wire_type) {
    if (wire_type == 0) {
      varint();
    } else if (wire_type == 2) {
      bytes();
    } else if (wire_type == 1 || wire_type == 5) {
      const size_t n = wire_type == 1 ? 8 : 4;
      if (n > b_.size() - pos_) return void(fail());
      pos_ += n;
    } else {
      fail();
    }
  }

 private:
  uint64_t fail() {
    ok_ = false;
    pos_ = b_.size();
    return 0;
  }
  std::string_view b_;
  size_t pos_ = 0;
  bool ok_ = true;
};

std::vector<sp_piece> sentencepiece_pieces(const std::string& path) {
  const std::string file = testing::read_file_text(path);
  std::vector<sp_piece> out;
  proto_reader model(file);
  while (!model.done()) {
    const uint64_t key = model.varint();
    if (key >> 3 != 1 || (key & 7) != 2) {
      model.skip(uint32_t(key & 7));
      continue;
    }
    proto_reader piece(model.bytes());
    sp_piece p;
    while (!piece.done()) {
      const uint64_t k = piece.varint();
      if (k == (1 << 3 | 2)) {
        p.text = std::string(piece.bytes());
      } else if (k == (2 << 3 | 5)) {
        const std::string_view b = piece.fixed32();
        if (b.size() == 4) std::memcpy(&p.score, b.data(), 4);
      } else if (k == (3 << 3 | 0)) {
        p.type = uint32_t(piece.varint());
      } else {
        piece.skip(uint32_t(k & 7));
      }
    }
    EXPECT_TRUE(piece.ok()) << path << ": piece " << out.size();
    out.push_back(std::move(p));
  }
  EXPECT_TRUE(model.ok()) << path;
  return out;
}

std::vector<control_piece> sentencepiece_control_pieces(const std::string& path) {
  std::vector<control_piece> out;
  const auto pieces = sentencepiece_pieces(path);
  for (size_t id = 0; id < pieces.size(); ++id)
    if (pieces[id].type == 3) out.push_back({pieces[id].text, int32_t(id)});
  return out;
}

// Tokenizes a formatted chat into the ids mistral-common assembles from the messages: the control
// pieces written in the text ("<s>", "</s>", and "[INST]" / "[/INST]" where the vocabulary has
// them as control pieces) become their ids, and each run of text between them is encoded on its
// own by sentencepiece.
// The sentencepiece library starts every encoded piece with its dummy-prefix "▁", which Mistral's
// string formats write out as a space (" [INST] ..." in v1, "[INST] What..." in v3): one leading
// space of each run is that prefix, so it is dropped before encoding.
ids mistral_tokens(const sp_model& sp, const std::vector<control_piece>& controls, int32_t bos,
                   std::string_view text) {
  ids out = {bos};  // what add_special adds; the formats never write BOS first
  size_t run_start = 0;
  auto flush = [&](size_t end) {
    std::string_view run = text.substr(run_start, end - run_start);
    if (run.starts_with(' ')) run.remove_prefix(1);
    if (!run.empty()) {
      const ids piece = sp.encode(run);
      out.insert(out.end(), piece.begin(), piece.end());
    }
  };
  for (size_t i = 0; i < text.size();) {
    const control_piece* hit = nullptr;
    for (const auto& c : controls) {
      if (!c.text.empty() && text.substr(i).starts_with(c.text) &&
          (!hit || c.text.size() > hit->text.size())) {
        hit = &c;
      }
    }
    if (!hit) {
      ++i;
      continue;
    }
    flush(i);
    out.push_back(hit->id);
    i += hit->text.size();
    run_start = i;
  }
  flush(text.size());
  return out;
}

std::vector<chat_message> sample_messages() {
  const std::string path = testing::testdata_path("tokenizers/mistral/sample.json");
  if (path.empty()) return {};
  const auto j = nlohmann::json::parse(testing::read_file_text(path));
  std::vector<chat_message> out;
  for (const auto& m : j.at("messages")) {
    out.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
  }
  return out;
}

std::optional<ids> expected_tokens(const std::string& name) {
  const std::string path = local_data("mistral/" + name);
  if (!std::filesystem::exists(path)) return std::nullopt;
  return nlohmann::json::parse(testing::read_file_text(path)).at("tokens").get<ids>();
}

void check_mistral(chat_template t, const std::string& tokenizer, const std::string& expected) {
  const auto want = expected_tokens(expected);
  if (!want) {
    GTEST_SKIP() << "tests/data/mistral/" << expected
                 << " is missing: mistral-common's expected ids were not checked in";
  }
  const auto messages = sample_messages();
  ASSERT_FALSE(messages.empty());
  const std::string path = testing::testdata_path("tokenizers/mistral/" + tokenizer);
  ASSERT_FALSE(path.empty());
  auto sp = sp_model::load(path);
  ASSERT_TRUE(sp.ok()) << sp.message();
  const auto controls = sentencepiece_control_pieces(path);
  auto find = [&](std::string_view s) {
    for (const auto& c : controls)
      if (c.text == s) return c.id;
    return -1;
  };
  ASSERT_EQ(find("<s>"), 1);
  ASSERT_EQ(find("</s>"), 2);

  auto text = chat_template_apply(t, messages);
  ASSERT_TRUE(text.ok()) << text.message();
  const ids got = mistral_tokens(*sp, controls, find("<s>"), *text);
  EXPECT_EQ(got, *want) << "formatted as " << chat_template_name(t) << ":\n" << *text;
}

TEST(ChatTokens, MistralV1MatchesMistralCommon) {
  // The v1 vocabulary has no [INST] piece: the format writes it as text.
  check_mistral(chat_template::mistral_v1, "tokenizer.model.v1", "tokens_v1.json");
}

TEST(ChatTokens, MistralV3MatchesMistralCommon) {
  // [INST] and [/INST] are control pieces 3 and 4 of the v3 vocabulary.
  const std::string path =
      testing::testdata_path("tokenizers/mistral/mistral_instruct_tokenizer_240323.model.v3");
  ASSERT_FALSE(path.empty());
  const auto controls = sentencepiece_control_pieces(path);
  auto id_of = [&](std::string_view s) {
    for (const auto& c : controls)
      if (c.text == s) return c.id;
    return -1;
  };
  EXPECT_EQ(id_of("[INST]"), 3);
  EXPECT_EQ(id_of("[/INST]"), 4);
  check_mistral(chat_template::mistral_v3, "mistral_instruct_tokenizer_240323.model.v3",
                "tokens_v3.json");
}

// A GGUF vocabulary built from a SentencePiece model file the way llama.cpp's converter does
// (pieces, scores and types; BOS 1, EOS 2, UNK 0; add_space_prefix from the dummy prefix).
struct gguf_vocab {
  std::vector<uint8_t> bytes;
  std::optional<vocab> v;
};

gguf_vocab vocab_from_sentencepiece(const std::string& path) {
  gguf_vocab out;
  gguf_writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", "llama");
  std::vector<std::string> texts;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (const auto& p : sentencepiece_pieces(path)) {
    texts.push_back(p.text);
    scores.push_back(p.score);
    types.push_back(int32_t(p.type));
  }
  w.set_string_array("tokenizer.ggml.tokens", texts);
  w.set_f32_array("tokenizer.ggml.scores", scores);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
  w.set_bool("tokenizer.ggml.add_space_prefix", true);
  out.bytes = w.to_bytes();
  auto f = gguf_file::parse(out.bytes);
  EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.message());
  if (!f.ok()) return out;
  auto v = vocab::from_gguf(*f);
  EXPECT_TRUE(v.ok()) << (v.ok() ? "" : v.message());
  if (v.ok()) out.v = std::move(*v);
  return out;
}

// What `hearth run --chat` (and llama.cpp) make of the same text on a GGUF vocabulary with
// add_space_prefix: vocab::tokenize puts a space before every run of text that follows a special
// token, and the Mistral formats already write that space, so each such run starts with one "▁"
// token more than mistral-common's ids (after BOS and </s> in v1; after [INST], [/INST] in v3).
// Pinned here so that a change to either side is a decision, not an accident (see
// engine/tokenizer/chat-template.h).
TEST(ChatTokens, MistralThroughAGgufVocabularyHasASpaceMoreAfterSpecialTokens) {
  const std::tuple<chat_template, const char*, const char*, int32_t> cases[] = {
      {chat_template::mistral_v1, "tokenizer.model.v1", "tokens_v1.json", 28705},
      {chat_template::mistral_v3, "mistral_instruct_tokenizer_240323.model.v3", "tokens_v3.json",
       29473},
  };
  for (const auto& [tmpl, file, expected, space] : cases) {
    SCOPED_TRACE(file);
    const auto want = expected_tokens(expected);
    if (!want) GTEST_SKIP() << "tests/data/mistral/" << expected << " is missing";
    const std::string path = testing::testdata_path(std::string("tokenizers/mistral/") + file);
    ASSERT_FALSE(path.empty());
    const auto gv = vocab_from_sentencepiece(path);
    ASSERT_TRUE(gv.v.has_value());
    EXPECT_EQ(gv.v->token_to_piece(space, true), " ");
    auto text = chat_template_apply(tmpl, sample_messages());
    ASSERT_TRUE(text.ok());

    ids spaced;
    auto special = [&](int32_t id) { return gv.v->attr(id) == token_attr::control; };
    for (size_t i = 0; i < want->size(); ++i) {
      spaced.push_back((*want)[i]);
      if (special((*want)[i]) && i + 1 < want->size() && !special((*want)[i + 1])) {
        spaced.push_back(space);
      }
    }
    EXPECT_EQ(gv.v->tokenize(*text, true, true), spaced);
  }
}

vocab load_vocab(const std::string& name) {
  const std::string path = testing::testdata_path("vocab/" + name);
  EXPECT_FALSE(path.empty());
  auto f = gguf_file::open(path);
  EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.message());
  auto v = vocab::from_gguf(*f);
  EXPECT_TRUE(v.ok()) << (v.ok() ? "" : v.message());
  return std::move(*v);
}

const std::vector<chat_message> k_conversation = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
};

// `hearth run --chat` on a Llama 2 vocabulary: BOS once, from the tokenizer; the history's
// "</s><s>" become EOS and BOS; the same text without parse_special would spell them out.
TEST(ChatTokens, Llama2HistoryMarkersBecomeBosAndEos) {
  const vocab v = load_vocab("ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(v.add_bos());
  auto text = chat_template_apply(chat_template::llama2_sys_bos, k_conversation);
  ASSERT_TRUE(text.ok());
  const ids t = v.tokenize(*text, true, true);
  ASSERT_FALSE(t.empty());
  EXPECT_EQ(t[0], v.bos());
  EXPECT_NE(t[1], v.bos());
  EXPECT_EQ(std::count(t.begin(), t.end(), v.bos()), 2);
  EXPECT_EQ(std::count(t.begin(), t.end(), v.eos()), 1);
  const auto eos_at = std::find(t.begin(), t.end(), v.eos());
  ASSERT_NE(eos_at + 1, t.end());
  EXPECT_EQ(eos_at[1], v.bos());
  const ids raw = v.tokenize(*text, true, false);
  EXPECT_EQ(std::count(raw.begin(), raw.end(), v.bos()), 1);
  EXPECT_EQ(std::count(raw.begin(), raw.end(), v.eos()), 0);
  // The detokenized text (special tokens shown) is the formatted text after the BOS, but for the
  // SentencePiece prefix space before the text after "<s>", which tokenize adds (as llama.cpp; it
  // is also what Meta's reference gives, encoding each turn on its own: "<s>▁[INST]").
  std::string spaced = *text;
  spaced.replace(spaced.find("<s>[INST]"), 9, "<s> [INST]");
  EXPECT_EQ(v.detokenize(ids(t.begin() + 1, t.end()), true), spaced);
}

// Phi-3's turn markers are single tokens; <|end|> ends generation.
TEST(ChatTokens, Phi3TurnMarkersAreSingleTokens) {
  const vocab v = load_vocab("ggml-vocab-phi-3.gguf");
  auto text = chat_template_apply(chat_template::phi3, k_conversation);
  ASSERT_TRUE(text.ok());
  const ids t = v.tokenize(*text, true, true);
  for (const char* marker : {"<|system|>", "<|user|>", "<|assistant|>", "<|end|>"}) {
    const auto id = v.find(marker);
    ASSERT_TRUE(id.has_value()) << marker;
    EXPECT_GE(std::count(t.begin(), t.end(), *id), 1) << marker;
  }
  EXPECT_EQ(std::count(t.begin(), t.end(), *v.find("<|end|>")), 4);
  // The generation prompt comes last (a newline after it may be stripped, as Phi-3's markers do).
  const auto last = std::find(t.rbegin(), t.rend(), *v.find("<|assistant|>"));
  EXPECT_LE(last - t.rbegin(), 1);
  EXPECT_TRUE(v.is_eog(*v.find("<|end|>")));
  if (v.add_bos()) {
    EXPECT_EQ(t[0], v.bos());
    EXPECT_EQ(std::count(t.begin(), t.end(), v.bos()), 1);
  }
}

}  // namespace
}  // namespace hearth
