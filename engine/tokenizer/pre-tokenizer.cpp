#include "engine/tokenizer/pre-tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <cstdint>
#include <utility>

#include "engine/tokenizer/utf8.h"

namespace hearth {
namespace {

// The expressions, spelled as in llama.cpp build 4748 (src/llama-vocab.cpp, llm_tokenizer_bpe);
// characters outside ASCII are written as escapes so that no editor can normalise them (the
// DeepSeek class holds U+2126 OHM SIGN and U+212A KELVIN SIGN, which NFC would turn into Ω and K).
constexpr std::string_view k_contractions_hf = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
constexpr std::string_view k_contractions =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";

constexpr std::array<std::string_view, 1> k_gpt2 = {
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
};
constexpr std::array<std::string_view, 1> k_llama3 = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
constexpr std::array<std::string_view, 1> k_qwen2 = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
constexpr std::array<std::string_view, 6> k_deepseek_llm = {
    "[\r\n]",
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-"
    "\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-"
    "\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-"
    "\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-"
    "\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-"
    "\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-"
    "\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-"
    "\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-"
    "\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-"
    "\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-"
    "\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-"
    "\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-"
    "\U0001E943]+",
    "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+",
    "\\s+$",
    "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+",
    "\\p{N}+",
};
constexpr std::array<std::string_view, 3> k_deepseek3_llm = {
    "\\p{N}{1,3}",
    "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+",
    "[!\"#$%&'()*+,\\-./"
    ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
};
constexpr std::array<std::string_view, 5> k_deepseek_coder = {
    "[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+", "\\p{N}",
};
constexpr std::array<std::string_view, 3> k_falcon = {
    "[\\p{P}\\$\\+<=>\\^~\\|`]+",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    "[0-9][0-9][0-9]",
};
constexpr std::array<std::string_view, 2> k_starcoder = {
    "\\p{N}",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
};
constexpr std::array<std::string_view, 1> k_poro = {
    " ?[^(\\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+",
};
constexpr std::array<std::string_view, 2> k_viking = {
    " ?[^(\\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+",
    "\\p{N}",
};
constexpr std::array<std::string_view, 1> k_tekken = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|"
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
constexpr std::array<std::string_view, 6> k_chameleon = {
    "<sentinel:[0-9]+>",
    "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
    "([\\t\\n]|    |  )",
    "\\p{N}",
    "[\\p{P}!-/:-@\\[-`{-~]",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
};
constexpr std::array<std::string_view, 4> k_default = {
    "[\\p{P}\\$\\+<=>\\^~\\|]+",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    "\\p{N}+",
    "[0-9][0-9][0-9]",
};

struct flags {
  bool ignore_merges = false;
  bool add_bos = false;
  bool clean_spaces = true;
  bool no_bos = false;
};
constexpr flags k_plain{};
constexpr flags k_no_clean{.clean_spaces = false};
constexpr flags k_llama3_flags{.ignore_merges = true, .add_bos = true};

constexpr pre_tokenizer_spec spec(std::string_view name, std::span<const std::string_view> regexes,
                                  flags f) {
  return {name, regexes, f.ignore_merges, f.add_bos, f.clean_spaces, f.no_bos};
}

// llama_vocab::load's if-chain as a table. Names sharing expressions are listed so that the one
// a converter writes for the family comes first (pre_tokenizer_name_for returns the first).
const pre_tokenizer_spec k_specs[] = {
    spec("default", k_default, k_plain),
    spec("llama-bpe", k_llama3, k_llama3_flags),
    spec("llama3", k_llama3, k_llama3_flags),
    spec("llama-v3", k_llama3, k_llama3_flags),
    spec("falcon3", k_llama3, k_llama3_flags),
    spec("deepseek-llm", k_deepseek_llm, k_no_clean),
    spec("deepseek-coder", k_deepseek_coder, k_no_clean),
    spec("deepseek-v3", k_deepseek3_llm, k_no_clean),
    spec("falcon", k_falcon, k_plain),
    spec("gpt-2", k_gpt2, k_plain),
    spec("phi-2", k_gpt2, k_plain),
    spec("jina-es", k_gpt2, k_plain),
    spec("jina-de", k_gpt2, k_plain),
    spec("gigachat", k_gpt2, k_plain),
    spec("jina-v1-en", k_gpt2, k_plain),
    spec("jina-v2-es", k_gpt2, k_plain),
    spec("jina-v2-de", k_gpt2, k_plain),
    spec("jina-v2-code", k_gpt2, k_plain),
    spec("roberta-bpe", k_gpt2, k_plain),
    spec("mpt", k_gpt2, k_plain),
    spec("olmo", k_gpt2, k_plain),
    spec("jais", k_gpt2, k_plain),
    spec("starcoder", k_starcoder, k_plain),
    spec("refact", k_starcoder, k_plain),
    spec("command-r", k_starcoder, k_no_clean),
    spec("smollm", k_starcoder, k_no_clean),
    spec("codeshell", k_starcoder, k_plain),
    spec("exaone", k_starcoder, k_plain),
    spec("minerva-7b", k_starcoder, k_plain),
    spec("qwen2", k_qwen2, k_no_clean),
    spec("deepseek-r1-qwen", k_qwen2, k_no_clean),
    spec("stablelm2", k_qwen2, k_plain),
    spec("megrez", k_qwen2, k_plain),
    spec("dbrx", k_llama3, k_plain),
    spec("smaug-bpe", k_llama3, k_plain),
    spec("chatglm-bpe", k_llama3, {.no_bos = true}),
    spec("poro-chat", k_poro, k_no_clean),
    spec("bloom", k_poro, k_plain),
    spec("gpt3-finnish", k_poro, k_plain),
    spec("viking", k_viking, k_no_clean),
    spec("tekken", k_tekken, {.ignore_merges = true, .add_bos = true, .clean_spaces = false}),
    spec("chameleon", k_chameleon, {.add_bos = true, .clean_spaces = false}),
};

// One expression as the lookup compares it (see pre_tokenizer_name_for).
std::string canonical_regex(std::string_view r) {
  std::string out;
  for (size_t pos = 0;;) {
    const size_t hit = r.find(k_contractions_hf, pos);
    out.append(r.substr(pos, hit == std::string_view::npos ? hit : hit - pos));
    if (hit == std::string_view::npos) break;
    out.append(k_contractions);
    pos = hit + k_contractions_hf.size();
  }
  constexpr std::string_view k_tail = "\\s+(?!\\S)|\\s+";
  constexpr std::string_view k_redundant = "|\\s+";
  if (out.ends_with(k_tail)) out.resize(out.size() - k_redundant.size());
  return out;
}

// The expression as PCRE2 compiles it: \s and \S become \p{White_Space} and \P{White_Space}.
// PCRE2's \s (with UCP) also matches U+180E MONGOLIAN VOWEL SEPARATOR, which Unicode stopped
// counting as white space in 6.3; Hugging Face's Oniguruma and Python follow Unicode.
std::string pcre2_pattern(std::string_view r) {
  std::string out;
  out.reserve(r.size() + 32);
  for (size_t i = 0; i < r.size(); ++i) {
    if (r[i] != '\\' || i + 1 == r.size()) {
      out += r[i];
      continue;
    }
    const char next = r[++i];  // an escape is two characters, whatever the second is
    if (next == 's') {
      out += "\\p{White_Space}";
    } else if (next == 'S') {
      out += "\\P{White_Space}";
    } else {
      out += '\\';
      out += next;
    }
  }
  return out;
}

// ---- text preparation -----------------------------------------------------------------------

constexpr uint32_t k_replacement = 0xFFFD;

// llama.cpp's unicode_cpt_from_utf8: the lead byte's high bits decide the length, only the
// continuation bytes' top bits are checked (overlong forms and surrogates decode). An ill-formed
// sequence yields U+FFFD and consumes one byte, as unicode_cpts_from_utf8 does.
uint32_t decode_lenient(std::string_view s, size_t& i) {
  const auto at = [&](size_t k) { return uint8_t(s[k]); };
  const auto cont = [&](size_t k) { return k < s.size() && (at(k) & 0xC0) == 0x80; };
  const uint8_t c = at(i);
  if (!(c & 0x80)) {
    i += 1;
    return c;
  }
  if ((c & 0x40) && !(c & 0x20) && cont(i + 1)) {
    const uint32_t cp = uint32_t(c & 0x1F) << 6 | (at(i + 1) & 0x3F);
    i += 2;
    return cp;
  }
  if ((c & 0x40) && (c & 0x20) && !(c & 0x10) && cont(i + 1) && cont(i + 2)) {
    const uint32_t cp =
        uint32_t(c & 0x0F) << 12 | uint32_t(at(i + 1) & 0x3F) << 6 | (at(i + 2) & 0x3F);
    i += 3;
    return cp;
  }
  if ((c & 0x40) && (c & 0x20) && (c & 0x10) && !(c & 0x08) && cont(i + 1) && cont(i + 2) &&
      cont(i + 3)) {
    const uint32_t cp = uint32_t(c & 0x07) << 18 | uint32_t(at(i + 1) & 0x3F) << 12 |
                        uint32_t(at(i + 2) & 0x3F) << 6 | (at(i + 3) & 0x3F);
    i += 4;
    // llama.cpp cannot re-encode these (unicode_cpt_to_utf8 throws); they count as ill-formed.
    return cp <= 0x10FFFF ? cp : k_replacement;
  }
  i += 1;
  return k_replacement;
}

// Well-formed UTF-8 as PCRE2 requires it: shortest forms, no surrogates, at most U+10FFFF.
bool is_strict_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = uint8_t(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n = 0;
    uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      n = 2, cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 3, cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const uint8_t cc = uint8_t(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = cp << 6 | (cc & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n;
  }
  return true;
}

// The text as llama.cpp rebuilds it from code points (`rebuilt`), and the same with surrogates
// as U+FFFD for PCRE2 (`subject`); both encode every code point in the same number of bytes, so
// an offset in one is the same character in the other.
void prepare(std::string_view text, std::string& rebuilt, std::string& subject) {
  rebuilt.clear();
  subject.clear();
  rebuilt.reserve(text.size() + 8);
  subject.reserve(text.size() + 8);
  for (size_t i = 0; i < text.size();) {
    const uint32_t cp = decode_lenient(text, i);
    utf8_append(rebuilt, cp);
    utf8_append(subject, cp >= 0xD800 && cp <= 0xDFFF ? k_replacement : cp);
  }
}

size_t utf8_char_len(std::string_view s, size_t i) {
  const uint8_t c = uint8_t(s[i]);
  const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  return std::min(n, s.size() - i);
}

}  // namespace

struct pre_tokenizer::regex {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~regex() { pcre2_code_free(code); }
};

const pre_tokenizer_spec* pre_tokenizer_find(std::string_view name) {
  if (name.empty()) name = "default";
  for (const pre_tokenizer_spec& s : k_specs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::vector<std::string_view> pre_tokenizer_names() {
  std::vector<std::string_view> names;
  for (const pre_tokenizer_spec& s : k_specs) names.push_back(s.name);
  return names;
}

std::optional<std::string_view> pre_tokenizer_name_for(std::span<const std::string> regexes) {
  std::vector<std::string> wanted;
  for (const std::string& r : regexes) wanted.push_back(canonical_regex(r));
  for (const pre_tokenizer_spec& s : k_specs) {
    if (s.regexes.size() != wanted.size()) continue;
    bool same = true;
    for (size_t k = 0; k < wanted.size() && same; ++k) {
      same = canonical_regex(s.regexes[k]) == wanted[k];
    }
    if (same) return s.name;
  }
  return std::nullopt;
}

result<pre_tokenizer> pre_tokenizer::create(std::span<const std::string_view> regexes) {
  pre_tokenizer p;
  for (const std::string_view r : regexes) {
    int code = 0;
    PCRE2_SIZE offset = 0;
    auto re = std::make_shared<regex>();
    const std::string pattern = pcre2_pattern(r);
    re->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &code, &offset, nullptr);
    if (!re->code) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(code, message, sizeof(message));
      return error{"pre-tokenizer regex '" + pattern + "' at offset " + std::to_string(offset) +
                   ": " + reinterpret_cast<const char*>(message)};
    }
    // JIT is an optimisation only: where it is unavailable the interpreter runs.
    re->jit = pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE) == 0;
    p.regexes_.push_back(std::move(re));
  }
  return p;
}

void pre_tokenizer::split(std::string_view text, std::vector<std::string>& words) const {
  words.clear();
  if (text.empty()) return;

  std::string rebuilt_storage;
  std::string subject_storage;
  std::string_view rebuilt = text;
  std::string_view subject = text;
  if (!is_strict_utf8(text)) {
    prepare(text, rebuilt_storage, subject_storage);
    rebuilt = rebuilt_storage;
    subject = subject_storage;
  }

  // Pieces as (offset, length) in bytes; every cut falls on a character boundary.
  std::vector<std::pair<size_t, size_t>> pieces = {{0, subject.size()}};
  std::vector<std::pair<size_t, size_t>> next;
  for (const auto& re : regexes_) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(re->code, nullptr);
    if (!md) return;  // out of memory: no words rather than a crash
    next.clear();
    for (const auto& [offset, length] : pieces) {
      const auto* piece = reinterpret_cast<PCRE2_SPTR>(subject.data() + offset);
      size_t emitted = 0;  // end of the last piece pushed, relative to `offset`
      size_t start = 0;
      while (start < length) {
        int rc = pcre2_match(re->code, piece, length, start, PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH && re->jit) {
          // The JIT stack ran out on a long piece: the interpreter keeps its frames on the heap.
          rc = pcre2_match(re->code, piece, length, start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                           nullptr);
        }
        if (rc < 0) break;  // no further match (or a match limit): the rest stays one piece
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t match_start = ov[0];
        const size_t match_end = ov[1];
        if (match_end <= match_start) {
          // An empty match cuts nothing (llama.cpp emits an empty word, which yields no token).
          start = match_start + utf8_char_len(subject.substr(offset, length), match_start);
          continue;
        }
        if (match_start > emitted) next.emplace_back(offset + emitted, match_start - emitted);
        next.emplace_back(offset + match_start, match_end - match_start);
        emitted = start = match_end;
      }
      if (emitted < length) next.emplace_back(offset + emitted, length - emitted);
    }
    pcre2_match_data_free(md);
    pieces.swap(next);
  }

  words.reserve(pieces.size());
  for (const auto& [offset, length] : pieces) words.emplace_back(rebuilt.substr(offset, length));
}

}  // namespace hearth
