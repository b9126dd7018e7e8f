#include "engine/tokenizer/tokenizer-spm.h"

#include <algorithm>
#include <map>
#include <optional>
#include <queue>
#include <string>
#include <utility>

#include "engine/tokenizer/symbol-merge.h"
#include "engine/tokenizer/vocab.h"

namespace hearth {
namespace {

// A piece starts at a pointer into the text; pairs go highest score first.
using spm_symbol = merge_symbol<const char*>;
using spm_bigram = merge_bigram<float>;

// Length of the UTF-8 character a byte starts, judged by its high nibble only, exactly as
// llama.cpp's unicode_len_utf8: continuation and invalid bytes count as one-byte characters.
size_t spm_utf8_len(char c) {
  static constexpr size_t k_len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return k_len[uint8_t(c) >> 4];
}

class spm_session {
 public:
  explicit spm_session(const vocab& v) : vocab_(v) {}

  void tokenize(std::string_view text, std::vector<int32_t>& out) {
    for (size_t offs = 0; offs < text.size();) {
      spm_symbol sym;
      sym.start = text.data() + offs;
      // A lead byte cut off by the end of the text takes only the bytes that are there.
      sym.n = std::min(spm_utf8_len(text[offs]), text.size() - offs);
      offs += sym.n;
      const int index = int(symbols_.size());
      sym.prev = index - 1;
      sym.next = offs == text.size() ? -1 : index + 1;
      symbols_.push_back(sym);
    }

    merge_symbols(symbols_, queue_, [this](int left, int right) { try_add_bigram(left, right); });

    for (int i = symbols_.empty() ? -1 : 0; i != -1; i = symbols_[i].next) {
      resegment(symbols_[i], out);
    }
  }

 private:
  void try_add_bigram(int left, int right) {
    if (left == -1 || right == -1) return;
    std::string text(symbols_[left].start, symbols_[left].n + symbols_[right].n);
    const std::optional<int32_t> id = vocab_.find(text);
    if (!id) return;
    queue_.push(spm_bigram{left, right, vocab_.score(*id), text.size()});
    rev_merge_[std::move(text)] = {left, right};
  }

  // A piece that is not a token is written as bytes. The rev_merge split comes from SentencePiece,
  // where a merge may form an unused piece that must be split again; llama.cpp keeps it although
  // its merges only ever form vocabulary tokens, and so do we, to stay line-for-line comparable.
  void resegment(const spm_symbol& sym, std::vector<int32_t>& out) {
    const std::string text(sym.start, sym.n);
    if (const std::optional<int32_t> id = vocab_.find(text)) {
      out.push_back(*id);
      return;
    }
    const auto merge = rev_merge_.find(text);
    if (merge == rev_merge_.end()) {
      for (char c : text) push_byte(uint8_t(c), out);
      return;
    }
    resegment(symbols_[merge->second.first], out);
    resegment(symbols_[merge->second.second], out);
  }

  // llama.cpp's byte_to_token: the <0xXX> token, else a token that is that one byte. Where
  // llama.cpp would throw on a vocabulary with neither, the unknown token stands in.
  void push_byte(uint8_t b, std::vector<int32_t>& out) const {
    static constexpr char k_hex[] = "0123456789ABCDEF";
    const char name[6] = {'<', '0', 'x', k_hex[b >> 4], k_hex[b & 15], '>'};
    std::optional<int32_t> id = vocab_.find(std::string_view(name, sizeof(name)));
    if (!id) id = vocab_.find(std::string_view(reinterpret_cast<const char*>(&b), 1));
    if (id) {
      out.push_back(*id);
    } else if (vocab_.unk() >= 0) {
      out.push_back(vocab_.unk());
    }
  }

  const vocab& vocab_;
  std::vector<spm_symbol> symbols_;
  merge_queue<float, std::greater<float>> queue_;
  std::map<std::string, std::pair<int, int>> rev_merge_;
};

}  // namespace

void spm_tokenize(const vocab& v, std::string_view text, std::vector<int32_t>& out) {
  spm_session(v).tokenize(text, out);
}

}  // namespace hearth
