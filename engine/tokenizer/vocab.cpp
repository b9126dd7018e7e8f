#include "engine/tokenizer/vocab.h"

#include <algorithm>
#include <cassert>
#include <initializer_list>

#include "common/replace-all.h"
#include "engine/tokenizer/pre-tokenizer.h"
#include "engine/tokenizer/tokenizer-bpe.h"
#include "engine/tokenizer/tokenizer-spm.h"

namespace hearth {
namespace {

constexpr std::string_view k_key_model = "tokenizer.ggml.model";
constexpr std::string_view k_key_pre = "tokenizer.ggml.pre";
constexpr std::string_view k_key_merges = "tokenizer.ggml.merges";
constexpr std::string_view k_key_tokens = "tokenizer.ggml.tokens";
constexpr std::string_view k_key_scores = "tokenizer.ggml.scores";
constexpr std::string_view k_key_token_type = "tokenizer.ggml.token_type";
constexpr std::string_view k_key_add_bos = "tokenizer.ggml.add_bos_token";
constexpr std::string_view k_key_add_eos = "tokenizer.ggml.add_eos_token";
constexpr std::string_view k_key_add_space_prefix = "tokenizer.ggml.add_space_prefix";
constexpr std::string_view k_key_bos = "tokenizer.ggml.bos_token_id";
constexpr std::string_view k_key_eos = "tokenizer.ggml.eos_token_id";

constexpr std::string_view k_space_escape = "\xE2\x96\x81";  // U+2581, SentencePiece's space

bool is_c_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

bool is_one_of(std::string_view s, std::initializer_list<std::string_view> options) {
  return std::find(options.begin(), options.end(), s) != options.end();
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The byte a "<0xXX>" token stands for, or nothing when the text has another form.
std::optional<uint8_t> byte_token_value(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return std::nullopt;
  const int hi = hex_digit(text[3]);
  const int lo = hex_digit(text[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return uint8_t(hi * 16 + lo);
}

// What token_to_piece(id, special = true) returns: llama.cpp's token-to-piece cache.
std::string token_piece(vocab_kind kind, std::string_view text, token_attr attr) {
  switch (attr) {
    case token_attr::control:
    case token_attr::unknown:
    case token_attr::user_defined:
      return std::string(text);
    case token_attr::normal:
      return kind == vocab_kind::bpe ? bpe_byte_decode(text)
                                     : replace_all(text, k_space_escape, " ");
    case token_attr::byte:
      // llama.cpp prints nothing for a byte-type token of a BPE vocabulary.
      return kind == vocab_kind::bpe ? std::string()
                                     : std::string(1, char(*byte_token_value(text)));
    case token_attr::unused:
      return {};  // llama.cpp prints nothing for unused tokens
  }
  return {};
}

result<token_attr> token_attr_from_type(int64_t type, size_t id) {
  switch (type) {
    case 0:  // undefined
    case 1:
      return token_attr::normal;
    case 2:
      return token_attr::unknown;
    case 3:
      return token_attr::control;
    case 4:
      return token_attr::user_defined;
    case 5:
      return token_attr::unused;
    case 6:
      return token_attr::byte;
    default:
      return error{"metadata key '" + std::string(k_key_token_type) + "': token " +
                   std::to_string(id) + " has type " + std::to_string(type) + ", expected 0..6"};
  }
}

// A special token id key. Converters write -1 (i32) or 0xFFFFFFFF (u32) for "none", which reads
// as absent; any other value must be a valid id.
result<std::optional<int32_t>> read_token_id(const gguf_file& f, std::string_view key,
                                             int32_t n_tokens) {
  const gguf_value* v = f.find(key);
  if (!v) return std::optional<int32_t>{};
  if (!v->is_integer()) {
    return error{"metadata key '" + std::string(key) + "' is " +
                 std::string(gguf_value_type_name(v->type)) + ", expected an integer token id"};
  }
  const bool is_signed = v->type == gguf_value_type::i8 || v->type == gguf_value_type::i16 ||
                         v->type == gguf_value_type::i32 || v->type == gguf_value_type::i64;
  if (is_signed ? v->i == -1 : (v->u == 0xFFFFFFFFull || v->u == ~uint64_t(0))) {
    return std::optional<int32_t>{};
  }
  const bool in_range = is_signed ? (v->i >= 0 && v->i < n_tokens) : v->u < uint64_t(n_tokens);
  if (!in_range) {
    const std::string value = is_signed ? std::to_string(v->i) : std::to_string(v->u);
    return error{"metadata key '" + std::string(key) + "' = " + value +
                 " is not a token id (the vocabulary has " + std::to_string(n_tokens) + " tokens)"};
  }
  return std::optional<int32_t>{int32_t(is_signed ? v->i : int64_t(v->u))};
}

result<void> read_bool(const gguf_file& f, std::string_view key, bool* out) {
  auto v = f.get_bool(key);
  if (!v) return v.err();
  if (*v) *out = **v;
  return {};
}

// llama.cpp's clean-up of detokenized BPE text (llama_vocab::impl::detokenize, clean_spaces),
// three passes over the bytes, in place.
void clean_up_spaces(std::string& s) {
  const auto pass = [&s](auto&& step) {
    const size_t n = s.size();
    size_t total = n ? 1 : 0;
    for (size_t i = 1; i < n; ++i) step(i, n, total);
    s.resize(total);
  };
  // " ?", " !", " .", " ,": the space goes.
  pass([&s](size_t i, size_t, size_t& total) {
    const char x = s[i];
    if (s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    s[total++] = x;
  });
  // " ' ": both spaces go.
  pass([&s](size_t& i, size_t n, size_t& total) {
    const char x = s[i];
    if (x == '\'' && i + 1 < n && s[i - 1] == ' ' && s[i + 1] == ' ') {
      --total;
      s[++i] = '\0';
    }
    s[total++] = x;
  });
  // " 's", " 'm", " 're", " 've": the space goes (" 't", " 'd", " 'll" keep it).
  pass([&s](size_t i, size_t n, size_t& total) {
    const char x = s[i];
    if (s[i - 1] == ' ' && x == '\'' && i + 1 < n) {
      const char x1 = s[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if (i + 2 < n && ((x1 == 'r' && s[i + 2] == 'e') || (x1 == 'v' && s[i + 2] == 'e'))) {
        --total;
      }
    }
    s[total++] = x;
  });
}

}  // namespace

result<vocab> vocab::from_gguf(const gguf_file& f) {
  vocab v;

  auto model = f.get_string(k_key_model);
  if (!model) return model.err();
  if (!*model) return error{"metadata key '" + std::string(k_key_model) + "' is missing"};
  if (**model == "llama") {
    v.kind_ = vocab_kind::spm;
    v.bos_ = 1;
    v.eos_ = 2;
    v.unk_ = 0;
    v.add_bos_ = true;
    v.add_eos_ = false;
    v.add_space_prefix_ = true;
  } else if (**model == "gpt2") {
    v.kind_ = vocab_kind::bpe;
    v.bos_ = 11;
    v.eos_ = 11;
    v.unk_ = -1;
    v.add_space_prefix_ = false;
    auto merges = f.get_string_array(k_key_merges);
    if (!merges) return merges.err();
    if (!*merges) {
      return error{"tokenizer 'gpt2' (metadata key '" + std::string(k_key_model) +
                   "') needs metadata key '" + std::string(k_key_merges) + "', which is missing"};
    }
    auto pre = f.get_string(k_key_pre);
    if (!pre) return pre.err();
    v.pre_ = pre->value_or("");
    if (v.pre_.empty()) v.pre_ = "default";
    const pre_tokenizer_spec* spec = pre_tokenizer_find(v.pre_);
    if (!spec) {
      return error{"unknown pre-tokenizer '" + v.pre_ + "' (metadata key '" +
                   std::string(k_key_pre) + "')"};
    }
    v.add_bos_ = spec->add_bos;
    v.clean_spaces_ = spec->clean_spaces;
    if (spec->no_bos) v.bos_ = -1;
    auto bpe = bpe_tokenizer::create(**merges, *spec);
    if (!bpe) return error{"pre-tokenizer '" + v.pre_ + "': " + bpe.message()};
    v.bpe_ = std::make_shared<const bpe_tokenizer>(std::move(bpe).value());
  } else {
    return error{"unsupported tokenizer '" + **model + "' (metadata key '" +
                 std::string(k_key_model) + "'); supported: 'llama' (SentencePiece), 'gpt2' (BPE)"};
  }
  if (auto r = read_bool(f, k_key_add_space_prefix, &v.add_space_prefix_); !r) return r.err();

  auto tokens = f.get_string_array(k_key_tokens);
  if (!tokens) return tokens.err();
  if (!*tokens) return error{"metadata key '" + std::string(k_key_tokens) + "' is missing"};
  const size_t n = (*tokens)->size();
  if (n == 0) return error{"metadata key '" + std::string(k_key_tokens) + "' is empty"};
  if (n > size_t(INT32_MAX)) {
    return error{"metadata key '" + std::string(k_key_tokens) + "' has " + std::to_string(n) +
                 " tokens, more than a 32-bit id can address"};
  }

  auto scores = f.get_float_array(k_key_scores);
  if (!scores) return scores.err();
  if (*scores && (*scores)->size() != n) {
    return error{"metadata key '" + std::string(k_key_scores) + "' has " +
                 std::to_string((*scores)->size()) + " entries for " + std::to_string(n) +
                 " tokens"};
  }
  auto types = f.get_int_array(k_key_token_type);
  if (!types) return types.err();
  if (*types && (*types)->size() != n) {
    return error{"metadata key '" + std::string(k_key_token_type) + "' has " +
                 std::to_string((*types)->size()) + " entries for " + std::to_string(n) +
                 " tokens"};
  }

  // No ids_.reserve(): filled like llama.cpp's token_to_id, its iteration order stays the same as
  // llama.cpp's (detect_special_tokens_by_text depends on it).
  v.tokens_.resize(n);
  for (size_t id = 0; id < n; ++id) {
    token_data& t = v.tokens_[id];
    t.text = std::move((**tokens)[id]);
    // As llama.cpp: an empty token could never be matched and would break special-token search.
    if (t.text.empty()) t.text = "[EMPTY_" + std::to_string(id) + "]";
    if (*scores) t.score = float((**scores)[id]);
    if (*types) {
      auto attr = token_attr_from_type((**types)[id], id);
      if (!attr) return attr.err();
      t.attr = *attr;
    }
    if (v.kind_ == vocab_kind::spm && t.attr == token_attr::byte && !byte_token_value(t.text)) {
      return error{"metadata key '" + std::string(k_key_token_type) + "': token " +
                   std::to_string(id) + " is a byte token but its text '" + t.text +
                   "' is not of the form <0xXX>"};
    }
    const auto [it, inserted] = v.ids_.emplace(t.text, int32_t(id));
    if (!inserted) {
      return error{"metadata key '" + std::string(k_key_tokens) + "': token '" + t.text +
                   "' appears twice (ids " + std::to_string(it->second) + " and " +
                   std::to_string(id) + ")"};
    }
  }

  if (auto r = v.load_special_tokens(f); !r) return r.err();
  if (auto r = read_bool(f, k_key_add_bos, &v.add_bos_); !r) return r.err();
  if (auto r = read_bool(f, k_key_add_eos, &v.add_eos_); !r) return r.err();
  if (v.add_bos_ && v.bos_ < 0) {
    return error{"metadata key '" + std::string(k_key_add_bos) + "' is true but there is no '" +
                 std::string(k_key_bos) + "'"};
  }
  if (v.add_eos_ && v.eos_ < 0) {
    return error{"metadata key '" + std::string(k_key_add_eos) + "' is true but there is no '" +
                 std::string(k_key_eos) + "'"};
  }

  v.detect_special_tokens_by_text();

  for (int32_t id = 0; id < v.n_tokens(); ++id) {
    const token_attr a = v.tokens_[id].attr;
    if (a == token_attr::control || a == token_attr::user_defined || a == token_attr::unknown) {
      v.special_.push_back(id);
    }
  }
  // Longest first, so that a special token containing a shorter one wins. llama.cpp's std::sort
  // leaves equal lengths in unspecified order; ids keep it deterministic here.
  std::stable_sort(v.special_.begin(), v.special_.end(), [&](int32_t a, int32_t b) {
    return v.tokens_[a].text.size() > v.tokens_[b].text.size();
  });

  v.pieces_.reserve(n);
  for (const token_data& t : v.tokens_) v.pieces_.push_back(token_piece(v.kind_, t.text, t.attr));

  if (auto r = v.apply_model_token_attrs(f); !r) return r.err();
  return v;
}

result<void> vocab::load_special_tokens(const gguf_file& f) {
  // A default the vocabulary is too small for means "none".
  for (int32_t* id : {&bos_, &eos_, &unk_}) {
    if (*id >= n_tokens()) *id = -1;
  }
  // llama.cpp's order: the deprecated FIM keys come last and override the current ones.
  const std::pair<std::string_view, int32_t*> keys[] = {
      {k_key_bos, &bos_},
      {k_key_eos, &eos_},
      {"tokenizer.ggml.eot_token_id", &eot_},
      {"tokenizer.ggml.eom_token_id", &eom_},
      {"tokenizer.ggml.unknown_token_id", &unk_},
      {"tokenizer.ggml.fim_pre_token_id", &fim_pre_},
      {"tokenizer.ggml.fim_suf_token_id", &fim_suf_},
      {"tokenizer.ggml.fim_mid_token_id", &fim_mid_},
      {"tokenizer.ggml.fim_pad_token_id", &fim_pad_},
      {"tokenizer.ggml.fim_rep_token_id", &fim_rep_},
      {"tokenizer.ggml.fim_sep_token_id", &fim_sep_},
      {"tokenizer.ggml.prefix_token_id", &fim_pre_},
      {"tokenizer.ggml.suffix_token_id", &fim_suf_},
      {"tokenizer.ggml.middle_token_id", &fim_mid_},
  };
  for (const auto& [key, id] : keys) {
    auto r = read_token_id(f, key, n_tokens());
    if (!r) return r.err();
    if (*r) *id = **r;
  }
  return {};
}

void vocab::detect_special_tokens_by_text() {
  // Converters do not always record these ids, so llama.cpp recognises the tokens by their text
  // and makes them control tokens (never printed, matched in text only with parse_special). It
  // scans its text -> id hash map and keeps the first match; ids_ is the same kind of map filled
  // in the same order, so the scan below visits tokens in the order llama.cpp does.
  auto take = [&](int32_t* slot, int32_t id, std::string_view text,
                  std::initializer_list<std::string_view> texts) {
    if (*slot >= 0 || !is_one_of(text, texts)) return;
    *slot = id;
    tokens_[id].attr = token_attr::control;
  };
  for (const auto& [text, id] : ids_) {
    take(&eot_, id, text,
         {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>",
          "<｜end▁of▁sentence｜>"});
    take(&eom_, id, text, {"<|eom_id|>"});
    take(&fim_pre_, id, text, {"<|fim_prefix|>", "<fim-prefix>", "<｜fim▁begin｜>", "<PRE>"});
    take(&fim_suf_, id, text, {"<|fim_suffix|>", "<fim-suffix>", "<｜fim▁hole｜>", "<SUF>"});
    take(&fim_mid_, id, text, {"<|fim_middle|>", "<fim-middle>", "<｜fim▁end｜>", "<MID>"});
    take(&fim_pad_, id, text, {"<|fim_pad|>", "<fim-pad>", "<PAD>"});
    take(&fim_rep_, id, text, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>"});
    take(&fim_sep_, id, text, {"<|file_sep|>"});
  }

  eog_.clear();
  for (int32_t id : {fim_pad_, fim_rep_, fim_sep_}) {
    if (id >= 0) eog_.insert(id);
  }
  for (const auto& [text, id] : ids_) {
    if (is_one_of(text, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                         "<|eom_id|>", "<EOT>"})) {
      eog_.insert(id);
      tokens_[id].attr = token_attr::control;
    }
  }
  for (int32_t id : {eos_, eot_, eom_}) {
    if (id >= 0) eog_.insert(id);
  }
}

result<void> vocab::apply_model_token_attrs(const gguf_file& f) {
  auto name = f.get_string("general.name");
  if (!name) return name.err();
  std::string lower = name->value_or("");
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; });
  // Phi-3's tokenizer.json strips the whitespace after its added tokens; the GGUF does not record
  // that, so llama.cpp recognises the model by name (and Jina v2's <mask> by pre-tokenizer).
  if (pre_ == "jina-v2-de" || pre_ == "jina-v2-es" || pre_ == "jina-v2-code") {
    if (auto id = find("<mask>")) tokens_[*id].lstrip = true;
  } else if (lower.find("phi-3") != std::string::npos || lower.find("phi3") != std::string::npos) {
    for (int32_t id : special_) tokens_[id].rstrip = true;
    for (auto [text, rstrip] : {std::pair<std::string_view, bool>{"</s>", true},
                                {"<unk>", false},
                                {"<s>", false},
                                {"<|endoftext|>", false}}) {
      if (auto id = find(text)) tokens_[*id].rstrip = rstrip;
    }
  }
  return {};
}

token_attr vocab::attr(int32_t id) const {
  assert(id >= 0 && id < n_tokens());
  return tokens_[id].attr;
}

const std::string& vocab::text(int32_t id) const {
  assert(id >= 0 && id < n_tokens());
  return tokens_[id].text;
}

float vocab::score(int32_t id) const {
  assert(id >= 0 && id < n_tokens());
  return tokens_[id].score;
}

std::optional<int32_t> vocab::find(std::string_view text) const {
  const auto it = ids_.find(text);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

// llama.cpp's tokenizer_st_partition: for each candidate special token in turn (longest first),
// split every remaining raw-text fragment at each non-overlapping occurrence, left to right.
std::vector<vocab::fragment> vocab::partition(std::string_view text, bool parse_special) const {
  std::vector<fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back(fragment{-1, 0, text.size()});
  std::vector<fragment> next;
  for (const int32_t id : special_) {
    const token_data& t = tokens_[id];
    if (!parse_special && (t.attr == token_attr::control || t.attr == token_attr::unknown)) {
      continue;
    }
    next.clear();
    for (const fragment& fr : fragments) {
      if (fr.token >= 0) {
        next.push_back(fr);
        continue;
      }
      size_t offset = fr.offset;
      size_t length = fr.length;
      for (;;) {
        const size_t hit = text.substr(offset, length).find(t.text);
        if (hit == std::string_view::npos) {
          if (length > 0) next.push_back(fragment{-1, offset, length});
          break;
        }
        size_t left = hit;
        if (t.lstrip) {
          while (left > 0 && is_c_space(text[offset + left - 1])) --left;
        }
        if (left > 0) next.push_back(fragment{-1, offset, left});
        next.push_back(fragment{id, 0, 0});
        offset += hit + t.text.size();
        length -= hit + t.text.size();
        if (t.rstrip) {
          while (length > 0 && is_c_space(text[offset])) ++offset, --length;
        }
      }
    }
    fragments.swap(next);
  }
  return fragments;
}

std::vector<int32_t> vocab::tokenize(std::string_view text, bool add_special,
                                     bool parse_special) const {
  const std::vector<fragment> fragments = partition(text, parse_special);
  std::vector<int32_t> out;
  switch (kind_) {
    case vocab_kind::spm:
      tokenize_spm(text, fragments, add_special, out);
      break;
    case vocab_kind::bpe:
      tokenize_bpe(text, fragments, add_special, out);
      break;
  }
  return out;
}

// llama.cpp's llama_tokenize_impl, LLAMA_VOCAB_TYPE_BPE case: no space prefix; each raw
// fragment is tokenized on its own.
void vocab::tokenize_bpe(std::string_view text, const std::vector<fragment>& fragments,
                         bool add_special, std::vector<int32_t>& out) const {
  if (add_special && add_bos_) out.push_back(bos_);
  for (const fragment& fr : fragments) {
    if (fr.token >= 0) {
      out.push_back(fr.token);
    } else {
      bpe_->tokenize(*this, text.substr(fr.offset, fr.length), out);
    }
  }
  if (add_special && add_eos_) out.push_back(eos_);
}

// llama.cpp's llama_tokenize_impl, LLAMA_VOCAB_TYPE_SPM case.
void vocab::tokenize_spm(std::string_view text, const std::vector<fragment>& fragments,
                         bool add_special, std::vector<int32_t>& out) const {
  if (add_special && add_bos_) out.push_back(bos_);
  // SentencePiece's dummy prefix: a space before the text, and again after every special token
  // (each raw fragment is encoded as if it began a text).
  bool prev_special = true;
  std::string piece;
  for (const fragment& fr : fragments) {
    if (fr.token >= 0) {
      out.push_back(fr.token);
      prev_special = true;
      continue;
    }
    piece.clear();
    if (add_space_prefix_ && prev_special) piece.push_back(' ');
    piece.append(text.substr(fr.offset, fr.length));
    spm_tokenize(*this, replace_all(piece, " ", k_space_escape), out);
    prev_special = false;
  }
  if (add_special && add_eos_) out.push_back(eos_);
}

std::string vocab::token_to_piece(int32_t id, bool special) const {
  if (id < 0 || id >= n_tokens()) return {};
  const token_attr a = tokens_[id].attr;
  if (!special && (a == token_attr::control || a == token_attr::unknown)) return {};
  return pieces_[id];
}

std::string vocab::detokenize(std::span<const int32_t> ids, bool special) const {
  std::string out;
  bool strip_space = add_space_prefix_;
  for (const int32_t id : ids) {
    const std::string piece = token_to_piece(id, special);
    const bool strip = strip_space && !piece.empty() && piece[0] == ' ';
    out.append(piece, strip ? 1 : 0);
    strip_space = false;
  }
  if (clean_spaces_) clean_up_spaces(out);
  return out;
}

}  // namespace hearth
