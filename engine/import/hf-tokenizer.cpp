#include "engine/import/hf-tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "common/replace-all.h"
#include "engine/import/tokenizer-metadata.h"
#include "engine/tokenizer/pre-tokenizer.h"

namespace hearth {
namespace {

using json = nlohmann::json;

constexpr std::string_view k_tokenizer = "tokenizer.json";
constexpr std::string_view k_config = "tokenizer_config.json";

// The GPT-2 expression Hugging Face's ByteLevel pre-tokenizer applies when use_regex is true.
constexpr std::string_view k_byte_level_regex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// Ids beyond this are not a vocabulary but a malformed file (the largest real vocabularies are
// about 2^18); ids may leave at most this many gaps, each of which becomes a [PAD<id>] token.
constexpr int64_t k_max_id = int64_t(1) << 24;
constexpr int64_t k_max_gaps = int64_t(1) << 16;

error fail(std::string_view file, const std::string& what) {
  return error{std::string(file) + ": " + what};
}

std::string excerpt(std::string_view s) {
  constexpr size_t k_max = 80;
  std::string q = "'";
  q.append(s.substr(0, k_max));
  if (s.size() > k_max) q += "...";
  return q + "'";
}

result<json> parse_json(const std::string& text, std::string_view file) {
  // The parser reports malformed input (with its position) only as an exception; it is caught
  // here, at the boundary, and nowhere else is one expected.
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    return fail(file, std::string("not valid JSON: ") + e.what());
  }
}

const json* member(const json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// An optional string member: absent or null gives nullopt, another type an error.
result<std::optional<std::string>> optional_string(const json& object, std::string_view key,
                                                   std::string_view file, const std::string& path) {
  const json* v = member(object, key);
  if (!v || v->is_null()) return std::optional<std::string>{};
  if (!v->is_string()) return fail(file, path + " is not a string");
  return std::optional<std::string>{v->get_ref<const std::string&>()};
}

result<std::optional<bool>> optional_bool(const json& object, std::string_view key,
                                          std::string_view file, const std::string& path) {
  const json* v = member(object, key);
  if (!v || v->is_null()) return std::optional<bool>{};
  if (!v->is_boolean()) return fail(file, path + " is not true or false");
  return std::optional<bool>{v->get<bool>()};
}

result<int64_t> token_id(const json& v, std::string_view file, const std::string& path) {
  if (!v.is_number_integer()) return fail(file, path + " is not an integer token id");
  const bool negative = !v.is_number_unsigned() && v.get<int64_t>() < 0;
  if (negative || v.get<uint64_t>() >= uint64_t(k_max_id)) {
    return fail(file, path + " = " + v.dump() + " is not a token id in [0, 2^24)");
  }
  return int64_t(v.get<uint64_t>());
}

// convert_hf_to_gguf.py's does_token_look_special: added tokens that ought to be control tokens
// although the tokenizer does not mark them special.
bool looks_special(std::string_view t) {
  if (t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]") return true;
  if (t.starts_with("<|") && t.ends_with("|>")) return true;
  if (t.starts_with("<\xEF\xBD\x9C") && t.ends_with("\xEF\xBD\x9C>")) return true;  // <｜ ... ｜>
  return t.starts_with("<unused") && t.ends_with(">");
}

struct token_entry {
  std::string text;
  gguf_token_type type = gguf_token_type::unused;
  bool present = false;
  std::string source;  // the field that defined it, for error messages
};

// The regexes of the pre-tokenizer, in order; an error names what is not supported.
result<std::vector<std::string>> pre_tokenizer_regexes(const json& root) {
  const json* pre = member(root, "pre_tokenizer");
  if (!pre || pre->is_null()) {
    return fail(k_tokenizer, "pre_tokenizer is missing (a byte-level BPE needs ByteLevel)");
  }
  std::vector<const json*> steps;
  std::vector<std::string> paths;
  auto type_of = [](const json& step) -> std::string {
    const json* t = member(step, "type");
    return t && t->is_string() ? t->get_ref<const std::string&>() : std::string();
  };
  if (!pre->is_object()) return fail(k_tokenizer, "pre_tokenizer is not an object");
  if (type_of(*pre) == "Sequence") {
    const json* list = member(*pre, "pretokenizers");
    if (!list || !list->is_array()) {
      return fail(k_tokenizer, "pre_tokenizer.pretokenizers is not an array");
    }
    for (size_t k = 0; k < list->size(); ++k) {
      steps.push_back(&(*list)[k]);
      paths.push_back("pre_tokenizer.pretokenizers[" + std::to_string(k) + "]");
    }
  } else {
    steps.push_back(pre);
    paths.push_back("pre_tokenizer");
  }

  std::vector<std::string> regexes;
  bool byte_level = false;
  for (size_t k = 0; k < steps.size(); ++k) {
    const json& step = *steps[k];
    const std::string& path = paths[k];
    if (!step.is_object()) return fail(k_tokenizer, path + " is not an object");
    const std::string type = type_of(step);
    if (byte_level) {
      return fail(k_tokenizer, path + " ('" + type + "') follows ByteLevel, which must come last");
    }
    if (type == "Split") {
      const json* pattern = member(step, "pattern");
      const json* regex = pattern ? member(*pattern, "Regex") : nullptr;
      if (!regex || !regex->is_string()) {
        return fail(k_tokenizer, path + ".pattern has no Regex string (a String pattern or " +
                                     "another form is not supported)");
      }
      auto behavior = optional_string(step, "behavior", k_tokenizer, path + ".behavior");
      if (!behavior) return behavior.err();
      if (behavior->value_or("Isolated") != "Isolated") {
        return fail(k_tokenizer,
                    path + ".behavior '" + **behavior + "' is not supported (only Isolated)");
      }
      auto invert = optional_bool(step, "invert", k_tokenizer, path + ".invert");
      if (!invert) return invert.err();
      if (invert->value_or(false)) return fail(k_tokenizer, path + ".invert is not supported");
      regexes.push_back(regex->get_ref<const std::string&>());
    } else if (type == "ByteLevel") {
      auto prefix =
          optional_bool(step, "add_prefix_space", k_tokenizer, path + ".add_prefix_space");
      if (!prefix) return prefix.err();
      if (prefix->value_or(false)) {
        return fail(k_tokenizer, path + ".add_prefix_space is true, which is not supported");
      }
      auto use_regex = optional_bool(step, "use_regex", k_tokenizer, path + ".use_regex");
      if (!use_regex) return use_regex.err();
      if (use_regex->value_or(true)) regexes.emplace_back(k_byte_level_regex);
      byte_level = true;
    } else {
      return fail(k_tokenizer, path + ": pre-tokenizer '" + type +
                                   "' is not supported (only Split and ByteLevel)");
    }
  }
  if (!byte_level) {
    return fail(k_tokenizer, "pre_tokenizer has no ByteLevel step: not a byte-level BPE");
  }
  return regexes;
}

// A tokenizer_config.json *_token field: null, a string, or an AddedToken object.
result<std::optional<std::string>> config_token_text(const json& config, std::string_view key) {
  const std::string path(key);
  const json* v = member(config, key);
  if (!v || v->is_null()) return std::optional<std::string>{};
  if (v->is_string()) return std::optional<std::string>{v->get_ref<const std::string&>()};
  if (v->is_object()) {
    auto content = optional_string(*v, "content", k_config, path + ".content");
    if (!content) return content.err();
    if (*content) return content;
  }
  return fail(k_config, path + " is neither a string nor an object with a content string");
}

// The post-processor says whether a BOS is added when the config does not: TemplateProcessing
// whose "single" template starts with a special token (Llama 3), possibly inside a Sequence.
std::optional<std::string> template_bos(const json& root) {
  const json* post = member(root, "post_processor");
  if (!post || !post->is_object()) return std::nullopt;
  std::vector<const json*> candidates = {post};
  if (const json* list = member(*post, "processors"); list && list->is_array()) {
    for (const json& p : *list) candidates.push_back(&p);
  }
  for (const json* p : candidates) {
    const json* type = member(*p, "type");
    if (!type || !type->is_string() ||
        type->get_ref<const std::string&>() != "TemplateProcessing") {
      continue;
    }
    const json* single = member(*p, "single");
    if (!single || !single->is_array() || single->empty()) continue;
    const json* special = member(single->front(), "SpecialToken");
    const json* id = special ? member(*special, "id") : nullptr;
    if (id && id->is_string()) return id->get_ref<const std::string&>();
  }
  return std::nullopt;
}

result<std::vector<gguf_kv>> metadata(const std::string& tokenizer_json,
                                      const std::string& tokenizer_config_json) {
  auto parsed = parse_json(tokenizer_json, k_tokenizer);
  if (!parsed) return parsed.err();
  const json& root = *parsed;
  if (!root.is_object()) return fail(k_tokenizer, "the top level is not an object");

  // --- model ----------------------------------------------------------------------------------
  const json* model = member(root, "model");
  if (!model || !model->is_object()) return fail(k_tokenizer, "model is missing or not an object");
  auto model_type = optional_string(*model, "type", k_tokenizer, "model.type");
  if (!model_type) return model_type.err();
  if (model_type->value_or("BPE") != "BPE") {
    return fail(k_tokenizer, "model.type '" + **model_type + "' is not supported (only BPE)");
  }
  auto byte_fallback = optional_bool(*model, "byte_fallback", k_tokenizer, "model.byte_fallback");
  if (!byte_fallback) return byte_fallback.err();
  if (byte_fallback->value_or(false)) {
    return fail(k_tokenizer,
                "model.byte_fallback is true: a SentencePiece-style BPE, not a "
                "byte-level one (not supported)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto affix = optional_string(*model, key, k_tokenizer, std::string("model.") + key);
    if (!affix) return affix.err();
    if (!affix->value_or("").empty()) {
      return fail(k_tokenizer,
                  std::string("model.") + key + " " + excerpt(**affix) + " is not supported");
    }
  }

  // --- tokens ---------------------------------------------------------------------------------
  const json* vocab_json = member(*model, "vocab");
  if (!vocab_json || !vocab_json->is_object()) {
    return fail(k_tokenizer, "model.vocab is missing or not an object");
  }
  // Every definition first, in order (an added token replaces the model's token of the same
  // id, as Hugging Face's get_vocab does); the table is sized only once the ids are known to be
  // dense enough, so that a stray huge id cannot make it allocate gigabytes.
  std::vector<std::pair<int64_t, token_entry>> defined;
  defined.reserve(vocab_json->size());
  std::unordered_map<int64_t, size_t> vocab_ids;  // id -> index in `defined`, model.vocab only
  vocab_ids.reserve(vocab_json->size());
  int64_t max_id = -1;
  for (auto it = vocab_json->begin(); it != vocab_json->end(); ++it) {
    const std::string path = "model.vocab[" + excerpt(it.key()) + "]";
    auto id = token_id(it.value(), k_tokenizer, path);
    if (!id) return id.err();
    const auto [seen, inserted] = vocab_ids.emplace(*id, defined.size());
    if (!inserted) {
      return fail(k_tokenizer, path + ": id " + std::to_string(*id) + " is also token " +
                                   excerpt(defined[seen->second].second.text));
    }
    defined.push_back({*id, token_entry{it.key(), gguf_token_type::normal, true, path}});
    max_id = std::max(max_id, *id);
  }
  if (const json* added = member(root, "added_tokens"); added && !added->is_null()) {
    if (!added->is_array()) return fail(k_tokenizer, "added_tokens is not an array");
    for (size_t k = 0; k < added->size(); ++k) {
      const json& a = (*added)[k];
      const std::string path = "added_tokens[" + std::to_string(k) + "]";
      if (!a.is_object()) return fail(k_tokenizer, path + " is not an object");
      const json* id_json = member(a, "id");
      if (!id_json) return fail(k_tokenizer, path + ".id is missing");
      auto id = token_id(*id_json, k_tokenizer, path + ".id");
      if (!id) return id.err();
      auto content = optional_string(a, "content", k_tokenizer, path + ".content");
      if (!content) return content.err();
      if (!*content || (*content)->empty()) {
        return fail(k_tokenizer, path + ".content is missing or empty");
      }
      auto special = optional_bool(a, "special", k_tokenizer, path + ".special");
      if (!special) return special.err();
      std::string text = std::move(**content);
      gguf_token_type type = gguf_token_type::control;
      if (!special->value_or(false) && !looks_special(text)) {
        type = gguf_token_type::user_defined;
        text = replace_all(text, "\xE2\x96\x81", " ");  // as the converter: U+2581 is a space
      }
      defined.push_back({*id, token_entry{std::move(text), type, true, path}});
      max_id = std::max(max_id, *id);
    }
  }
  if (defined.empty()) return fail(k_tokenizer, "model.vocab is empty");
  // `defined` may count an id twice (added over model token), so this bounds the gaps from below.
  if (max_id + 1 - int64_t(defined.size()) > k_max_gaps) {
    return fail(k_tokenizer, "token ids run to " + std::to_string(max_id) + " but only " +
                                 std::to_string(defined.size()) +
                                 " are defined: too many ids without a token");
  }
  std::vector<token_entry> tokens(size_t(max_id) + 1);
  for (auto& [id, entry] : defined) tokens[size_t(id)] = std::move(entry);
  defined.clear();
  for (size_t id = 0; id < tokens.size(); ++id) {
    token_entry& t = tokens[id];
    if (!t.present) t.text = "[PAD" + std::to_string(id) + "]";
  }
  std::unordered_map<std::string_view, size_t> ids;
  ids.reserve(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id) {
    const auto [it, inserted] = ids.emplace(tokens[id].text, id);
    if (!inserted) {
      const token_entry& first = tokens[it->second];
      const std::string where_first = first.present ? first.source : "a missing id";
      const std::string where = tokens[id].present ? tokens[id].source : "a missing id";
      return fail(k_tokenizer, "token " + excerpt(tokens[id].text) + " has two ids, " +
                                   std::to_string(it->second) + " (" + where_first + ") and " +
                                   std::to_string(id) + " (" + where + ")");
    }
  }

  // --- merges ---------------------------------------------------------------------------------
  const json* merges_json = member(*model, "merges");
  if (!merges_json || !merges_json->is_array()) {
    return fail(k_tokenizer, "model.merges is missing or not an array");
  }
  std::vector<std::string> merges;
  merges.reserve(merges_json->size());
  for (size_t k = 0; k < merges_json->size(); ++k) {
    const json& m = (*merges_json)[k];
    const std::string path = "model.merges[" + std::to_string(k) + "]";
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      if (s.size() < 3 || s.find(' ', 1) == std::string::npos || s.back() == ' ') {
        return fail(k_tokenizer, path + " " + excerpt(s) + " is not \"left right\"");
      }
      merges.push_back(s);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      const std::string& left = m[0].get_ref<const std::string&>();
      const std::string& right = m[1].get_ref<const std::string&>();
      // tokenizer.ggml.merges joins the pair with a space, so neither side may hold one.
      if (left.empty() || right.empty() || left.find(' ') != std::string::npos ||
          right.find(' ') != std::string::npos) {
        return fail(k_tokenizer, path + " [" + excerpt(left) + ", " + excerpt(right) +
                                     "] has an empty side or a space");
      }
      merges.push_back(left + " " + right);
    } else {
      return fail(k_tokenizer, path + " is neither \"left right\" nor a pair of strings");
    }
  }

  // --- normalizer and pre-tokenizer -----------------------------------------------------------
  if (const json* norm = member(root, "normalizer"); norm && !norm->is_null()) {
    const json* type = member(*norm, "type");
    const std::string name = type && type->is_string() ? type->get_ref<const std::string&>() : "";
    if (name != "NFC") {
      return fail(k_tokenizer, "normalizer '" + name + "' is not supported (only none or NFC)");
    }
  }
  auto regexes = pre_tokenizer_regexes(root);
  if (!regexes) return regexes.err();
  const std::optional<std::string_view> pre = pre_tokenizer_name_for(*regexes);
  if (!pre) {
    std::string list;
    for (const std::string& r : *regexes) list += (list.empty() ? "" : ", ") + excerpt(r);
    return fail(k_tokenizer, "pre_tokenizer: no known pre-tokenizer splits with [" + list + "]");
  }
  const pre_tokenizer_spec* spec = pre_tokenizer_find(*pre);
  auto ignore_merges = optional_bool(*model, "ignore_merges", k_tokenizer, "model.ignore_merges");
  if (!ignore_merges) return ignore_merges.err();
  if (spec && ignore_merges->value_or(false) != spec->ignore_merges) {
    return fail(k_tokenizer, "model.ignore_merges is " +
                                 std::string(ignore_merges->value_or(false) ? "true" : "false") +
                                 " but pre-tokenizer '" + std::string(*pre) + "' implies " +
                                 (spec->ignore_merges ? "true" : "false"));
  }

  // --- special tokens and flags from tokenizer_config.json -----------------------------------
  int32_t bos = -1;
  int32_t eos = -1;
  int32_t unk = -1;
  int32_t pad = -1;
  std::optional<bool> add_bos;
  std::optional<bool> add_eos;
  std::optional<std::string> chat_template;
  auto lookup = [&](const std::string& text, std::string_view file,
                    const std::string& path) -> result<int32_t> {
    const auto it = ids.find(text);
    if (it == ids.end()) return fail(file, path + " " + excerpt(text) + " is not a token");
    return int32_t(it->second);
  };
  if (!tokenizer_config_json.empty()) {
    auto config_parsed = parse_json(tokenizer_config_json, k_config);
    if (!config_parsed) return config_parsed.err();
    const json& config = *config_parsed;
    if (!config.is_object()) return fail(k_config, "the top level is not an object");
    const std::pair<std::string_view, int32_t*> keys[] = {
        {"bos_token", &bos}, {"eos_token", &eos}, {"unk_token", &unk}, {"pad_token", &pad}};
    for (const auto& [key, slot] : keys) {
      auto text = config_token_text(config, key);
      if (!text) return text.err();
      if (!*text) continue;
      auto id = lookup(**text, k_config, std::string(key));
      // A bos or eos that is no token is an error; an unknown unk or pad is skipped, as the
      // converter (gguf-py's SpecialVocab) does.
      if (!id && (slot == &bos || slot == &eos)) return id.err();
      if (id) *slot = *id;
    }
    auto b = optional_bool(config, "add_bos_token", k_config, "add_bos_token");
    if (!b) return b.err();
    add_bos = *b;
    auto e = optional_bool(config, "add_eos_token", k_config, "add_eos_token");
    if (!e) return e.err();
    add_eos = *e;
    if (const json* t = member(config, "chat_template"); t && !t->is_null()) {
      if (t->is_string()) {
        chat_template = t->get_ref<const std::string&>();
      } else if (t->is_array()) {
        // Several named templates: the one named "default" is the chat template.
        for (const json& entry : *t) {
          const json* name = member(entry, "name");
          const json* text = member(entry, "template");
          if (name && name->is_string() && name->get_ref<const std::string&>() == "default" &&
              text && text->is_string()) {
            chat_template = text->get_ref<const std::string&>();
          }
        }
      } else {
        return fail(k_config, "chat_template is neither a string nor a list of named templates");
      }
    }
  }
  if (unk < 0) {
    auto model_unk = optional_string(*model, "unk_token", k_tokenizer, "model.unk_token");
    if (!model_unk) return model_unk.err();
    if (*model_unk) {
      auto id = lookup(**model_unk, k_tokenizer, "model.unk_token");
      if (!id) return id.err();
      unk = *id;
    }
  }
  if (!add_bos) {
    if (const std::optional<std::string> first = template_bos(root)) {
      auto id = lookup(*first, k_tokenizer, "post_processor's first special token");
      if (!id) return id.err();
      if (bos < 0) bos = *id;
      if (bos == *id) add_bos = true;
    }
  }

  // --- the metadata ---------------------------------------------------------------------------
  ids.clear();  // it views the texts moved below
  std::vector<std::string> texts;
  std::vector<int32_t> types;
  texts.reserve(tokens.size());
  types.reserve(tokens.size());
  for (token_entry& t : tokens) {
    texts.push_back(std::move(t.text));
    types.push_back(int32_t(t.type));
  }

  std::vector<gguf_kv> kv;
  kv.push_back({"tokenizer.ggml.model", gguf_string_value("gpt2")});
  kv.push_back({"tokenizer.ggml.pre", gguf_string_value(std::string(*pre))});
  kv.push_back({"tokenizer.ggml.tokens", gguf_string_array_value(std::move(texts))});
  kv.push_back({"tokenizer.ggml.token_type", gguf_i32_array_value(types)});
  kv.push_back({"tokenizer.ggml.merges", gguf_string_array_value(std::move(merges))});
  // An id nobody names is left out: the reader's default applies (llama.cpp: 11 for gpt2), as
  // for a GGUF converted from the same files.
  const std::pair<const char*, int32_t> special_ids[] = {{"tokenizer.ggml.bos_token_id", bos},
                                                         {"tokenizer.ggml.eos_token_id", eos},
                                                         {"tokenizer.ggml.unknown_token_id", unk},
                                                         {"tokenizer.ggml.padding_token_id", pad}};
  for (const auto& [key, id] : special_ids) {
    if (id >= 0) kv.push_back({key, gguf_u32_value(uint32_t(id))});
  }
  // A BOS the model asks for but does not have would make the vocabulary unusable; say so.
  if (add_bos.value_or(spec && spec->add_bos) && bos < 0) {
    return fail(tokenizer_config_json.empty() ? k_tokenizer : k_config,
                "the tokenizer adds a BOS token but names none (bos_token)");
  }
  if (add_eos.value_or(false) && eos < 0) {
    return fail(k_config, "add_eos_token is true but there is no eos_token");
  }
  if (add_bos) kv.push_back({"tokenizer.ggml.add_bos_token", gguf_bool_value(*add_bos)});
  if (add_eos) kv.push_back({"tokenizer.ggml.add_eos_token", gguf_bool_value(*add_eos)});
  if (chat_template) kv.push_back({"tokenizer.chat_template", gguf_string_value(*chat_template)});
  return kv;
}

}  // namespace

result<std::vector<gguf_kv>> hf_tokenizer_metadata(const std::string& tokenizer_json,
                                                   const std::string& tokenizer_config_json) {
  // Every step checks types before it reads; this only turns a failure nothing foresaw (out of
  // memory on a huge file, a library exception) into an error instead of a crash.
  try {
    return metadata(tokenizer_json, tokenizer_config_json);
  } catch (const std::exception& e) {
    return error{"reading tokenizer.json: " + std::string(e.what())};
  }
}

}  // namespace hearth
