// libFuzzer target for the safetensors reader (engine/io/safetensors.cpp). Any input must parse or
// give an error (never crash, leak, hang or throw). A file that parses must also keep the
// reader's promises, checked here beyond what the sanitizers see: the tensors cover the data
// section exactly, in offset order, each size matching dtype × shape and lying inside the input;
// and writing the file back with safetensors_writer and parsing that gives the same header
// values and bytes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "engine/io/safetensors.h"
#include "fuzz/fuzz-check.h"

namespace {

using namespace hearth;

void check_tensors(const safetensors_file& f, const uint8_t* data, size_t size) {
  FUZZ_CHECK(f.file_size() == size);
  FUZZ_CHECK(8 + f.header_size() <= size);
  const uint8_t* section = data + 8 + f.header_size();
  uint64_t covered = 0;
  volatile uint8_t sink = 0;
  for (const auto& t : f.tensors()) {
    FUZZ_CHECK(f.find(t.name) != nullptr && f.find(t.name)->name == t.name);
    const auto size_of = safetensors_dtype_size(t.dtype);
    FUZZ_CHECK(size_of.has_value());
    FUZZ_CHECK(t.type == safetensors_dtype_type(t.dtype));
    int64_t n = 1;
    for (const int64_t d : t.shape) {
      FUZZ_CHECK(d >= 0);
      FUZZ_CHECK(!__builtin_mul_overflow(n, d, &n));
    }
    FUZZ_CHECK(n == t.n_elements());
    FUZZ_CHECK(t.n_bytes == uint64_t(n) * uint64_t(*size_of));
    FUZZ_CHECK(t.offset == covered);  // in order, no holes, no overlaps
    FUZZ_CHECK(t.data == section + t.offset);
    covered += t.n_bytes;
    FUZZ_CHECK(covered <= size - 8 - f.header_size());
    (void)t.shape_string();
    if (t.n_bytes > 0) sink = sink + t.data[0] + t.data[t.n_bytes - 1];  // ASan checks these
  }
  FUZZ_CHECK(covered == size - 8 - f.header_size());
}

// Writing the parsed file back and parsing that must reproduce it.
void check_round_trip(const safetensors_file& f) {
  safetensors_writer w;
  try {
    for (const auto& [k, v] : f.metadata()) w.set_metadata(k, v);
    for (const auto& t : f.tensors()) {
      if (!t.type) return;  // the writer holds only the types the engine reads
      w.add_tensor(t.name, *t.type, t.shape, {t.data, t.n_bytes});
    }
  } catch (const std::invalid_argument&) {
    // The reader accepts the empty name, which the writer refuses; nothing else may be refused.
    bool empty_name = false;
    for (const auto& t : f.tensors()) empty_name |= t.name.empty();
    FUZZ_CHECK(empty_name);
    return;
  }
  auto bytes = w.to_bytes();
  FUZZ_CHECK(bytes.ok());
  auto again = safetensors_file::parse(*bytes);
  if (!again) {
    std::fprintf(stderr, "rewritten file does not parse: %s\n", again.message().c_str());
    std::abort();
  }
  FUZZ_CHECK(again->metadata() == f.metadata());
  FUZZ_CHECK(again->tensors().size() == f.tensors().size());
  for (const auto& t : f.tensors()) {
    const safetensors_tensor* a = again->find(t.name);
    FUZZ_CHECK(a != nullptr);
    FUZZ_CHECK(a->dtype == t.dtype && a->shape == t.shape && a->n_bytes == t.n_bytes);
    FUZZ_CHECK(t.n_bytes == 0 || std::memcmp(a->data, t.data, t.n_bytes) == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = safetensors_file::parse({data, size});
  if (!f) {
    FUZZ_CHECK(!f.message().empty());
    return 0;
  }
  check_tensors(*f, data, size);
  check_round_trip(*f);
  return 0;
}
