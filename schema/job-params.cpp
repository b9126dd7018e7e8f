#include "schema/job-params.h"

#include <algorithm>
#include <cstdio>
#include <string_view>

#include "schema/json-shape.h"

namespace hearth::wire {

generation_params generation_params_of(const job_params& p) {
  generation_params g;
  g.max_tokens = p.max_tokens;
  g.stop = p.stop;
  g.sampling.temperature = p.temperature;
  g.sampling.top_k = p.top_k;
  g.sampling.top_p = p.top_p;
  g.sampling.min_p = p.min_p;
  g.sampling.repeat_penalty = p.repeat_penalty;
  g.sampling.repeat_last_n = p.repeat_last_n;
  g.sampling.presence_penalty = p.presence_penalty;
  g.sampling.frequency_penalty = p.frequency_penalty;
  g.sampling.seed = p.seed;
  g.sampling.logit_bias.reserve(p.api.logit_bias.size());
  for (const token_bias& b : p.api.logit_bias) g.sampling.logit_bias.push_back({b.token, b.bias});
  return g;
}

namespace {

constexpr auto range = param_check_code::out_of_range;

// A value of the request quoted in a message: at most 64 bytes, anything but printable ASCII as
// \xNN, so that the message is short, valid UTF-8 and one line whatever the client sent.
std::string quoted(std::string_view v) {
  std::string q = "'";
  for (unsigned char c : v.substr(0, 64)) {
    if (c >= 0x20 && c < 0x7f) {
      q += char(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      q += hex;
    }
  }
  return q + (v.size() > 64 ? "...'" : "'");
}

param_check refused(param_check_code code, const char* param, std::string message) {
  return {code, param, std::move(message)};
}

// An api_params text field: at most api_max_text_bytes, and (unless `kind` is null, which
// means "not JSON") well-formed JSON of that kind at the top.
param_check text_check(const char* param, std::string_view text, json_kind kind,
                       json_shape* shape_out = nullptr) {
  if (text.size() > api_max_text_bytes) {
    return param_refused(range, param, "at most " + std::to_string(api_max_text_bytes) + " bytes",
                         text.size(), std::string(param) + "'s length");
  }
  if (text.empty() || kind == json_kind::null) return {};
  auto shape = json_shape_of(text);
  if (!shape) {
    return refused(range, param, std::string(param) + " must be JSON, got " + shape.message());
  }
  if (shape->kind != kind) {
    return refused(range, param,
                   std::string(param) + " must be " + json_kind_name(kind) + ", got " +
                       json_kind_name(shape->kind));
  }
  if (shape_out) *shape_out = *shape;
  return {};
}

bool tool_name_ok(std::string_view name) {
  return !name.empty() && name.size() <= api_max_tool_name_bytes &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-';
         });
}

param_check tools_check(const api_params& api) {
  json_shape tools;
  if (auto e = text_check("tools", api.tools, json_kind::array, &tools); !e.ok()) return e;
  if (!tools.members_are_objects) {
    return refused(range, "tools", "tools must be an array of objects, got an element that is not");
  }
  if (tools.members > api_max_tools) {
    return param_refused(param_check_code::too_many, "tools",
                         "at most " + std::to_string(api_max_tools), tools.members,
                         "the number of tools");
  }
  const std::string_view choice = api.tool_choice;
  constexpr std::string_view function_prefix = "function:";
  const bool forces_call = choice == "required" || choice.starts_with(function_prefix);
  if (!forces_call && !choice.empty() && choice != "auto" && choice != "none") {
    return refused(
        range, "tool_choice",
        "tool_choice must be auto, none, required or function:NAME, got " + quoted(choice));
  }
  if (choice.starts_with(function_prefix) && !tool_name_ok(choice.substr(function_prefix.size()))) {
    return refused(param_check_code::not_a_name, "tool_choice",
                   "tool_choice's function name must be 1 to 64 of a-z, A-Z, 0-9, '_', '-', got " +
                       quoted(choice.substr(function_prefix.size())));
  }
  if (forces_call && tools.members == 0) {
    return refused(range, "tool_choice",
                   "tool_choice must be auto or none without tools, got " + quoted(choice));
  }
  return {};
}

param_check logit_bias_check(const std::vector<token_bias>& bias) {
  if (bias.size() > api_max_logit_bias) {
    return param_refused(param_check_code::too_many, "logit_bias",
                         "at most " + std::to_string(api_max_logit_bias), bias.size(),
                         "the number of logit_bias entries");
  }
  std::vector<int32_t> tokens;
  tokens.reserve(bias.size());
  for (const token_bias& b : bias) {
    if (b.token < 0)
      return param_refused(range, "logit_bias", ">= 0", b.token, "a logit_bias token");
    if (!(b.bias >= -api_max_bias && b.bias <= api_max_bias)) {
      return param_refused(range, "logit_bias", "in [-100, 100]", b.bias,
                           "the logit_bias of token " + std::to_string(b.token));
    }
    tokens.push_back(b.token);
  }
  std::sort(tokens.begin(), tokens.end());
  if (auto d = std::adjacent_find(tokens.begin(), tokens.end()); d != tokens.end()) {
    return refused(
        range, "logit_bias",
        "logit_bias must name each token once, got token " + std::to_string(*d) + " twice");
  }
  return {};
}

}  // namespace

param_check api_params_check(const api_params& api) {
  if (api.n < 1 || api.n > api_max_n) {
    return param_refused(range, "n", "in [1, " + std::to_string(api_max_n) + "]", api.n);
  }
  if (api.top_logprobs < 0 || api.top_logprobs > api_max_top_logprobs) {
    return param_refused(range, "top_logprobs",
                         "in [0, " + std::to_string(api_max_top_logprobs) + "]", api.top_logprobs);
  }
  if (api.top_logprobs > 0 && !api.logprobs) {
    return param_refused(range, "top_logprobs", "0 when logprobs is off", api.top_logprobs);
  }
  if (auto e = logit_bias_check(api.logit_bias); !e.ok()) return e;
  if (auto e = tools_check(api); !e.ok()) return e;
  if (auto e = text_check("json_schema", api.json_schema, json_kind::object); !e.ok()) return e;
  if (auto e = text_check("grammar", api.grammar, json_kind::null); !e.ok()) return e;
  if (auto e = text_check("template_kwargs", api.template_kwargs, json_kind::object); !e.ok())
    return e;
  if (!api.json_schema.empty() && !api.grammar.empty()) {
    return refused(range, "grammar",
                   "grammar must be empty when json_schema is given (one constraint at a time)");
  }
  if (!api.events && (!api.tools.empty() || api.logprobs || api.n > 1)) {
    return refused(range, "events",
                   "events must be on when tools, logprobs or n > 1 are asked for (their "
                   "results are output events)");
  }
  return {};
}

uint64_t job_params_max_stream_tokens(const job_params& p) {
  return uint64_t(std::max(p.max_tokens, 0)) * uint64_t(std::max(p.api.n, 1));
}

param_check job_params_check(const job_params& p) {
  // The name itself is checked where the templates are known (the node, the CLI): here only
  // that it could be one.
  if (p.chat_template.size() > 32 ||
      p.chat_template.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_.") !=
          std::string::npos) {
    return {param_check_code::not_a_name, "chat_template",
            "chat_template must be a template's name (at most 32 of a-z, 0-9, '-', '_', '.')"};
  }
  if (auto e = generation_params_check(generation_params_of(p)); !e.ok()) return e;
  return api_params_check(p.api);
}

}  // namespace hearth::wire
