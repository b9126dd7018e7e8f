#include "engine/io/gguf-split.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <unordered_map>

#include "engine/io/gguf-writer.h"

namespace hearth {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view k_split_ext = ".gguf";
// "-NNNNN-of-MMMMM.gguf"
constexpr size_t k_split_suffix_len = 1 + 5 + 4 + 5 + k_split_ext.size();

bool split_digits(std::string_view s, uint32_t* out) {
  if (s.size() != 5 ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  return std::from_chars(s.data(), s.data() + s.size(), *out).ec == std::errc{};
}

bool is_split_key(std::string_view key) {
  return key == gguf_split_key_no || key == gguf_split_key_count || key == gguf_split_key_tensors;
}

// A part's split.<key> as an unsigned number; `what` says which part in the error.
result<uint64_t> split_uint(const gguf_file& f, std::string_view key, const std::string& name) {
  auto v = f.get_uint(key);
  if (!v) return error{name + ": " + v.message()};
  if (!*v) return error{name + ": no " + std::string(key) + " (not a part of a split model)"};
  return **v;
}

}  // namespace

std::optional<gguf_split_name> gguf_split_name_parse(std::string_view path) {
  if (path.size() < k_split_suffix_len || !path.ends_with(k_split_ext)) return std::nullopt;
  const std::string_view suffix = path.substr(path.size() - k_split_suffix_len);
  if (suffix[0] != '-' || suffix.substr(6, 4) != "-of-") return std::nullopt;
  gguf_split_name n;
  uint32_t no_1 = 0;
  if (!split_digits(suffix.substr(1, 5), &no_1) || !split_digits(suffix.substr(10, 5), &n.count))
    return std::nullopt;
  if (no_1 == 0 || no_1 > n.count) return std::nullopt;
  n.no = no_1 - 1;
  n.prefix = std::string(path.substr(0, path.size() - k_split_suffix_len));
  return n;
}

std::string gguf_split_path(std::string_view prefix, uint32_t no, uint32_t count) {
  char suffix[48];
  std::snprintf(suffix, sizeof suffix, "-%05u-of-%05u.gguf", no + 1, count);
  return std::string(prefix) + suffix;
}

bool gguf_split_is_later_part(std::string_view path) {
  const auto n = gguf_split_name_parse(path);
  return n && n->no > 0;
}

std::string gguf_model_name(std::string_view path) {
  const auto n = gguf_split_name_parse(path);
  return n ? fs::path(n->prefix).filename().string() : fs::path(path).stem().string();
}

std::vector<std::string> gguf_model_paths(const std::string& path) {
  const auto n = gguf_split_name_parse(path);
  if (!n || n->no != 0 || n->count < 2) return {path};
  std::vector<std::string> out;
  for (uint32_t k = 0; k < n->count; ++k) out.push_back(gguf_split_path(n->prefix, k, n->count));
  return out;
}

std::optional<std::string> gguf_split_first_part_in(const std::string& dir) {
  std::optional<std::string> first;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string p = it->path().string();
    const auto n = gguf_split_name_parse(p);
    if (!n || n->no != 0) continue;
    if (first) return std::nullopt;  // two models: which one the folder is would be a guess
    first = p;
  }
  return ec ? std::nullopt : first;
}

result<gguf_file> gguf_split_join(std::vector<gguf_file> parts,
                                  const std::vector<std::string>& names) {
  if (parts.empty() || names.size() != parts.size()) return error{"a split model needs its parts"};
  const uint64_t n_parts = parts.size();
  auto total = split_uint(parts[0], gguf_split_key_tensors, names[0]);
  if (!total) return total.err();
  std::unordered_map<std::string_view, size_t> part_of;  // tensor name -> part
  std::vector<gguf_tensor> tensors;
  for (size_t k = 0; k < parts.size(); ++k) {
    const gguf_file& p = parts[k];
    auto count = split_uint(p, gguf_split_key_count, names[k]);
    if (!count) return count.err();
    if (*count != n_parts) {
      return error{names[k] + ": split.count is " + std::to_string(*count) +
                   ", but the model has " + std::to_string(n_parts) +
                   " parts (a part of another split?)"};
    }
    auto no = split_uint(p, gguf_split_key_no, names[k]);
    if (!no) return no.err();
    if (*no != k) {
      return error{names[k] + ": split.no is " + std::to_string(*no) + ", but the file is part " +
                   std::to_string(k + 1) + " of " + std::to_string(n_parts) + " (split.no " +
                   std::to_string(k) + ")"};
    }
    // Later parts repeat the total; one that disagrees belongs to another split.
    if (auto t = p.get_uint(gguf_split_key_tensors); t && *t && **t != *total) {
      return error{names[k] + ": split.tensors.count is " + std::to_string(**t) +
                   ", but the first part says " + std::to_string(*total) +
                   " (a part of another split?)"};
    }
    if (p.tensors().size() > *total - std::min<uint64_t>(*total, tensors.size())) {
      return error{names[k] + ": the parts so far hold more than the " + std::to_string(*total) +
                   " tensors of split.tensors.count"};
    }
    for (const auto& t : p.tensors()) {
      const auto [it, fresh] = part_of.emplace(t.name, k);
      if (!fresh) {
        return error{names[k] + ": tensor '" + t.name + "' is also in " + names[it->second]};
      }
      tensors.push_back(t);
    }
  }
  if (tensors.size() != *total) {
    // Which part lacks tensors is not known, so every part's count is said.
    std::string per_part;
    for (size_t k = 0; k < parts.size(); ++k) {
      per_part += (k ? ", " : "") + names[k] + ": " + std::to_string(parts[k].tensors().size());
    }
    return error{names[0] + ": split.tensors.count is " + std::to_string(*total) +
                 ", but the parts hold " + std::to_string(tensors.size()) + " tensors (" +
                 per_part + ")"};
  }
  std::vector<gguf_kv> kv;
  for (const auto& e : parts[0].metadata()) {
    // The joined file is a whole model: a writer copying its metadata must not make a file
    // that claims to be part 1 of N.
    if (!is_split_key(e.key)) kv.push_back(e);
  }
  auto owner = std::make_shared<const std::vector<gguf_file>>(std::move(parts));
  // `tensors` point into the parts' mappings, which `owner` keeps alive (moving a gguf_file
  // moves its owner, not the mapped bytes).
  return gguf_file::from_parts(std::move(kv), std::move(tensors), std::move(owner));
}

result<gguf_model> gguf_model_open(const std::string& path) {
  auto first = gguf_file::open(path);
  if (!first) return first.err();
  gguf_model m;
  m.paths = {path};
  m.file_bytes = first->file_size();
  auto count = first->get_uint(gguf_split_key_count);
  if (!count) return error{path + ": " + count.message()};
  if (!*count || **count <= 1) {
    m.gguf = std::move(first).value();
    return m;
  }
  const uint64_t n = **count;
  auto no = first->get_uint(gguf_split_key_no);
  if (!no) return error{path + ": " + no.message()};
  const auto name = gguf_split_name_parse(path);
  if (*no && **no != 0) {
    const std::string first_path =
        name ? gguf_split_path(name->prefix, 0, uint32_t(n)) : std::string("its first part");
    return error{path + " is part " + std::to_string(**no + 1) + " of " + std::to_string(n) +
                 " of a split model: open " + first_path};
  }
  if (!name || name->no != 0 || name->count != n) {
    // The other parts are found by the first one's name, as the reference engine finds them.
    return error{path + ": the first part of a split model of " + std::to_string(n) +
                 " parts (split.count), but not named " +
                 gguf_split_path("PREFIX", 0, uint32_t(n)) +
                 ", so its other parts cannot be found"};
  }
  std::vector<gguf_file> parts;
  parts.push_back(std::move(first).value());
  for (uint32_t k = 1; k < n; ++k) {
    const std::string p = gguf_split_path(name->prefix, k, uint32_t(n));
    std::error_code ec;
    if (!fs::exists(p, ec)) {
      return error{path + ": part " + std::to_string(k + 1) + " of " + std::to_string(n) +
                   " of the split model, " + p + ", is missing"};
    }
    auto part = gguf_file::open(p);
    if (!part)
      return error{"part " + std::to_string(k + 1) + " of " + path + ": " + part.message()};
    m.file_bytes += part->file_size();
    m.paths.push_back(p);
    parts.push_back(std::move(part).value());
  }
  auto joined = gguf_split_join(std::move(parts), m.paths);
  if (!joined) return joined.err();
  m.gguf = std::move(joined).value();
  return m;
}

result<std::vector<std::string>> gguf_split_write(const gguf_file& src, const std::string& prefix,
                                                  uint32_t max_tensors) {
  if (max_tensors == 0) return error{"a split part must hold at least one tensor"};
  const auto& tensors = src.tensors();
  const uint64_t n_parts = std::max<uint64_t>(1, (tensors.size() + max_tensors - 1) / max_tensors);
  if (n_parts > 65535) {  // split.count is a u16
    return error{"splitting " + std::to_string(tensors.size()) + " tensors " +
                 std::to_string(max_tensors) + " a part makes more than 65535 parts"};
  }
  if (tensors.size() > uint64_t(std::numeric_limits<int32_t>::max()))
    return error{"too many tensors for split.tensors.count (an i32)"};
  std::vector<std::string> written;
  auto undo = [&](const std::string& why) {
    for (const auto& p : written) std::filesystem::remove(p);
    return error{why};
  };
  try {
    for (uint64_t k = 0; k < n_parts; ++k) {
      gguf_writer w;
      if (k == 0) w.copy_metadata_from(src);
      w.set_u16(std::string(gguf_split_key_no), uint16_t(k));
      w.set_u16(std::string(gguf_split_key_count), uint16_t(n_parts));
      w.set_i32(std::string(gguf_split_key_tensors), int32_t(tensors.size()));
      const size_t end = std::min<size_t>(tensors.size(), (k + 1) * max_tensors);
      for (size_t i = k * max_tensors; i < end; ++i) {
        const gguf_tensor& t = tensors[i];
        const std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
        // Copied from the mapping as the part is written: one tensor in memory at a time.
        w.add_tensor_lazy(t.name, t.type, ne, [&t](std::span<uint8_t> out) {
          std::memcpy(out.data(), t.data, out.size());
        });
      }
      const std::string path = gguf_split_path(prefix, uint32_t(k), uint32_t(n_parts));
      auto r = w.write_file(path);
      if (!r) return undo(r.message());
      written.push_back(path);
    }
  } catch (const std::invalid_argument& e) {
    // A source file the writer cannot write back (a tensor name too long, ...).
    return undo(e.what());
  }
  return written;
}

}  // namespace hearth
