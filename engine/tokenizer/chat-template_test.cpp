// Chat templates against llama.cpp's own expectations (tests/test-chat-template.cpp, MIT, around
// build 4748): its conversation, its real template texts detected as llama.cpp detects them, and
// its expected output strings for every family hearth formats; names, errors, the model lookup.
#include "engine/tokenizer/chat-template.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "engine/io/gguf-writer.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

// llama.cpp's test conversation: a system message, three user turns, two assistant turns (one
// with surrounding spaces, to show which formats trim).
const std::vector<chat_message> k_conversation = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
    {"assistant", "   I am an assistant   "},
    {"user", "Another question"},
};

struct llama_cpp_case {
  chat_template family;
  std::string jinja;     // a real model's tokenizer.chat_template
  std::string expected;  // llama.cpp's expected_output (its non-Jinja formatter)
};

// Copied from llama.cpp's tests/test-chat-template.cpp (test_cases: name, template_str,
// expected_output), in its order, for the families hearth formats. The v3-tekken template is the
// v3 one with Nemo's spacing, as in llama.cpp's file.
const std::vector<llama_cpp_case> k_llama_cpp_cases = {
    {// teknium/OpenHermes-2.5-Mistral-7B
     chat_template::chatml,
     "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
     "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
     "'<|im_start|>assistant\\n' }}{% endif %}",
     "<|im_start|>system\nYou are a helpful "
     "assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi "
     "there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n<|im_start|>assistant\n   I am an "
     "assistant   <|im_end|>\n<|im_start|>user\nAnother "
     "question<|im_end|>\n<|im_start|>assistant\n"},
    {// mistralai/Mistral-7B-Instruct-v0.2 (old pre-v1 template without a system prompt)
     chat_template::llama2,
     "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
     "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
     "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ "
     "'[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ "
     "message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles "
     "are supported!') }}{% endif %}{% endfor %}",
     "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I "
     "am an assistant   </s>[INST] Another question [/INST]"},
    {// TheBloke/FusionNet_34Bx2_MoE-AWQ
     chat_template::llama2_sys_bos,
     "{%- for idx in range(0, messages|length) -%}\n{%- if messages[idx]['role'] == 'user' "
     "-%}\n{%- if idx > 1 -%}\n{{- bos_token + '[INST] ' + messages[idx]['content'] + ' [/INST]' "
     "-}}\n{%- else -%}\n{{- messages[idx]['content'] + ' [/INST]' -}}\n{%- endif -%}\n{% elif "
     "messages[idx]['role'] == 'system' %}\n{{- '[INST] <<SYS>>\\n' + messages[idx]['content'] + "
     "'\\n<</SYS>>\\n\\n' -}}\n{%- elif messages[idx]['role'] == 'assistant' -%}\n{{- ' '  + "
     "messages[idx]['content'] + ' ' + eos_token -}}\n{% endif %}\n{% endfor %}",
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s><s>[INST] "
     "Who are you [/INST]   I am an assistant   </s><s>[INST] Another question [/INST]"},
    {// bofenghuang/vigogne-2-70b-chat
     chat_template::llama2_sys_strip,
     "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] "
     "%}{% set system_message = messages[0]['content'] %}{% elif true == true and not '<<SYS>>' in "
     "messages[0]['content'] %}{% set loop_messages = messages %}{% set system_message = 'Vous "
     "êtes Vigogne, un assistant IA créé par Zaion Lab. Vous suivez extrêmement bien les "
     "instructions. Aidez autant que vous le pouvez.' %}{% else %}{% set loop_messages = messages "
     "%}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if "
     "(message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation "
     "roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 "
     "and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
     "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] "
     "%}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + content.strip() + ' [/INST]' "
     "}}{% elif message['role'] == 'system' %}{{ '<<SYS>>\\n' + content.strip() + "
     "'\\n<</SYS>>\\n\\n' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' "
     "' + eos_token }}{% endif %}{% endfor %}",
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who "
     "are you [/INST]I am an assistant</s>[INST] Another question [/INST]"},
    {// google/gemma-7b-it
     chat_template::gemma,
     "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% "
     "endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 "
     "== 0) %}{{ raise_exception('Conversation roles must alternate "
     "user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% "
     "set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ "
     "'<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% "
     "endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}",
     "<start_of_turn>user\nYou are a helpful "
     "assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi "
     "there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI "
     "am an assistant<end_of_turn>\n<start_of_turn>user\nAnother "
     "question<end_of_turn>\n<start_of_turn>model\n"},
    {// Llama-3
     chat_template::llama3,
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
     "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim "
     "+ '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif "
     "%}{{ content }}{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}",
     "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful "
     "assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_"
     "id|>assistant<|end_header_id|>\n\nHi "
     "there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are "
     "you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nI am an "
     "assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnother "
     "question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
    {// Phi-3-mini
     chat_template::phi3,
     "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}{{'<|user|>' "
     "+ '\n' + message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}{% elif "
     "(message['role'] == 'assistant') %}{{message['content'] + '<|end|>' + '\n'}}{% endif %}{% "
     "endfor %}",
     "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi "
     "there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   "
     "<|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n"},
    {// Phi-3-small
     chat_template::phi3,
     "{{ bos_token }}{% for message in messages %}{{'<|' + message['role'] + '|>' + '\n' + "
     "message['content'] + '<|end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ "
     "'<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}",
     "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi "
     "there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   "
     "<|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n"},
    {// Phi-3-medium
     chat_template::phi3,
     "{% for message in messages %}{% if (message['role'] == 'user') %}{{'<|user|>' + '\n' + "
     "message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}{% elif (message['role'] == "
     "'assistant') %}{{message['content'] + '<|end|>' + '\n'}}{% endif %}{% endfor %}",
     "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi "
     "there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   "
     "<|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n"},
    {// Phi-3-vision
     chat_template::phi3,
     "{% for message in messages %}{{'<|' + message['role'] + '|>' + '\n' + message['content'] + "
     "'<|end|>\n' }}{% endfor %}{% if add_generation_prompt and messages[-1]['role'] != "
     "'assistant' %}{{- '<|assistant|>\n' -}}{% endif %}",
     "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi "
     "there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   "
     "<|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n"},
    {// mistralai/Mistral-7B-Instruct-v0.2 (mistralai 'v1' template with a system prompt)
     chat_template::mistral_v1,
     "{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = "
     "messages[0]['content'] %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- "
     "set loop_messages = messages %}\n{%- endif %}\n\n{{- bos_token }}\n{%- for message in "
     "loop_messages %}\n    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n      "
     "  {{- raise_exception('After the optional system message, conversation roles must alternate "
     "user/assistant/user/assistant/...') }}\n    {%- endif %}\n    {%- if message['role'] == "
     "'user' %}\n        {%- if loop.first and system_message is defined %}\n            {{- ' "
     "[INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}\n        {%- else "
     "%}\n            {{- ' [INST] ' + message['content'] + ' [/INST]' }}\n        {%- endif %}\n  "
     "  {%- elif message['role'] == 'assistant' %}\n        {{- ' ' + message['content'] + "
     "eos_token}}\n    {%- else %}\n        {{- raise_exception('Only user and assistant roles are "
     "supported, with the exception of an initial optional system message!') }}\n    {%- endif "
     "%}\n{%- endfor %}\n",
     " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST] "
     "   I am an assistant   </s> [INST] Another question [/INST]"},
    {// Mistral-Large-Instruct-2407 (mistralai 'v3' template; modified to have system prompt at
     // start)
     chat_template::mistral_v3,
     "{%- if messages[0][\"role\"] == \"system\" %}\n    {%- set system_message = "
     "messages[0][\"content\"] %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    "
     "{%- set loop_messages = messages %}\n{%- endif %}\n{%- if not tools is defined %}\n    {%- "
     "set tools = none %}\n{%- endif %}\n{%- set user_messages = loop_messages | "
     "selectattr(\"role\", \"equalto\", \"user\") | list %}\n\n{#- This block checks for "
     "alternating user/assistant messages, skipping tool calling messages #}\n{%- set ns = "
     "namespace() %}\n{%- set ns.index = 0 %}\n{%- for message in loop_messages %}\n    {%- if not "
     "(message.role == \"tool\" or message.role == \"tool_results\" or (message.tool_calls is "
     "defined and message.tool_calls is not none)) %}\n        {%- if (message[\"role\"] == "
     "\"user\") != (ns.index % 2 == 0) %}\n            {{- raise_exception(\"After the optional "
     "system message, conversation roles must alternate user/assistant/user/assistant/...\") }}\n  "
     "      {%- endif %}\n        {%- set ns.index = ns.index + 1 %}\n    {%- endif %}\n{%- endfor "
     "%}\n\n{{- bos_token }}\n{%- for message in loop_messages %}\n    {%- if message[\"role\"] == "
     "\"user\" %}\n        {%- if tools is not none and (message == user_messages[-1]) %}\n        "
     "    {{- \"[AVAILABLE_TOOLS] [\" }}\n            {%- for tool in tools %}\n                "
     "{%- set tool = tool.function %}\n                {{- '{\"type\": \"function\", \"function\": "
     "{' }}\n                {%- for key, val in tool.items() if key != \"return\" %}\n            "
     "        {%- if val is string %}\n                        {{- '\"' + key + '\": \"' + val + "
     "'\"' }}\n                    {%- else %}\n                        {{- '\"' + key + '\": ' + "
     "val|tojson }}\n                    {%- endif %}\n                    {%- if not loop.last "
     "%}\n                        {{- \", \" }}\n                    {%- endif %}\n                "
     "{%- endfor %}\n                {{- \"}}\" }}\n                {%- if not loop.last %}\n      "
     "              {{- \", \" }}\n                {%- else %}\n                    {{- \"]\" }}\n "
     "               {%- endif %}\n            {%- endfor %}\n            {{- "
     "\"[/AVAILABLE_TOOLS]\" }}\n            {%- endif %}\n        {%- if loop.last and "
     "system_message is defined %}\n            {{- \"[INST] \" + system_message + \"\\n\\n\" + "
     "message[\"content\"] + \"[/INST]\" }}\n        {%- else %}\n            {{- \"[INST] \" + "
     "message[\"content\"] + \"[/INST]\" }}\n        {%- endif %}\n    {%- elif message.tool_calls "
     "is defined and message.tool_calls is not none %}\n        {{- \"[TOOL_CALLS] [\" }}\n        "
     "{%- for tool_call in message.tool_calls %}\n            {%- set out = "
     "tool_call.function|tojson %}\n            {{- out[:-1] }}\n            {%- if not "
     "tool_call.id is defined or tool_call.id|length != 9 %}\n                {{- "
     "raise_exception(\"Tool call IDs should be alphanumeric strings with length 9!\") }}\n        "
     "    {%- endif %}\n            {{- ', \"id\": \"' + tool_call.id + '\"}' }}\n            {%- "
     "if not loop.last %}\n                {{- \", \" }}\n            {%- else %}\n                "
     "{{- \"]\" + eos_token }}\n            {%- endif %}\n        {%- endfor %}\n    {%- elif "
     "message[\"role\"] == \"assistant\" %}\n        {{- \" \" + message[\"content\"]|trim + "
     "eos_token}}\n    {%- elif message[\"role\"] == \"tool_results\" or message[\"role\"] == "
     "\"tool\" %}\n        {%- if message.content is defined and message.content.content is "
     "defined %}\n            {%- set content = message.content.content %}\n        {%- else %}\n  "
     "          {%- set content = message.content %}\n        {%- endif %}\n        {{- "
     "'[TOOL_RESULTS] {\"content\": ' + content|string + \", \" }}\n        {%- if not "
     "message.tool_call_id is defined or message.tool_call_id|length != 9 %}\n            {{- "
     "raise_exception(\"Tool call IDs should be alphanumeric strings with length 9!\") }}\n        "
     "{%- endif %}\n        {{- '\"call_id\": \"' + message.tool_call_id + '\"}[/TOOL_RESULTS]' "
     "}}\n    {%- else %}\n        {{- raise_exception(\"Only user and assistant roles are "
     "supported, with the exception of an initial optional system message!\") }}\n    {%- endif "
     "%}\n{%- endfor %}\n",
     "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST] I "
     "am an assistant</s>[INST] Another question[/INST]"},
    {// Mistral-Nemo-Instruct-2407 (mistralai 'v3-tekken' template; modified to have system prompt
     // at start)
     chat_template::mistral_v3_tekken,
     "{%- if messages[0][\"role\"] == \"system\" %}\n    {%- set system_message = "
     "messages[0][\"content\"] %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    "
     "{%- set loop_messages = messages %}\n{%- endif %}\n{%- if not tools is defined %}\n    {%- "
     "set tools = none %}\n{%- endif %}\n{%- set user_messages = loop_messages | "
     "selectattr(\"role\", \"equalto\", \"user\") | list %}\n\n{#- This block checks for "
     "alternating user/assistant messages, skipping tool calling messages #}\n{%- set ns = "
     "namespace() %}\n{%- set ns.index = 0 %}\n{%- for message in loop_messages %}\n    {%- if not "
     "(message.role == \"tool\" or message.role == \"tool_results\" or (message.tool_calls is "
     "defined and message.tool_calls is not none)) %}\n        {%- if (message[\"role\"] == "
     "\"user\") != (ns.index % 2 == 0) %}\n            {{- raise_exception(\"After the optional "
     "system message, conversation roles must alternate user/assistant/user/assistant/...\") }}\n  "
     "      {%- endif %}\n        {%- set ns.index = ns.index + 1 %}\n    {%- endif %}\n{%- endfor "
     "%}\n\n{{- bos_token }}\n{%- for message in loop_messages %}\n    {%- if message[\"role\"] == "
     "\"user\" %}\n        {%- if tools is not none and (message == user_messages[-1]) %}\n        "
     "    {{- \"[AVAILABLE_TOOLS][\" }}\n            {%- for tool in tools %}\n                {%- "
     "set tool = tool.function %}\n                {{- '{\"type\": \"function\", \"function\": {' "
     "}}\n                {%- for key, val in tool.items() if key != \"return\" %}\n               "
     "     {%- if val is string %}\n                        {{- '\"' + key + '\": \"' + val + '\"' "
     "}}\n                    {%- else %}\n                        {{- '\"' + key + '\": ' + "
     "val|tojson }}\n                    {%- endif %}\n                    {%- if not loop.last "
     "%}\n                        {{- \", \" }}\n                    {%- endif %}\n                "
     "{%- endfor %}\n                {{- \"}}\" }}\n                {%- if not loop.last %}\n      "
     "              {{- \", \" }}\n                {%- else %}\n                    {{- \"]\" }}\n "
     "               {%- endif %}\n            {%- endfor %}\n            {{- "
     "\"[/AVAILABLE_TOOLS]\" }}\n            {%- endif %}\n        {%- if loop.last and "
     "system_message is defined %}\n            {{- \"[INST]\" + system_message + \"\\n\\n\" + "
     "message[\"content\"] + \"[/INST]\" }}\n        {%- else %}\n            {{- \"[INST]\" + "
     "message[\"content\"] + \"[/INST]\" }}\n        {%- endif %}\n    {%- elif "
     "(message.tool_calls is defined and message.tool_calls is not none) %}\n        {{- "
     "\"[TOOL_CALLS][\" }}\n        {%- for tool_call in message.tool_calls %}\n            {%- "
     "set out = tool_call.function|tojson %}\n            {{- out[:-1] }}\n            {%- if not "
     "tool_call.id is defined or tool_call.id|length != 9 %}\n                {{- "
     "raise_exception(\"Tool call IDs should be alphanumeric strings with length 9!\") }}\n        "
     "    {%- endif %}\n            {{- ', \"id\": \"' + tool_call.id + '\"}' }}\n            {%- "
     "if not loop.last %}\n                {{- \", \" }}\n            {%- else %}\n                "
     "{{- \"]\" + eos_token }}\n            {%- endif %}\n        {%- endfor %}\n    {%- elif "
     "message[\"role\"] == \"assistant\" %}\n        {{- message[\"content\"] + eos_token}}\n    "
     "{%- elif message[\"role\"] == \"tool_results\" or message[\"role\"] == \"tool\" %}\n        "
     "{%- if message.content is defined and message.content.content is defined %}\n            {%- "
     "set content = message.content.content %}\n        {%- else %}\n            {%- set content = "
     "message.content %}\n        {%- endif %}\n        {{- '[TOOL_RESULTS]{\"content\": ' + "
     "content|string + \", \" }}\n        {%- if not message.tool_call_id is defined or "
     "message.tool_call_id|length != 9 %}\n            {{- raise_exception(\"Tool call IDs should "
     "be alphanumeric strings with length 9!\") }}\n        {%- endif %}\n        {{- "
     "'\"call_id\": \"' + message.tool_call_id + '\"}[/TOOL_RESULTS]' }}\n    {%- else %}\n        "
     "{{- raise_exception(\"Only user and assistant roles are supported, with the exception of an "
     "initial optional system message!\") }}\n    {%- endif %}\n{%- endfor %}\n",
     "[INST]You are a helpful assistant\n\nHello[/INST]Hi there</s>[INST]Who are you[/INST]   I am "
     "an assistant   </s>[INST]Another question[/INST]"},
    {// mistralai/Mistral-Large-Instruct-2411 (mistralai 'v7' template)
     chat_template::mistral_v7,
     "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + "
     "message['content'] + '[/INST]' }}{% elif message['role'] == 'system' %}{{ '[SYSTEM_PROMPT] ' "
     "+ message['content'] + '[/SYSTEM_PROMPT]' }}{% elif message['role'] == 'assistant' %}{{ ' ' "
     "+ message['content'] + eos_token }}{% else %}{{ raise_exception('Only user, system and "
     "assistant roles are supported!') }}{% endif %}{% endfor %}",
     "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi "
     "there</s>[INST] Who are you[/INST]    I am an assistant   </s>[INST] Another "
     "question[/INST]"},
    {// phi-4
     chat_template::phi4,
     "{% for message in messages %}{% if (message['role'] == 'system') "
     "%}{{'<|im_start|>system<|im_sep|>' + message['content'] + '<|im_end|>'}}{% elif "
     "(message['role'] == 'user') %}{{'<|im_start|>user<|im_sep|>' + message['content'] + "
     "'<|im_end|><|im_start|>assistant<|im_sep|>'}}{% elif (message['role'] == 'assistant') "
     "%}{{message['content'] + '<|im_end|>'}}{% endif %}{% endfor %}",
     "<|im_start|>system<|im_sep|>You are a helpful "
     "assistant<|im_end|><|im_start|>user<|im_sep|>Hello<|im_end|><|im_start|>assistant<|im_sep|>"
     "Hi there<|im_end|><|im_start|>user<|im_sep|>Who are "
     "you<|im_end|><|im_start|>assistant<|im_sep|>   I am an assistant   "
     "<|im_end|><|im_start|>user<|im_sep|>Another "
     "question<|im_end|><|im_start|>assistant<|im_sep|>"},
};

TEST(ChatTemplate, DetectsAndFormatsLikeLlamaCpp) {
  for (const auto& c : k_llama_cpp_cases) {
    SCOPED_TRACE(std::string(chat_template_name(c.family)) + ": " + c.jinja.substr(0, 60));
    auto t = chat_template_detect(c.jinja);
    ASSERT_TRUE(t.ok()) << t.message();
    EXPECT_EQ(chat_template_name(*t), chat_template_name(c.family));
    auto text = chat_template_apply(c.family, k_conversation);
    ASSERT_TRUE(text.ok()) << text.message();
    EXPECT_EQ(*text, c.expected);
  }
}

TEST(ChatTemplate, EveryFamilyIsCoveredByALlamaCppCase) {
  for (const auto& name :
       {"chatml", "llama2", "llama2-sys-bos", "llama2-sys-strip", "mistral-v1", "mistral-v3",
        "mistral-v3-tekken", "mistral-v7", "phi3", "phi4", "gemma", "llama3"}) {
    auto t = chat_template_from_name(name);
    ASSERT_TRUE(t.ok()) << t.message();
    bool covered = false;
    for (const auto& c : k_llama_cpp_cases) covered = covered || c.family == *t;
    EXPECT_TRUE(covered) << name;
  }
}

// llama2-sys has no case of its own in llama.cpp's list: its expected text is the sys-bos one
// without the <s> inside the history, and the plain llama2 one writes the system text bare.
TEST(ChatTemplate, Llama2SystemBlockVariants) {
  auto sys = chat_template_apply(chat_template::llama2_sys, k_conversation);
  ASSERT_TRUE(sys.ok());
  EXPECT_EQ(*sys,
            "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>"
            "[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another question [/INST]");
  EXPECT_EQ(*chat_template_detect("{{ '[INST] <<SYS>>\\n' + content + ' [/INST]' }}"),
            chat_template::llama2_sys);
}

// llama.cpp's common_chat_format_single checks: a system message alone (the formats without a
// generation prompt), and the text a new user message adds to a conversation.
TEST(ChatTemplate, SystemMessageAloneAndTheTextOfOneMoreTurn) {
  const std::vector<chat_message> sys = {{"system", "You are a helpful assistant"}};
  auto fmt_sys = [&](chat_template t) { return *chat_template_apply(t, sys); };
  EXPECT_EQ(fmt_sys(chat_template::mistral_v1), " [INST] You are a helpful assistant\n\n");
  EXPECT_EQ(fmt_sys(chat_template::mistral_v3), "[INST] You are a helpful assistant\n\n");
  EXPECT_EQ(fmt_sys(chat_template::mistral_v3_tekken), "[INST]You are a helpful assistant\n\n");
  EXPECT_EQ(fmt_sys(chat_template::mistral_v7),
            "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT]");
  EXPECT_EQ(fmt_sys(chat_template::llama2), "[INST] You are a helpful assistant\n");
  EXPECT_EQ(fmt_sys(chat_template::llama2_sys),
            "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\n");
  EXPECT_EQ(fmt_sys(chat_template::gemma), "<start_of_turn>model\n");  // merged into a user turn

  const std::vector<chat_message> past = {{"system", "You are a helpful assistant"},
                                          {"user", "Hello"},
                                          {"assistant", "I am assistant"}};
  std::vector<chat_message> next = past;
  next.push_back({"user", "How are you"});
  auto added = [&](chat_template t) {
    const std::string before = *chat_template_apply(t, past);
    const std::string after = *chat_template_apply(t, next);
    // Without the generation prompt `before` ends with, the new turn extends the old text.
    for (size_t n = before.size(); n > 0; --n) {
      if (after.compare(0, n, before, 0, n) == 0) return after.substr(n);
    }
    return after;
  };
  EXPECT_EQ(added(chat_template::chatml), "user\nHow are you<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(added(chat_template::mistral_v1), " [INST] How are you [/INST]");
  EXPECT_EQ(added(chat_template::mistral_v3), "[INST] How are you[/INST]");
  EXPECT_EQ(added(chat_template::mistral_v3_tekken), "[INST]How are you[/INST]");
  EXPECT_EQ(added(chat_template::mistral_v7), "[INST] How are you[/INST]");
  EXPECT_EQ(added(chat_template::llama2), "[INST] How are you [/INST]");
  EXPECT_EQ(added(chat_template::gemma), "user\nHow are you<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(added(chat_template::llama3),
            "user<|end_header_id|>\n\nHow are you<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, GemmaWithoutASystemMessage) {
  const std::vector<chat_message> msgs = {{"user", "  Hi  "}};
  EXPECT_EQ(*chat_template_apply(chat_template::gemma, msgs),
            "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
}

std::string qwen3_jinja() {
  const std::string path = testing::testdata_path("tokenizers/qwen3/tokenizer_config.json");
  if (path.empty()) return {};
  const auto config = nlohmann::json::parse(testing::read_file_text(path));
  return config.at("chat_template").get<std::string>();
}

TEST(ChatTemplate, QwenTokenizerConfigIsQwen3) {
  const std::string jinja = qwen3_jinja();
  ASSERT_FALSE(jinja.empty());
  auto t = chat_template_detect(jinja);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(*t, chat_template::qwen3);
  EXPECT_TRUE(chat_template_thinks(*t));
  EXPECT_FALSE(chat_template_thinks(chat_template::chatml));
  // Qwen2.5's template (no think blocks) stays plain ChatML.
  EXPECT_EQ(*chat_template_detect("{{'<|im_start|>' + message['role'] + '\\n'}}"),
            chat_template::chatml);
}

// Expected strings: what the Qwen3 template of tests data (tokenizers/qwen3/tokenizer_config.json)
// renders in jinja2 3.1 as transformers runs it (trim_blocks, lstrip_blocks),
// add_generation_prompt.
TEST(ChatTemplate, Qwen3SystemUserAndGenerationPrompt) {
  const std::vector<chat_message> msgs = {{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(*chat_template_apply(chat_template::qwen3, msgs),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(*chat_template_apply(chat_template::qwen3, msgs, {.enable_thinking = false}),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  // enable_thinking changes nothing in other formats.
  EXPECT_EQ(*chat_template_apply(chat_template::chatml, msgs, {.enable_thinking = false}),
            *chat_template_apply(chat_template::chatml, msgs));
}

TEST(ChatTemplate, Qwen3DropsTheReasoningOfEarlierTurns) {
  const std::vector<chat_message> msgs = {
      {"user", "2+2?"},     {"assistant", "<think>\nAdd them.\n</think>\n\n4"},
      {"user", "And 3+3?"}, {"assistant", "   plain answer  "},  // no think block: kept as it is
      {"user", "Thanks"},
  };
  EXPECT_EQ(*chat_template_apply(chat_template::qwen3, msgs),
            "<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n4<|im_end|>\n"
            "<|im_start|>user\nAnd 3+3?<|im_end|>\n"
            "<|im_start|>assistant\n   plain answer  <|im_end|>\n"
            "<|im_start|>user\nThanks<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplate, Qwen3KeepsTheReasoningAfterTheLastUserMessage) {
  // An assistant message after the last user message keeps its think block; the last message
  // gets an empty one when it has none.
  const std::vector<chat_message> with = {{"user", "Hi"},
                                          {"assistant", "<think>\n\nponder\n\n</think>\n\nHello"}};
  EXPECT_EQ(*chat_template_apply(chat_template::qwen3, with),
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nponder\n</think>\n\nHello<|im_end|>\n"
            "<|im_start|>assistant\n");
  const std::vector<chat_message> without = {{"user", "Hi"}, {"assistant", "Hello"}};
  EXPECT_EQ(*chat_template_apply(chat_template::qwen3, without),
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nHello<|im_end|>\n"
            "<|im_start|>assistant\n");
  // Not the last and without reasoning: plain.
  const std::vector<chat_message> two = {
      {"user", "Hi"}, {"assistant", "Hello"}, {"assistant", "<think>x</think>Again"}};
  EXPECT_EQ(*chat_template_apply(chat_template::qwen3, two),
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nx\n</think>\n\nAgain<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplate, Qwen3LaterSystemMessagesAreTurnsToo) {
  const std::vector<chat_message> msgs = {{"user", "Hi"}, {"system", "Now in French."}};
  EXPECT_EQ(*chat_template_apply(chat_template::qwen3, msgs),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>system\nNow in French.<|im_end|>\n"
            "<|im_start|>assistant\n");
}

// google/gemma-3-*-it's template (tokenizer_config.json), abridged to the parts that decide the
// format: {{ bos_token }} (the tokenizer's BOS here, add_bos_token), a first system message
// prefixed to the first user turn with "\n\n", assistant -> model, content trimmed.
const std::string k_gemma3_jinja =
    "{{ bos_token }}\n{%- if messages[0]['role'] == 'system' -%}{%- set first_user_prefix = "
    "messages[0]['content'] + '\\n\\n' -%}{%- set loop_messages = messages[1:] -%}{%- else "
    "-%}{%- set first_user_prefix = \"\" -%}{%- set loop_messages = messages -%}{%- endif -%}"
    "{%- for message in loop_messages -%}{%- if (message['role'] == 'assistant') -%}{%- set "
    "role = \"model\" -%}{%- else -%}{%- set role = message['role'] -%}{%- endif -%}{{ "
    "'<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}{{ "
    "message['content'] | trim }}{{ '<end_of_turn>\\n' }}{%- endfor -%}{%- if "
    "add_generation_prompt -%}{{'<start_of_turn>model\\n'}}{%- endif -%}";

TEST(ChatTemplate, Gemma3IsTheGemmaFormat) {
  auto t = chat_template_detect(k_gemma3_jinja);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(*t, chat_template::gemma);
  const std::vector<chat_message> msgs = {
      {"system", "Be brief."}, {"user", "Hi "}, {"assistant", "Hello!"}, {"user", "Bye"}};
  // As Gemma 3's template renders it, less the "<bos>" the tokenizer adds.
  EXPECT_EQ(*chat_template_apply(*t, msgs),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
            "<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n"
            "<start_of_turn>model\n");
}

TEST(ChatTemplate, NamesRoundTrip) {
  const std::string names = chat_template_names();
  EXPECT_EQ(names.substr(0, 21), "chatml, qwen3, llama2");
  for (const auto& name : {"chatml", "qwen3", "llama2", "llama2-sys", "llama2-sys-bos",
                           "llama2-sys-strip", "mistral-v1", "mistral-v3", "mistral-v3-tekken",
                           "mistral-v7", "phi3", "phi4", "gemma", "llama3"}) {
    auto t = chat_template_from_name(name);
    ASSERT_TRUE(t.ok()) << name;
    EXPECT_EQ(chat_template_name(*t), name);
    EXPECT_NE(names.find(name), std::string::npos);
    // A template text that is just a name is that template, as in llama.cpp.
    EXPECT_EQ(*chat_template_detect(name), *t);
  }
}

TEST(ChatTemplate, UnknownNameListsTheKnownOnes) {
  auto t = chat_template_from_name("chatgpt");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.message(), "unknown chat template 'chatgpt' (known: " + chat_template_names() + ")");
}

TEST(ChatTemplate, MistralAsATemplateTextIsTheOldLlama2Format) {
  // llama.cpp: a template starting with "mistral" is a pre-v1 Mistral template.
  EXPECT_EQ(*chat_template_detect("mistral"), chat_template::llama2);
}

TEST(ChatTemplate, UnrecognisedTemplateListsTheNames) {
  auto t = chat_template_detect("{% for m in messages %}{{ m.content }}{% endfor %}");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.message(), "the chat template was not recognised (templates that can be named: " +
                             chat_template_names() + ")");
  EXPECT_FALSE(chat_template_detect("").ok());
}

// Families llama.cpp recognises and hearth does not format are named, not mistaken for another.
TEST(ChatTemplate, FamiliesHearthDoesNotFormatAreNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      // llama.cpp's test templates: mlabonne/AlphaMonarch-7B, OrionStarAI/Orion-14B-Chat,
      // openchat/openchat-3.5-0106, eachadea/vicuna-13b-1.1, Orca-Vicuna, DeepSeek-V2, ChatGLM3.
      {"monarch",
       "{% for message in messages %}{{bos_token + message['role'] + '\\n' + message['content'] + "
       "eos_token + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ bos_token + "
       "'assistant\\n' }}{% endif %}"},
      {"orion",
       "{% for message in messages %}{% if loop.first %}{{ bos_token }}{% endif %}{% if "
       "message['role'] == 'user' %}{{ 'Human: ' + message['content'] + '\\n\\nAssistant: ' + "
       "eos_token }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token "
       "}}{% endif %}{% endfor %}"},
      {"openchat",
       "{{ bos_token }}{% for message in messages %}{{ 'GPT4 Correct ' + "
       "message['role'].title() + ': ' + message['content'] + '<|end_of_turn|>'}}{% endfor %}{% "
       "if add_generation_prompt %}{{ 'GPT4 Correct Assistant:' }}{% endif %}"},
      {"vicuna",
       "{%- for message in messages %}{%- if message['role'] == 'system' -%}{{- '' + "
       "message['content'] + '\n\n' -}}{%- else -%}{%- if message['role'] == 'user' -%}{{-'USER: "
       "' + message['content'] + '\n'-}}{%- else -%}{{-'ASSISTANT: ' + message['content'] + "
       "'</s>\n' -}}{%- endif -%}{%- endif -%}{%- endfor -%}{%- if add_generation_prompt "
       "-%}{{-'ASSISTANT:'-}}{%- endif -%}"},
      {"vicuna-orca",
       "{%- for message in messages %}{%- if message['role'] == 'system' -%}{{-'SYSTEM: ' + "
       "message['content'] + '\n' -}}{%- else -%}{%- if message['role'] == 'user' -%}{{-'USER: ' "
       "+ message['content'] + '\n'-}}{%- else -%}{{-'ASSISTANT: ' + message['content'] + "
       "'</s>\n' -}}{%- endif -%}{%- endif -%}{%- endfor -%}{%- if add_generation_prompt "
       "-%}{{-'ASSISTANT:'-}}{%- endif -%}"},
      {"deepseek2",
       "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% "
       "endif %}{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ "
       "'User: ' + message['content'] + '\n\n' }}{% elif message['role'] == 'assistant' %}{{ "
       "'Assistant: ' + message['content'] + eos_token }}{% elif message['role'] == 'system' "
       "%}{{ message['content'] + '\n\n' }}{% endif %}{% endfor %}{% if add_generation_prompt "
       "%}{{ 'Assistant:' }}{% endif %}"},
      {"chatglm3",
       "{% for message in messages %}{% if loop.first %}[gMASK]sop<|{{ message['role'] }}|>\n {{ "
       "message['content'] }}{% else %}<|{{ message['role'] }}|>\n {{ message['content'] }}{% "
       "endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"},
  };
  for (const auto& [family, jinja] : cases) {
    auto t = chat_template_detect(jinja);
    ASSERT_FALSE(t.ok()) << family;
    EXPECT_EQ(t.message(),
              "the chat template looks like llama.cpp's '" + family +
                  "' format, which hearth does not support (templates that can be named: " +
                  chat_template_names() + ")");
  }
}

TEST(ChatTemplate, BadConversationsAreErrors) {
  EXPECT_EQ(chat_template_apply(chat_template::chatml, {}).message(),
            "the conversation has no messages");
  const std::vector<chat_message> tool = {{"user", "hi"}, {"tool", "{}"}};
  EXPECT_EQ(chat_template_apply(chat_template::chatml, tool).message(),
            "message 2 has the role 'tool'; a chat template knows only system, user and assistant");
}

// A GGUF with the given metadata and no tensors, parsed from memory.
struct metadata_file {
  std::vector<uint8_t> bytes;
  gguf_file file() const { return *gguf_file::parse(bytes); }
};

metadata_file gguf_with(const std::function<void(gguf_writer&)>& edit) {
  gguf_writer w;
  w.set_string("general.architecture", "llama");
  edit(w);
  return {w.to_bytes()};
}

TEST(ChatTemplate, ForModelDetectsFromMetadataUnlessNamed) {
  const auto chatml = gguf_with(
      [](gguf_writer& w) { w.set_string("tokenizer.chat_template", k_llama_cpp_cases[0].jinja); });
  auto c = chat_template_for_model(chatml.file(), "");
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->tmpl, chat_template::chatml);
  EXPECT_TRUE(c->detected);

  c = chat_template_for_model(chatml.file(), "llama3");
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->tmpl, chat_template::llama3);
  EXPECT_FALSE(c->detected);

  c = chat_template_for_model(chatml.file(), "nope");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("unknown chat template 'nope'"), std::string::npos);
}

TEST(ChatTemplate, ForModelWithoutATemplate) {
  const auto none = gguf_with([](gguf_writer&) {});
  auto c = chat_template_for_model(none.file(), "");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.message(),
            "the model has no chat template (no tokenizer.chat_template in its metadata)");
  // Naming one needs no template in the file.
  c = chat_template_for_model(none.file(), "gemma");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->tmpl, chat_template::gemma);

  const auto odd = gguf_with([](gguf_writer& w) { w.set_string("tokenizer.chat_template", "{{"); });
  c = chat_template_for_model(odd.file(), "");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("not recognised"), std::string::npos);

  const auto wrong_type =
      gguf_with([](gguf_writer& w) { w.set_u32("tokenizer.chat_template", 7); });
  c = chat_template_for_model(wrong_type.file(), "");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("tokenizer.chat_template"), std::string::npos);
}

}  // namespace
}  // namespace hearth
