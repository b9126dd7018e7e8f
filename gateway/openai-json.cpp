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

std::string openai_chunk(const openai_request& r, uint64_t job_id, int64_t created,
                         std::string_view text, bool first,
                         std::optional<std::string_view> finish_reason,
                         std::string_view reasoning) {
  ojson choice;
  if (r.endpoint == openai_endpoint::chat_completions) {
    choice["index"] = 0;
    ojson delta = ojson::object();
    if (first) delta["role"] = "assistant";
    // The last chunk's delta is empty, as OpenAI's is.
    // A chunk of reasoning alone carries no content, as llama.cpp's server and vLLM send it.
    if (first || !text.empty() || (!finish_reason && reasoning.empty()))
      delta["content"] = std::string(text);
    if (!reasoning.empty()) delta["reasoning_content"] = std::string(reasoning);
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = std::string(text);
    choice["index"] = 0;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason ? ojson(std::string(*finish_reason)) : ojson(nullptr);
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
