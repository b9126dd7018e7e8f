// A Hugging Face tokenizer.json (with its tokenizer_config.json) as tokenizer.ggml.* metadata,
// so that a safetensors model directory gets the same vocabulary a GGUF converted from it would:
//   vocab::from_gguf(gguf_file::from_parts(hf_tokenizer_metadata(json, config), {}, nullptr))
//
// Supported: byte-level BPE (model.type "BPE" with a ByteLevel pre-tokenizer: GPT-2, Llama 3,
// Qwen2/3 style), the pre-tokenizer recognised by its Split expressions
// (engine/tokenizer/pre-tokenizer.h; a list no tokenizer.ggml.pre has is an error naming it). The
// NFC normaliser (Qwen) is taken as the identity: the tokenizer does not normalise text, which the
// qwen2 conformance vectors allow (tests/tokenizer_vectors_test.cpp); any other normaliser is an
// error.
//
// What llama.cpp's convert_hf_to_gguf.py writes, done the same way: tokens by id (an id no token
// has becomes "[PAD<id>]", unused), token types (added tokens are control when "special" or when
// they look special, "<|...|>" and the like, else user-defined with U+2581 as a space), merges as
// "left right", bos/eos/unk/pad ids from tokenizer_config.json's *_token fields, found among the
// tokens (a bos or eos that is no token is an error, an unknown unk or pad is skipped; unk falls
// back to model.unk_token; an id not named is not written, so the reader's default applies, as
// for a converted GGUF), add_bos_token/add_eos_token from the config (else a TemplateProcessing
// post-processor that starts with a special token means add_bos, with that token as bos), and
// tokenizer.chat_template from the config.
//
// Both texts are untrusted: malformed JSON or an unexpected structure yields an error naming the
// file and the field, never an exception or a crash.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "engine/io/gguf.h"

namespace hearth {

// `tokenizer_config_json` may be "" (no config: no bos/eos ids, no chat template).
result<std::vector<gguf_kv>> hf_tokenizer_metadata(const std::string& tokenizer_json,
                                                   const std::string& tokenizer_config_json);

}  // namespace hearth
