#include "gateway/openai-json.h"

namespace hearth::gateway {

std::string json_text(const ojson& j) {
  return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

ojson openai_object_head(const openai_request& r, uint64_t job_id, int64_t created, bool chunk) {
  const bool chat = r.endpoint == openai_endpoint::chat_completions;
  ojson j;
  j["id"] = openai_response_id(r.endpoint, job_id);
  // OpenAI names a streamed completion's chunks as it names the whole one.
  j["object"] = chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  j["created"] = created;
  j["model"] = r.submit.model;
  return j;
}

ojson openai_usage(const wire::job_done& done) {
  return {{"prompt_tokens", done.n_prompt},
          {"completion_tokens", done.n_gen},
          {"total_tokens", uint64_t(done.n_prompt) + done.n_gen}};
}

ojson openai_tool_call_json(const wire::tool_call& c, std::optional<uint32_t> index) {
  ojson j;
  if (index) j["index"] = *index;
  j["id"] = c.id;
  j["type"] = "function";
  j["function"] = {{"name", c.name}, {"arguments", c.arguments}};
  return j;
}

namespace {

ojson bytes_json(const std::vector<uint8_t>& b) {
  ojson a = ojson::array();
  for (uint8_t c : b) a.push_back(c);
  return a;
}

ojson chat_logprob_json(const wire::token_logprob& t) {
  return {{"token", t.token}, {"logprob", t.logprob}, {"bytes", bytes_json(t.bytes)}};
}

}  // namespace

ojson openai_logprobs_json(openai_endpoint endpoint, const std::vector<wire::sampled_logprob>& p,
                           uint64_t text_offset) {
  if (endpoint == openai_endpoint::chat_completions) {
    ojson content = ojson::array();
    for (const auto& s : p) {
      ojson j = chat_logprob_json(s.sampled);
      ojson top = ojson::array();
      for (const auto& t : s.top) top.push_back(chat_logprob_json(t));
      j["top_logprobs"] = std::move(top);
      content.push_back(std::move(j));
    }
    return {{"content", std::move(content)}, {"refusal", nullptr}};
  }
  ojson tokens = ojson::array(), token_logprobs = ojson::array(), top = ojson::array(),
        offsets = ojson::array();
  for (const auto& s : p) {
    tokens.push_back(s.sampled.token);
    token_logprobs.push_back(s.sampled.logprob);
    ojson alternatives = ojson::object();
    for (const auto& t : s.top) alternatives[t.token] = t.logprob;
    top.push_back(std::move(alternatives));
    offsets.push_back(text_offset);
    text_offset += s.sampled.bytes.empty() ? s.sampled.token.size() : s.sampled.bytes.size();
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(offsets)}};
}

ojson openai_choice_json(const openai_request& r, uint32_t index, const choice_output& c,
                         std::string_view stop_reason) {
  const bool logprobs = r.submit.params.api.logprobs;
  ojson choice;
  if (r.endpoint == openai_endpoint::chat_completions) {
    choice["index"] = index;
    ojson message;
    message["role"] = "assistant";
    message["content"] =
        c.content.empty() && !c.tool_calls.empty() ? ojson(nullptr) : ojson(c.content);
    if (r.include_reasoning && !c.reasoning.empty()) {
      // The newline the model writes before "</think>" is not part of the reasoning.
      std::string_view reasoning = c.reasoning;
      while (!reasoning.empty() && reasoning.back() == '\n') reasoning.remove_suffix(1);
      if (!reasoning.empty()) message["reasoning_content"] = std::string(reasoning);
    }
    if (!c.tool_calls.empty()) {
      ojson calls = ojson::array();
      for (const auto& call : c.tool_calls) calls.push_back(openai_tool_call_json(call));
      message["tool_calls"] = std::move(calls);
    }
    choice["message"] = std::move(message);
  } else {
    choice["text"] = c.content;
    choice["index"] = index;
  }
  choice["logprobs"] = logprobs ? openai_logprobs_json(r.endpoint, c.logprobs) : ojson(nullptr);
  choice["finish_reason"] = choice_finish_reason(c, stop_reason);
  return choice;
}

std::string openai_chunk(const openai_request& r, uint64_t job_id, int64_t created,
                         const chunk_piece& piece) {
  ojson choice;
  if (r.endpoint == openai_endpoint::chat_completions) {
    choice["index"] = piece.index;
    ojson delta = ojson::object();
    if (piece.role) delta["role"] = "assistant";
    // The last chunk's delta is empty, as OpenAI's is; a chunk of reasoning, calls or logprobs
    // alone carries no content, as llama.cpp's server and vLLM send them.
    const bool other = !piece.reasoning.empty() || !piece.tool_calls.empty() ||
                       !piece.logprobs.empty() || piece.finish_reason;
    if (piece.role || !piece.content.empty() || !other) delta["content"] = piece.content;
    if (!piece.reasoning.empty()) delta["reasoning_content"] = piece.reasoning;
    if (!piece.tool_calls.empty()) {
      ojson calls = ojson::array();
      for (const auto& [i, call] : piece.tool_calls)
        calls.push_back(openai_tool_call_json(call, i));
      delta["tool_calls"] = std::move(calls);
    }
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = piece.content;
    choice["index"] = piece.index;
  }
  choice["logprobs"] = piece.logprobs.empty()
                           ? ojson(nullptr)
                           : openai_logprobs_json(r.endpoint, piece.logprobs, piece.text_offset);
  choice["finish_reason"] = piece.finish_reason ? ojson(*piece.finish_reason) : ojson(nullptr);
  ojson j = openai_object_head(r, job_id, created, true);
  j["choices"] = ojson::array({std::move(choice)});
  if (r.include_usage) j["usage"] = nullptr;
  return json_text(j);
}

std::string openai_usage_chunk(const openai_request& r, uint64_t job_id, int64_t created,
                               const wire::job_done& done) {
  ojson j = openai_object_head(r, job_id, created, true);
  j["choices"] = ojson::array();
  j["usage"] = openai_usage(done);
  return json_text(j);
}

}  // namespace hearth::gateway
