// Tool-call formats derived from the 31 shared chat templates (engine/chat/tool-calls.h): for each
// template, the derivation's outcome, and the calls of the conversations c05 (one call) and c10
// (two calls) parsed back out of what the template itself rendered for them: the same names, and
// arguments equal as JSON. Prints the table the closing note of issue 56 carries.
//
// The text parsed is transformers' render (renders/T/C.txt) from the last user message on (the
// system prompt's examples of the format are instructions, not calls). Where transformers fails on
// the conversation as it stands (renders/T/C.error: Mistral's templates refuse "call_1" as an id,
// several templates fail on c10's "content": null), the conversation is rendered by our Jinja
// engine as a server sends it instead: ids of 9 letters and digits, null content as "".
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/chat/jinja.h"
#include "engine/chat/tool-calls.h"
#include "engine/grammar/grammar-matcher.h"
#include "engine/grammar/grammar.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

fs::path templates_root() {
  return fs::path(testing::testdata_root()) / "chat-templates";
}

// The conversation as a server hands it to the template: content null -> "", ids 9 alnum.
ordered_json as_served(ordered_json ctx) {
  int n = 0;
  for (auto& m : ctx["messages"]) {
    if (m.contains("content") && m["content"].is_null()) m["content"] = "";
    if (m.contains("tool_calls"))
      for (auto& c : m["tool_calls"]) c["id"] = "Abc12345" + std::to_string(++n % 10);
    if (m.contains("tool_call_id")) {
      const std::string id = m["tool_call_id"];
      m["tool_call_id"] = "Abc12345" + id.substr(id.size() - 1);
    }
  }
  return ctx;
}

struct expected_call {
  std::string name;
  ordered_json arguments;
};

std::vector<expected_call> calls_of(const ordered_json& ctx) {
  std::vector<expected_call> out;
  for (const auto& m : ctx["messages"])
    if (m.contains("tool_calls"))
      for (const auto& c : m["tool_calls"])
        out.push_back({c["function"]["name"], c["function"]["arguments"]});
  return out;
}

std::string tool_call_text_trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, s.find_last_not_of(" \t\r\n") + 1 - b);
}

// The README's fixed clock: strftime_now sees 2026-12-01T09:30:00 local time.
jinja::render_options fixed_clock() {
  jinja::render_options o;
  o.now = *jinja::parse_local_time("2026-12-01T09:30:00");
  return o;
}

// Where the model's own output starts in `text`: after what the template writes for the messages
// before the first assistant message with calls and a generation prompt (as the model saw it);
// where that is no prefix of the text, after the last user message.
size_t output_start(const jinja::chat_template_program& program, const ordered_json& ctx,
                    const std::string& text) {
  ordered_json head = ctx;
  head["messages"] = ordered_json::array();
  std::string last_user;
  for (const auto& m : ctx["messages"]) {
    if (m.contains("tool_calls")) break;
    if (m["role"] == "user") last_user = m["content"];
    head["messages"].push_back(m);
  }
  head["add_generation_prompt"] = true;
  auto r = jinja::render(program, head, fixed_clock());
  if (r && text.starts_with(*r)) return r->size();
  const size_t u = text.rfind(last_user);
  return u == std::string::npos ? 0 : u;
}

struct outcome {
  std::string shape;   // or "error: ..."
  std::string parses;  // "yes" / "no (...)" / "n/a (...)"
};

// "yes" when the calls parsed from `text` (after the last user message) are `want`.
std::string check_parse(const jinja::chat_template_program& program, const tool_call_format& f,
                        const std::string& text, const ordered_json& ctx, std::string* detail) {
  const std::string tail = text.substr(output_start(program, ctx, text));
  auto want = calls_of(ctx);
  // A template that writes one call per message (gpt-oss, GigaChat) writes the first.
  if (!f.parallel_calls && want.size() > 1) want.resize(1);
  auto got = tool_calls_parse(f, tail, ctx["tools"].dump());
  // Streamed a byte at a time, the result must be the same.
  tool_call_parser p(f, ctx["tools"].dump());
  std::string content;
  std::vector<parsed_tool_call> streamed;
  for (char c : tail) {
    auto piece = p.feed(std::string_view(&c, 1));
    content += piece.content;
    for (auto& x : piece.calls) streamed.push_back(x);
  }
  auto end = p.finish();
  content += end.content;
  for (auto& x : end.calls) streamed.push_back(x);
  if (content != got.content || streamed.size() != got.calls.size()) {
    *detail = "streamed differs";
    return "no";
  }
  if (got.calls.size() != want.size()) {
    *detail = std::to_string(got.calls.size()) + " calls, content: " + got.content.substr(0, 300);
    return "no";
  }
  for (size_t i = 0; i < want.size(); ++i) {
    auto args = ordered_json::parse(got.calls[i].arguments, nullptr, false);
    if (got.calls[i].name != want[i].name || args != want[i].arguments) {
      *detail = got.calls[i].name + " " + got.calls[i].arguments;
      return "no";
    }
  }
  return "yes";
}

TEST(ToolCallTemplates, EveryTemplateDerivesAndParsesItsOwnCalls) {
  const fs::path root = templates_root();
  std::vector<std::string> templates;
  for (const auto& e : fs::directory_iterator(root / "templates"))
    templates.push_back(e.path().stem().string());
  std::sort(templates.begin(), templates.end());
  ASSERT_EQ(templates.size(), 31u) << root;

  // What each template must give: a shape, or no format at all (its template writes no calls, or
  // cannot render one under transformers' sandbox).
  const std::map<std::string, std::string> want_shape = {
      {"Apertus-8B-Instruct", "json_array"},
      {"Bielik-11B-v3.0-Instruct", "json_object"},
      {"ByteDance-Seed-OSS", "name_params"},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", "json_array"},
      {"GLM-4.6", "name_params"},
      {"GigaChat3-10B-A1.8B", "json_object"},
      {"HuggingFaceTB-SmolLM3-3B", "none"},
      {"Kimi-K2-Instruct", "none"},
      {"LFM2-8B-A1B", "none"},
      {"MiMo-VL", "json_object"},
      {"MiniMax-M2", "name_params"},
      {"Mistral-Small-3.2-24B-Instruct-2506", "name_args"},
      {"NVIDIA-Nemotron-Nano-v2", "json_array"},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "json_object"},
      {"Qwen-Qwen2.5-7B-Instruct", "json_object"},
      {"Qwen-Qwen3-0.6B", "json_object"},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "name_args"},
      {"deepseek-ai-DeepSeek-V3.1", "name_args"},
      {"google-gemma-2-2b-it", "none"},
      {"google-gemma-4-31B-it", "name_params"},
      {"ibm-granite-granite-3.3-2B-Instruct", "none"},
      {"llama-cpp-rwkv-world", "none"},
      {"meetkai-functionary-medium-v3.1", "name_args"},
      {"meta-llama-Llama-3.1-8B-Instruct", "json_object"},
      {"meta-llama-Llama-3.2-3B-Instruct", "json_object"},
      {"microsoft-Phi-3.5-mini-instruct", "none"},
      {"mistralai-Mistral-Nemo-Instruct-2407", "json_array"},
      {"openai-gpt-oss-120b", "name_args"},
      {"openbmb-MiniCPM5-1B", "name_params"},
      {"tencent-Hy3", "name_params"},
      {"unsloth-Apriel-1.5", "json_array"},
  };

  const ordered_json base = {{"bos_token", "<|bos|>"}, {"eos_token", "<|eos|>"}};
  std::printf("%-46s %-12s %-5s %-5s %s\n", "template", "format", "c05", "c10", "detail");
  int derived = 0, parsed = 0, checked = 0;
  for (const auto& t : templates) {
    SCOPED_TRACE(t);
    auto program =
        jinja::parse(testing::read_file_text((root / "templates" / (t + ".jinja")).string()));
    ASSERT_TRUE(program) << program.message();
    auto f = tool_call_format_derive(**program, base);
    const std::string shape = f ? tool_call_shape_name(f->shape) : "none";
    EXPECT_EQ(shape, want_shape.at(t)) << (f ? "" : f.message());
    std::string cols[2];
    std::string detail = f ? "" : f.message();
    const char* convs[2] = {"c05_tool_round", "c10_parallel_calls"};
    for (int k = 0; k < 2; ++k) {
      const auto ctx = ordered_json::parse(testing::read_file_text(
          (root / "contexts" / (std::string(convs[k]) + ".json")).string()));
      const fs::path txt = root / "renders" / t / (std::string(convs[k]) + ".txt");
      std::string text;
      ordered_json used = ctx;
      if (fs::exists(txt)) {
        text = testing::read_file_text(txt.string());
      } else {
        used = as_served(ctx);
        auto r = jinja::render(**program, used, fixed_clock());
        if (!r) {
          cols[k] = "-";
          if (detail.empty()) detail = std::string(convs[k]) + " does not render: " + r.message();
          continue;
        }
        text = *r;
      }
      if (!f) {
        // No format: then the template must not have written the calls as calls either.
        cols[k] = text.find("\"Paris, France\"") == std::string::npos &&
                          text.find(">Paris, France<") == std::string::npos
                      ? "-"
                      : "LOST";
        EXPECT_NE(cols[k], "LOST") << "the template writes calls the derivation missed";
        continue;
      }
      std::string why;
      cols[k] = check_parse(**program, *f, text, used, &why);
      ++checked;
      if (cols[k] == "yes") ++parsed;
      EXPECT_EQ(cols[k], "yes") << convs[k] << ": " << why;
      if (!why.empty()) detail += std::string(convs[k]) + ": " + why + " ";
    }
    if (f) ++derived;
    if (f && std::getenv("HEARTH_TOOL_CALL_FORMATS")) {
      const ordered_json lits = {
          {"section_open", f->section_open},   {"call_open", f->call_open},
          {"call_close", f->call_close},       {"call_sep", f->call_sep},
          {"section_close", f->section_close}, {"trigger", f->trigger},
          {"name_key", f->name_key},           {"args_key", f->args_key},
          {"name_to_args", f->name_to_args},   {"args_after_id", f->args_after_id},
          {"param_first", f->param_first},     {"kv", f->param_key_to_value},
          {"param_next", f->param_next},       {"name_no_params", f->name_no_params}};
      std::printf("  %s\n", lits.dump().c_str());
    }
    std::printf("%-46s %-12s %-5s %-5s %s\n", t.c_str(), shape.c_str(), cols[0].c_str(),
                cols[1].c_str(), detail.substr(0, 120).c_str());
  }
  std::printf("%d of 31 templates derive a format; %d of %d renders of their calls parse back\n",
              derived, parsed, checked);
}

// Two tools: get_weather as c05 offers it, and one with an integer, a boolean and strings.
const char* k_tools = R"([
 {"type": "function", "function": {"name": "get_weather", "description": "Weather",
  "parameters": {"type": "object", "properties": {
   "location": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
   "required": ["location", "unit"], "additionalProperties": false}}},
 {"type": "function", "function": {"name": "set_alarm", "description": "Alarm",
  "parameters": {"type": "object", "properties": {
   "hour": {"type": "integer", "minimum": 0, "maximum": 23}, "loud": {"type": "boolean"},
   "label": {"type": "string", "maxLength": 12}},
   "required": ["hour", "loud", "label"], "additionalProperties": false}}}
])";

// The few JSON Schema keywords k_tools uses: "" when `v` validates, else why not.
std::string validate(const ordered_json& v, const ordered_json& s) {
  const std::string type = s.value("type", "");
  if (type == "object") {
    if (!v.is_object()) return "not an object";
    for (const auto& r : s["required"])
      if (!v.contains(r.get<std::string>())) return "missing " + r.get<std::string>();
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!s["properties"].contains(it.key())) return "extra property " + it.key();
      if (auto w = validate(it.value(), s["properties"][it.key()]); !w.empty())
        return it.key() + ": " + w;
    }
    return "";
  }
  if (type == "string") {
    if (!v.is_string()) return "not a string: " + v.dump();
    if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end())
      return "not in enum: " + v.dump();
    // maxLength counts characters: UTF-8 bytes that do not continue one.
    const std::string text = v.get<std::string>();
    const auto chars =
        std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; });
    if (s.contains("maxLength") && size_t(chars) > s["maxLength"].get<size_t>()) return "too long";
    return "";
  }
  if (type == "integer") {
    if (!v.is_number_integer()) return "not an integer: " + v.dump();
    if (v.get<int64_t>() < s["minimum"].get<int64_t>() ||
        v.get<int64_t>() > s["maximum"].get<int64_t>())
      return "out of range";
    return "";
  }
  if (type == "boolean") return v.is_boolean() ? "" : "not a boolean";
  return "unknown type";
}

// A random text the grammar accepts: a walk through its matcher over a byte vocabulary (mostly
// printable ASCII, so the texts look like a model's), ended where the grammar may end.
std::string random_text(const std::shared_ptr<const grammar>& g, std::mt19937& rng) {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, char(b)));
  pieces.push_back("");  // 256: the end of generation
  static const auto vocab = grammar_vocab::make(pieces, {256});
  grammar_matcher m(g, vocab);
  std::string out;
  while (out.size() < 20000) {
    std::vector<int32_t> ascii, other;
    for (int32_t t = 0; t < 256; ++t)
      if (m.is_allowed(t)) (t >= 0x20 && t < 0x7f ? ascii : other).push_back(t);
    const bool can_end = m.is_allowed(256);
    if (can_end && ((ascii.empty() && other.empty()) || rng() % 3 == 0)) return out;
    if (ascii.empty() && other.empty()) return out + "<dead>";
    const auto& pick = !ascii.empty() && (other.empty() || rng() % 10 != 0) ? ascii : other;
    const int32_t t = pick[rng() % pick.size()];
    EXPECT_TRUE(m.accept(t));
    out += char(t);
  }
  return out;
}

TEST(ToolCallTemplates, GrammarOutputParsesBackAndValidates) {
  const fs::path root = templates_root();
  const auto tools = ordered_json::parse(k_tools);
  std::map<std::string, ordered_json> schemas;
  for (const auto& t : tools) schemas[t["function"]["name"]] = t["function"]["parameters"];
  const ordered_json base = {{"bos_token", "<|bos|>"}, {"eos_token", "<|eos|>"}};
  std::mt19937 rng(56);
  int texts = 0;
  for (const auto& e : fs::directory_iterator(root / "templates")) {
    const std::string t = e.path().stem().string();
    SCOPED_TRACE(t);
    auto program = jinja::parse(testing::read_file_text(e.path().string()));
    ASSERT_TRUE(program);
    auto f = tool_call_format_derive(**program, base);
    if (!f) continue;
    for (const char* choice : {"required", "set_alarm"}) {
      for (bool parallel : {false, true}) {
        auto gbnf = tool_call_gbnf(*f, k_tools, choice, parallel);
        ASSERT_TRUE(gbnf) << gbnf.message();
        auto g = grammar_from_gbnf(*gbnf);
        ASSERT_TRUE(g) << g.message() << "\n" << *gbnf;
        for (int k = 0; k < 6; ++k) {
          const std::string text = random_text(*g, rng);
          ++texts;
          auto parsed = tool_calls_parse(*f, text, k_tools);
          ASSERT_FALSE(parsed.calls.empty()) << text << "\n" << *gbnf;
          EXPECT_TRUE(parallel || parsed.calls.size() == 1) << text;
          EXPECT_EQ(tool_call_text_trim(parsed.content), "") << text;
          if (!tool_call_text_trim(parsed.content).empty() && std::getenv("HEARTH_DUMP")) {
            FILE* fp = std::fopen(std::getenv("HEARTH_DUMP"), "wb");
            std::fwrite(text.data(), 1, text.size(), fp);
            std::fclose(fp);
          }
          for (const auto& c : parsed.calls) {
            if (std::string(choice) != "required") {
              EXPECT_EQ(c.name, choice);
            }
            ASSERT_TRUE(schemas.contains(c.name)) << c.name << " in " << text;
            auto args = ordered_json::parse(c.arguments, nullptr, false);
            EXPECT_EQ(validate(args, schemas[c.name]), "") << c.arguments << " from " << text;
          }
        }
      }
    }
  }
  std::printf("%d grammar texts parsed back and validated\n", texts);
}

}  // namespace
}  // namespace hearth
