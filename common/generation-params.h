// What one generation asks for (a token limit, stop strings and the sampler's settings) and the
// one check of it that the CLI, the broker and the node all apply, so that a bad job is refused
// with the same message wherever it is refused first. Plain data and the standard library only:
// the broker checks jobs without the engine (schema/job-params.h maps wire::job_params here), and
// the engine's sampler takes sampler_params as they are.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace hearth {

// sampler_params::seed value that asks for a seed from std::random_device.
inline constexpr uint64_t sampler_seed_random = 0xFFFFFFFFFFFFFFFF;

// One entry of logit_bias: added to the token's logit before the penalties (llama.cpp's order);
// -100 in practice bans a token, +100 forces it.
struct logit_bias_entry {
  int32_t token = 0;
  float bias = 0;
};

struct sampler_params {
  float temperature = 0.8f;  // <= 0: greedy (argmax; ties -> lowest id); requests: 0
  int32_t top_k = 40;        // <= 0: off; requests: 0
  float top_p = 0.95f;       // in (0, 1]; 1: off. Keeps at least one token
  float min_p = 0.05f;       // in [0, 1]; 0: off
  // > 0; 1: off. For tokens in the window, logit > 0 ? logit / penalty : logit * penalty, once
  // however often they occur (llama.cpp semantics).
  float repeat_penalty = 1.0f;
  int32_t repeat_last_n = 64;   // window of the three penalties: 0 = off, -1 = whole history
  float frequency_penalty = 0;  // logit -= count_in_window * frequency_penalty
  float presence_penalty = 0;   // logit -= (count_in_window > 0) * presence_penalty
  uint64_t seed = sampler_seed_random;  // sampler_seed_random: random seed; else deterministic
  // Added to the logits first; a token outside the vocabulary is ignored (as llama-server does).
  // Finite biases only (requests: schema/job-params.h checks OpenAI's bounds).
  std::vector<logit_bias_entry> logit_bias;
};

// Bounds of a request: a job may not ask for more than this (the broker's limits since the
// protocol's first version; schema/PROTOCOL.md states them).
inline constexpr int32_t generation_max_tokens_limit = 1 << 20;
inline constexpr size_t generation_max_stop_strings = 16;
inline constexpr size_t generation_max_stop_bytes = 256;

struct generation_params {
  int32_t max_tokens = 128;       // generated tokens at most, in [1, generation_max_tokens_limit]
  std::vector<std::string> stop;  // text stops before the first one found
  sampler_params sampling;
};

// "<name> must be <requirement>, got <value>": every message of both checks has this shape.
template <class T>
std::string param_error(std::string_view name, std::string_view requirement, T value) {
  std::string got;
  if constexpr (std::is_integral_v<T>) {
    got = std::to_string(value);
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", double(value));
    got = buf;
  }
  return std::string(name) + " must be " + std::string(requirement) + ", got " + got;
}

// What a check found wrong with one parameter, as data: the code says what kind of fault it is,
// `param` the field it concerns (the wire's and OpenAI's name: "max_tokens", "stop",
// "chat_template"), `message` the text people read. Only the outermost layer (the gateway's HTTP
// error, the CLI's line, the wire's error message) uses the message; no caller reads it back.
enum class param_check_code : uint8_t {
  ok,            // nothing wrong: param and message are empty
  out_of_range,  // a value outside what the parameter allows
  too_many,      // more entries than allowed (stop strings)
  not_a_name,    // text that cannot be a name (chat_template)
};

struct param_check {
  param_check_code code = param_check_code::ok;
  std::string param;
  std::string message;  // "<name> must be <requirement>, got <value>" (param_error's shape)

  bool ok() const { return code == param_check_code::ok; }
};

// A refused parameter with param_error's message, which names it as `name` (the field's name
// when empty).
template <class T>
param_check param_refused(param_check_code code, std::string_view param,
                          std::string_view requirement, T value, std::string_view name = {}) {
  return {code, std::string(param), param_error(name.empty() ? param : name, requirement, value)};
}

// What the sampler can run: finite floats (any negative temperature means greedy),
// top_p in (0, 1], min_p in [0, 1], repeat_penalty > 0, repeat_last_n >= -1. The sampler's
// constructor refuses anything else.
inline param_check sampler_params_check(const sampler_params& p) {
  constexpr auto range = param_check_code::out_of_range;
  if (!std::isfinite(p.temperature)) {
    return param_refused(range, "temperature", "finite (<= 0 for greedy)", p.temperature);
  }
  if (!(p.top_p > 0 && p.top_p <= 1)) return param_refused(range, "top_p", "in (0, 1]", p.top_p);
  if (!(p.min_p >= 0 && p.min_p <= 1)) return param_refused(range, "min_p", "in [0, 1]", p.min_p);
  if (!(p.repeat_penalty > 0 && std::isfinite(p.repeat_penalty))) {
    return param_refused(range, "repeat_penalty", "finite and > 0 (1 = off)", p.repeat_penalty);
  }
  if (p.repeat_last_n < -1) {
    return param_refused(range, "repeat_last_n", ">= -1 (0 = off, -1 = whole history)",
                         p.repeat_last_n);
  }
  if (!std::isfinite(p.frequency_penalty)) {
    return param_refused(range, "frequency_penalty", "finite", p.frequency_penalty);
  }
  if (!std::isfinite(p.presence_penalty)) {
    return param_refused(range, "presence_penalty", "finite", p.presence_penalty);
  }
  for (const logit_bias_entry& b : p.logit_bias) {
    if (!std::isfinite(b.bias)) return param_refused(range, "logit_bias", "finite", b.bias);
  }
  return {};
}

// What a request may ask for (the first broken rule otherwise): max_tokens in [1, 2^20],
// temperature finite and >= 0, top_k >= 0, at most 16 stop strings of 1 to 256 bytes (param
// "stop"), and everything sampler_params_check asks. Stricter than the sampler, which also runs
// negative temperatures and top_k: a request says 0 for greedy and for off, so that a typo is an
// error.
inline param_check generation_params_check(const generation_params& p) {
  constexpr auto range = param_check_code::out_of_range;
  if (p.max_tokens < 1 || p.max_tokens > generation_max_tokens_limit) {
    return param_refused(range, "max_tokens",
                         "in [1, " + std::to_string(generation_max_tokens_limit) + "]",
                         p.max_tokens);
  }
  const sampler_params& s = p.sampling;
  if (!(std::isfinite(s.temperature) && s.temperature >= 0)) {
    return param_refused(range, "temperature", "finite and >= 0 (0 = greedy)", s.temperature);
  }
  if (s.top_k < 0) return param_refused(range, "top_k", ">= 0 (0 = off)", s.top_k);
  if (auto e = sampler_params_check(s); !e.ok()) return e;
  if (p.stop.size() > generation_max_stop_strings) {
    return param_refused(param_check_code::too_many, "stop",
                         "at most " + std::to_string(generation_max_stop_strings), p.stop.size(),
                         "the number of stop strings");
  }
  for (size_t i = 0; i < p.stop.size(); ++i) {
    if (p.stop[i].empty() || p.stop[i].size() > generation_max_stop_bytes) {
      return param_refused(range, "stop",
                           "1 to " + std::to_string(generation_max_stop_bytes) + " bytes",
                           p.stop[i].size(), "stop string " + std::to_string(i + 1) + "'s length");
    }
  }
  return {};
}

}  // namespace hearth
