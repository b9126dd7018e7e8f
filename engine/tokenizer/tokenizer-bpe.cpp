#include "engine/tokenizer/tokenizer-bpe.h"

#include <algorithm>
#include <array>
#include <optional>
#include <queue>

#include "engine/tokenizer/symbol-merge.h"
#include "engine/tokenizer/utf8.h"
#include "engine/tokenizer/vocab.h"

namespace hearth {
namespace {

// GPT-2's bytes_to_unicode as code points: byte -> character, and character -> byte (-1: none).
struct byte_map {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 512> to_byte{};
  std::array<std::string, 256> to_utf8;

  byte_map() {
    to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      to_cp[b] = printable ? uint32_t(b) : next++;
      to_byte[to_cp[b]] = int16_t(b);
      const uint32_t cp = to_cp[b];
      to_utf8[b] = cp < 0x80 ? std::string(1, char(cp))
                             : std::string{char(0xC0 | cp >> 6), char(0x80 | (cp & 0x3F))};
    }
  }
};

const byte_map& bytes() {
  static const byte_map m;
  return m;
}

// llama.cpp's unicode_len_utf8: the length a lead byte announces, by its high nibble only.
size_t utf8_len(char c) {
  static constexpr size_t k_len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return k_len[uint8_t(c) >> 4];
}

// One code point as llama.cpp's unicode_cpt_from_utf8 reads it, U+FFFD (one byte consumed)
// where it would throw.
uint32_t decode_cp(std::string_view s, size_t& i) {
  const auto cont = [&](size_t k) { return k < s.size() && (uint8_t(s[k]) & 0xC0) == 0x80; };
  const uint8_t c = uint8_t(s[i]);
  const size_t n = !(c & 0x80)   ? 1
                   : !(c & 0x40) ? 0
                   : !(c & 0x20) ? 2
                   : !(c & 0x10) ? 3
                   : !(c & 0x08) ? 4
                                 : 0;
  bool ok = n > 0;
  for (size_t k = 1; ok && k < n; ++k) ok = cont(i + k);
  if (!ok) {
    i += 1;
    return 0xFFFD;
  }
  static constexpr uint8_t k_lead_mask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  uint32_t cp = c & k_lead_mask[n];
  for (size_t k = 1; k < n; ++k) cp = cp << 6 | (uint8_t(s[i + k]) & 0x3F);
  i += n;
  return cp <= 0x10FFFF ? cp : 0xFFFD;  // llama.cpp cannot re-encode those and throws
}

// A piece of a word starts at an offset into it; pairs go lowest merge rank first.
using bpe_symbol = merge_symbol<size_t>;
using bpe_bigram = merge_bigram<int32_t>;

}  // namespace

std::string bpe_byte_encode(std::string_view text) {
  const byte_map& m = bytes();
  std::string out;
  out.reserve(text.size() * 2);
  for (const char c : text) out += m.to_utf8[uint8_t(c)];
  return out;
}

std::string bpe_byte_decode(std::string_view text) {
  const byte_map& m = bytes();
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const uint32_t cp = decode_cp(text, i);
    if (cp < m.to_byte.size() && m.to_byte[cp] >= 0) {
      out += char(m.to_byte[cp]);
      continue;
    }
    static constexpr char k_hex[] = "0123456789abcdef";
    out += "[UNK_BYTE_0x";
    std::string utf8;
    utf8_append(utf8, cp);
    for (const char c : utf8) {
      out += k_hex[uint8_t(c) >> 4];
      out += k_hex[uint8_t(c) & 15];
    }
    out.append(text);
    out += ']';
  }
  return out;
}

result<bpe_tokenizer> bpe_tokenizer::create(std::span<const std::string> merges,
                                            const pre_tokenizer_spec& pre) {
  bpe_tokenizer t;
  auto p = pre_tokenizer::create(pre.regexes);
  if (!p) return p.err();
  t.pre_ = std::move(p).value();
  t.ignore_merges_ = pre.ignore_merges;
  t.ranks_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    if (m.size() < 2 || m.find(' ', 1) == std::string::npos) continue;
    t.ranks_.emplace(m, int32_t(std::min<size_t>(i, INT32_MAX)));
  }
  return t;
}

int32_t bpe_tokenizer::rank(std::string_view left, std::string_view right, std::string& key) const {
  key.assign(left);
  key += ' ';
  key.append(right);
  const auto it = ranks_.find(std::string_view(key));
  return it == ranks_.end() ? -1 : it->second;
}

void bpe_tokenizer::tokenize(const vocab& v, std::string_view text,
                             std::vector<int32_t>& out) const {
  std::vector<std::string> words;
  pre_.split(text, words);
  for (const std::string& word : words) {
    if (!word.empty()) tokenize_word(v, bpe_byte_encode(word), out);
  }
}

void bpe_tokenizer::tokenize_word(const vocab& v, const std::string& word,
                                  std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    if (const std::optional<int32_t> id = v.find(word)) {
      out.push_back(*id);
      return;
    }
  }

  std::vector<bpe_symbol> symbols;
  for (size_t offset = 0; offset < word.size();) {
    bpe_symbol sym;
    sym.start = offset;
    sym.n = std::min(utf8_len(word[offset]), word.size() - offset);
    offset += sym.n;
    const int index = int(symbols.size());
    sym.prev = index - 1;
    sym.next = offset == word.size() ? -1 : index + 1;
    symbols.push_back(sym);
  }

  const std::string_view text = word;
  std::string key;
  merge_queue<int32_t, std::less<int32_t>> queue;
  const auto add_bigram = [&](int left, int right) {
    if (left == -1 || right == -1) return;
    const bpe_symbol& l = symbols[left];
    const bpe_symbol& r = symbols[right];
    const int32_t found = rank(text.substr(l.start, l.n), text.substr(r.start, r.n), key);
    if (found >= 0) queue.push(bpe_bigram{left, right, found, l.n + r.n});
  };
  // Pieces only grow, so equal sizes mean both pieces of a queued pair are still the ones that
  // were paired (llama.cpp compares the texts, which amounts to the same).
  merge_symbols(symbols, queue, add_bigram);

  for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].start, symbols[i].n);
    if (const std::optional<int32_t> id = v.find(piece)) {
      out.push_back(*id);
      continue;
    }
    for (const char c : piece) {
      if (const std::optional<int32_t> id = v.find(std::string_view(&c, 1))) out.push_back(*id);
    }
  }
}

}  // namespace hearth
