// A model split into several GGUF files, as the reference engine's `gguf-split` writes it and
// Hugging Face repositories hold big models: PREFIX-00001-of-00003.gguf,
// PREFIX-00002-of-00003.gguf,
// ... Every part is a GGUF file with the keys split.no (u16, 0-based), split.count (u16) and
// split.tensors.count (i32, the tensors of all parts); the first part holds all the model's other
// metadata and some tensors, the others only tensors. Opened from its first part, a split model
// is one gguf_file whose tensors point into the part (mapping) that holds them, so the rest of the
// engine reads it like a whole file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "engine/io/gguf.h"

namespace hearth {

inline constexpr std::string_view gguf_split_key_no = "split.no";
inline constexpr std::string_view gguf_split_key_count = "split.count";
inline constexpr std::string_view gguf_split_key_tensors = "split.tensors.count";

// What a part's file name says: PREFIX-NNNNN-of-MMMMM.gguf, five digits each, as gguf-split names
// them (NNNNN is 1-based).
struct gguf_split_name {
  std::string prefix;  // the path up to "-NNNNN-of-MMMMM.gguf"
  uint32_t no = 0;     // 0-based, as split.no
  uint32_t count = 0;  // MMMMM
};

// Nothing when `path` is not named like a part (or names part 0, or a part past the count).
std::optional<gguf_split_name> gguf_split_name_parse(std::string_view path);

// PREFIX-NNNNN-of-MMMMM.gguf for the 0-based part `no`.
std::string gguf_split_path(std::string_view prefix, uint32_t no, uint32_t count);

// True for the second and later parts of a split: a models folder lists the model once, by its
// first part, and never these.
bool gguf_split_is_later_part(std::string_view path);

// The name a models folder gives the GGUF model at `path`: the file name without ".gguf", and
// for a split's part without "-NNNNN-of-MMMMM" too ("qwen3-30b-a3b-q4_k_m").
std::string gguf_model_name(std::string_view path);

// The files the GGUF model at `path` is read from, by their names alone: every part of a split
// named by its first part, else `path` itself. What a change to the model is watched on.
std::vector<std::string> gguf_model_paths(const std::string& path);

// The first part of the one split model a folder holds (a model store's view of a split model:
// a folder of its parts), or nothing when it holds no first part or several.
std::optional<std::string> gguf_split_first_part_in(const std::string& dir);

// A GGUF model opened from disk: one file, or every part of a split.
struct gguf_model {
  gguf_file gguf;                  // a split's parts joined (without the split.* keys)
  std::vector<std::string> paths;  // the files read, the first part first
  uint64_t file_bytes = 0;         // their sizes added
};

// Opens `path`: a GGUF file without split.count (or with a count of 0 or 1) is the whole model;
// one with a count of N > 1 must be the first part, named PREFIX-00001-of-0000N.gguf, and its
// N - 1 other parts are opened beside it by the same pattern. An error names the file at fault:
// a part missing, not parsing, of another split (its split.count), out of place (its split.no).
result<gguf_model> gguf_model_open(const std::string& path);

// Joins the parts of one split, parsed, in order (`names[k]` names parts[k] in errors): checks
// every part's split.count (the number of parts) and split.no (its place), that no tensor is in
// two parts, and that the parts' tensors add up to the first part's split.tensors.count. The
// result keeps every part alive. Untrusted bytes: returns errors, never throws.
result<gguf_file> gguf_split_join(std::vector<gguf_file> parts,
                                  const std::vector<std::string>& names);

// Writes `src` as gguf-split does with --split-max-tensors: parts of at most `max_tensors`
// tensors each, in `src`'s tensor order, at gguf_split_path(prefix, k, n); the first part holds
// `src`'s metadata. Returns the paths written; on an error none of the parts is left. A file that
// fits in one part is written as a split of one (split.count 1), as gguf-split does.
result<std::vector<std::string>> gguf_split_write(const gguf_file& src, const std::string& prefix,
                                                  uint32_t max_tensors);

}  // namespace hearth
