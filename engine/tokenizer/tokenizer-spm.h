// SentencePiece-style BPE over one text fragment, as llama.cpp's llm_tokenizer_spm_session
// (build 4748): start from single UTF-8 characters, repeatedly merge the adjacent pair whose
// concatenation is the highest-scoring vocabulary token (ties: leftmost pair first), and write
// every remaining piece that is not a token as its bytes' <0xXX> tokens.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace hearth {

class vocab;

// Appends the ids for `text` to `out`. `text` is already escaped the SentencePiece way (spaces
// as U+2581, the dummy-prefix space added); vocab::tokenize does that. A byte with neither a
// <0xXX> token nor a one-byte token becomes the unknown token (dropped if there is none).
void spm_tokenize(const vocab& v, std::string_view text, std::vector<int32_t>& out);

}  // namespace hearth
