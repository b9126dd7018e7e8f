// libFuzzer target for the GGUF reader (engine/io/gguf.cpp). Any input must parse or give an error
// (never crash, leak, hang or throw). A file that parses must also keep the reader's promises,
// checked here beyond what the sanitizers see: every tensor lies inside the data section, sizes
// match type and shape, getters agree with the values, and writing the file back with
// gguf_writer and parsing that gives the same metadata and tensors. It is also joined as the parts
// of a split model (engine/io/gguf-split.cpp), which must keep its promises or say why not.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "engine/io/gguf-split.h"
#include "engine/io/gguf-writer.h"
#include "engine/io/gguf.h"
#include "fuzz/fuzz-check.h"
#include "tests/gguf-value-diff.h"

namespace {

using namespace hearth;

// Visits every item so that a value's shape is fully read; returns the number of values.
size_t count_values(const gguf_value& v) {
  FUZZ_CHECK(gguf_value_type_name(v.type) != "unknown");
  if (v.type != gguf_value_type::array) {
    FUZZ_CHECK(v.items.empty());
    return 1;
  }
  size_t n = 1;
  for (const auto& item : v.items) {
    FUZZ_CHECK(item.type == v.elem_type);
    n += count_values(item);
  }
  return n;
}

void check_getters(const gguf_file& g, const gguf_kv& kv) {
  // A present key either reads or reports an error naming the key; never "absent".
  auto check = [&](const auto& r) {
    if (r.ok()) {
      FUZZ_CHECK(r.value().has_value());
    } else {
      FUZZ_CHECK(r.message().find(kv.key) != std::string::npos);
    }
  };
  check(g.get_uint(kv.key));
  check(g.get_float(kv.key));
  check(g.get_bool(kv.key));
  check(g.get_string(kv.key));
  check(g.get_string_array(kv.key));
  check(g.get_float_array(kv.key));
  check(g.get_int_array(kv.key));

  if (kv.value.type == gguf_value_type::string) {
    FUZZ_CHECK(g.get_string(kv.key).value().value() == kv.value.str);
  }
  if (kv.value.type == gguf_value_type::boolean) {
    FUZZ_CHECK(kv.value.u <= 1);
    FUZZ_CHECK(g.get_bool(kv.key).value().value() == (kv.value.u == 1));
  }
  if (kv.value.type == gguf_value_type::array && kv.value.elem_type == gguf_value_type::string) {
    FUZZ_CHECK(g.get_string_array(kv.key).value()->size() == kv.value.items.size());
  }
}

void check_tensors(const gguf_file& g, const uint8_t* data, size_t size) {
  FUZZ_CHECK(g.alignment() != 0 && (g.alignment() & (g.alignment() - 1)) == 0);
  FUZZ_CHECK(g.data_offset() % g.alignment() == 0);
  volatile uint8_t sink = 0;
  for (const auto& t : g.tensors()) {
    FUZZ_CHECK(g.find_tensor(t.name) == &t);
    FUZZ_CHECK(t.n_dims >= 1 && t.n_dims <= 4);
    const auto layout = tensor_type_layout_of(uint32_t(t.type));
    FUZZ_CHECK(layout.has_value());
    int64_t n_el = 1;
    for (int d = 0; d < 4; ++d) {
      FUZZ_CHECK(t.ne[d] >= 1);
      FUZZ_CHECK(d < t.n_dims || t.ne[d] == 1);
      FUZZ_CHECK(!__builtin_mul_overflow(n_el, t.ne[d], &n_el));
    }
    FUZZ_CHECK(n_el == t.n_elements());
    FUZZ_CHECK(t.ne[0] % layout->block_elems == 0);
    FUZZ_CHECK(t.n_bytes == uint64_t(tensor_type_row_bytes(t.type, t.ne[0])) *
                                uint64_t(t.ne[1] * t.ne[2] * t.ne[3]));
    FUZZ_CHECK(t.offset % g.alignment() == 0);
    FUZZ_CHECK(t.data == data + g.data_offset() + t.offset);
    FUZZ_CHECK(t.data >= data + g.data_offset());
    FUZZ_CHECK(t.n_bytes <= size_t(data + size - t.data));
    (void)t.shape_string();
    sink = sink + t.data[0] + t.data[t.n_bytes - 1];  // ASan checks these are ours
  }
}

// Writing the parsed file back and parsing that must reproduce it.
void check_round_trip(const gguf_file& g) {
  gguf_writer w;
  try {
    w.copy_metadata_from(g);
    for (const auto& t : g.tensors()) {
      w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims),
                   std::span<const uint8_t>(t.data, t.n_bytes));
    }
  } catch (const std::invalid_argument&) {
    // The reader accepts names the writer refuses (empty, or 64 bytes and longer, which
    // llama.cpp cannot load); nothing else may be refused.
    bool odd_name = false;
    for (const auto& t : g.tensors()) odd_name |= t.name.empty() || t.name.size() >= 64;
    FUZZ_CHECK(odd_name);
    return;
  }
  const std::vector<uint8_t> bytes = w.to_bytes();
  auto again = gguf_file::parse({bytes.data(), bytes.size()});
  if (!again) {
    std::fprintf(stderr, "rewritten file does not parse: %s\n", again.message().c_str());
    std::abort();
  }
  FUZZ_CHECK(again->alignment() == g.alignment());
  FUZZ_CHECK(again->metadata().size() == g.metadata().size());
  for (size_t k = 0; k < g.metadata().size(); ++k) {
    FUZZ_CHECK(again->metadata()[k].key == g.metadata()[k].key);
    FUZZ_CHECK(
        testing::gguf_value_difference(again->metadata()[k].value, g.metadata()[k].value).empty());
  }
  FUZZ_CHECK(again->tensors().size() == g.tensors().size());
  for (size_t k = 0; k < g.tensors().size(); ++k) {
    const gguf_tensor& a = again->tensors()[k];
    const gguf_tensor& b = g.tensors()[k];
    FUZZ_CHECK(a.name == b.name && a.type == b.type && a.n_dims == b.n_dims);
    FUZZ_CHECK(std::memcmp(a.ne, b.ne, sizeof(a.ne)) == 0);
    FUZZ_CHECK(a.n_bytes == b.n_bytes && std::memcmp(a.data, b.data, a.n_bytes) == 0);
  }
}

// The file as the one part of a split, and as both parts of a split of two (never a model: both
// would claim the same split.no, and hold the same tensors).
void check_split_join(const gguf_file& g) {
  auto one = gguf_split_join({g}, {"part"});
  if (one) {
    FUZZ_CHECK(one->tensors().size() == g.tensors().size());
    FUZZ_CHECK(one->find("split.count") == nullptr && one->find("split.no") == nullptr);
    for (const auto& t : one->tensors()) {
      const gguf_tensor* in = g.find_tensor(t.name);
      FUZZ_CHECK(in && in->data == t.data && in->n_bytes == t.n_bytes);
    }
  } else {
    FUZZ_CHECK(!one.message().empty());
  }
  auto two = gguf_split_join({g, g}, {"part0", "part1"});
  FUZZ_CHECK(!two.ok() && !two.message().empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto g = gguf_file::parse({data, size});
  if (!g) {
    FUZZ_CHECK(!g.message().empty());
    return 0;
  }
  FUZZ_CHECK(g->version() == 2 || g->version() == 3);
  FUZZ_CHECK(g->file_size() == size);
  for (const auto& kv : g->metadata()) {
    FUZZ_CHECK(g->find(kv.key) == &kv.value);  // keys are unique
    count_values(kv.value);
    check_getters(*g, kv);
  }
  check_tensors(*g, data, size);
  check_round_trip(*g);
  check_split_join(*g);
  return 0;
}
