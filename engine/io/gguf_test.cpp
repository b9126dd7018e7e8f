// GGUF reader and writer: round trips through gguf_writer, real files, and hostile input that
// must be refused with an error naming the problem (never a crash or an exception).
#include "engine/io/gguf.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/io/gguf-writer.h"
#include "tests/gguf-value-diff.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

// --- value builders --------------------------------------------------------------------------

// `depth` arrays nested in one another around a single u8.
gguf_value nested_arrays(int depth) {
  gguf_value v = gguf_value_of_u(gguf_value_type::u8, 7);
  for (int d = 0; d < depth; ++d) {
    const gguf_value_type elem = v.type;
    v = gguf_value_of_array(elem, {v});
  }
  return v;
}

// Deep equality of the fields that matter for the value's type.
::testing::AssertionResult same_value(const gguf_value& a, const gguf_value& b) {
  const std::string d = testing::gguf_value_difference(a, b);
  if (!d.empty()) return ::testing::AssertionFailure() << d;
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_metadata(const std::vector<gguf_kv>& a,
                                         const std::vector<gguf_kv>& b) {
  if (a.size() != b.size()) {
    return ::testing::AssertionFailure() << a.size() << " keys vs " << b.size();
  }
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k].key != b[k].key) {
      return ::testing::AssertionFailure() << "key " << k << ": " << a[k].key << " vs " << b[k].key;
    }
    auto r = same_value(a[k].value, b[k].value);
    if (!r) return r << " (key " << a[k].key << ")";
  }
  return ::testing::AssertionSuccess();
}

// The parsed file points into `bytes`, which must outlive it (hence no temporaries).
result<gguf_file> parse(const std::vector<uint8_t>& bytes) {
  return gguf_file::parse({bytes.data(), bytes.size()});
}
result<gguf_file> parse(std::vector<uint8_t>&& bytes) = delete;

// Parsing must fail (not throw) with a message holding every one of `parts`.
::testing::AssertionResult refused(const std::vector<uint8_t>& bytes,
                                   std::initializer_list<std::string_view> parts) {
  result<gguf_file> r = error{""};
  try {
    r = parse(bytes);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "parse threw: " << e.what();
  }
  if (r) return ::testing::AssertionFailure() << "parse accepted the file";
  for (auto part : parts) {
    if (r.message().find(part) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "error \"" << r.message() << "\" lacks \"" << part << "\"";
    }
  }
  return ::testing::AssertionSuccess() << r.message();
}

std::vector<uint8_t> pattern_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = uint8_t(rng());
  return b;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Byte position of the first occurrence of `needle` (which the test knows is present once).
size_t find_bytes(const std::vector<uint8_t>& hay, std::string_view needle) {
  for (size_t k = 0; k + needle.size() <= hay.size(); ++k) {
    if (std::memcmp(hay.data() + k, needle.data(), needle.size()) == 0) return k;
  }
  ADD_FAILURE() << "'" << needle << "' not found";
  return 0;
}

template <typename T>
void poke(std::vector<uint8_t>& b, size_t at, T v) {
  ASSERT_LE(at + sizeof(T), b.size());
  std::memcpy(b.data() + at, &v, sizeof(T));
}

// Raw little-endian bytes for headers the writer would never produce.
struct raw_gguf {
  std::vector<uint8_t> b;

  template <typename T>
  raw_gguf& put(T v) {
    return append(&v, sizeof(T));
  }
  raw_gguf& str(std::string_view s) {
    put<uint64_t>(s.size());
    return append(s.data(), s.size());
  }
  raw_gguf& append(const void* p, size_t n) {
    const size_t at = b.size();
    b.resize(at + n);
    if (n) std::memcpy(b.data() + at, p, n);
    return *this;
  }
  raw_gguf& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return put<uint32_t>(0x46554747)
        .put<uint32_t>(version)
        .put<uint64_t>(n_tensors)
        .put<uint64_t>(n_kv);
  }
  // A tensor description: name, dims, type id, data offset.
  raw_gguf& tensor(std::string_view name, std::vector<uint64_t> ne, uint32_t type,
                   uint64_t offset) {
    str(name).put<uint32_t>(uint32_t(ne.size()));
    for (uint64_t n : ne) put<uint64_t>(n);
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
  raw_gguf& pad_to(size_t alignment) {
    b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
    return *this;
  }
  raw_gguf& zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
};

// Touches everything a consumer might: every getter on every key, every tensor's bytes.
void walk(const gguf_file& g) {
  for (const auto& kv : g.metadata()) {
    (void)g.get_uint(kv.key);
    (void)g.get_float(kv.key);
    (void)g.get_bool(kv.key);
    (void)g.get_string(kv.key);
    (void)g.get_string_array(kv.key);
    (void)g.get_float_array(kv.key);
    (void)g.get_int_array(kv.key);
  }
  volatile uint8_t sink = 0;
  for (const auto& t : g.tensors()) {
    (void)t.shape_string();
    sink = sink + t.data[0] + t.data[t.n_bytes - 1];
  }
}

// A small file of two kv pairs and three tensors (f32, f16, q8_0) whose data ends exactly at
// an alignment boundary, so that every strict prefix is missing bytes the reader needs.
gguf_writer small_writer() {
  gguf_writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.context_length", 128);
  w.add_tensor("a.f32", tensor_type::f32, {4, 2}, f32_bytes({1, 2, 3, 4, 5, 6, 7, 8}));
  w.add_tensor("b.q8_0", tensor_type::q8_0, {32}, pattern_bytes(34, 1));
  w.add_tensor("c.f16", tensor_type::f16, {16}, pattern_bytes(32, 2));
  return w;
}

// --- writer round trips ----------------------------------------------------------------------

TEST(gguf_writer, every_value_type_round_trips) {
  gguf_writer w;
  w.set_u8("t.u8", 255);
  w.set_i8("t.i8", -128);
  w.set_u16("t.u16", 65535);
  w.set_i16("t.i16", -32768);
  w.set_u32("t.u32", 4294967295u);
  w.set_i32("t.i32", std::numeric_limits<int32_t>::min());
  w.set_u64("t.u64", std::numeric_limits<uint64_t>::max());
  w.set_i64("t.i64", std::numeric_limits<int64_t>::min());
  w.set_f32("t.f32", 0.15625f);
  w.set_f64("t.f64", -1.0 / 3.0);
  w.set_bool("t.true", true);
  w.set_bool("t.false", false);
  w.set_string("t.string", std::string("na\0me \xc3\xa9", 8));
  w.set_string("t.empty", "");
  w.set_string_array("t.strings", {"<s>", "", "\xe2\x96\x81the"});
  w.set_f32_array("t.floats", {-1.5f, 0.0f, 3.25f});
  w.set_i32_array("t.ints", {-7, 0, 2147483647});
  w.set("t.u16s",
        gguf_value_of_array(gguf_value_type::u16, {gguf_value_of_u(gguf_value_type::u16, 1),
                                                   gguf_value_of_u(gguf_value_type::u16, 65535)}));
  w.set("t.bools", gguf_value_of_array(gguf_value_type::boolean,
                                       {gguf_value_of_u(gguf_value_type::boolean, 1),
                                        gguf_value_of_u(gguf_value_type::boolean, 0)}));
  w.set("t.f64s",
        gguf_value_of_array(gguf_value_type::f64, {gguf_value_of_f(gguf_value_type::f64, 1e300)}));
  w.set("t.i64s",
        gguf_value_of_array(gguf_value_type::i64, {gguf_value_of_i(gguf_value_type::i64, -1)}));
  w.set("t.empty_array", gguf_value_of_array(gguf_value_type::u32, {}));
  w.set("t.nested",
        gguf_value_of_array(
            gguf_value_type::array,
            {gguf_value_of_array(gguf_value_type::string,
                                 {gguf_value_of_string("x"), gguf_value_of_string("yz")}),
             gguf_value_of_array(gguf_value_type::i8, {gguf_value_of_i(gguf_value_type::i8, -3)}),
             gguf_value_of_array(gguf_value_type::f32, {})}));
  w.set("t.deepest", nested_arrays(4));  // the deepest nesting the reader accepts

  const std::vector<uint8_t> bytes = w.to_bytes();
  auto g = parse(bytes);
  ASSERT_TRUE(g) << g.message();
  EXPECT_EQ(g->version(), 3u);
  EXPECT_EQ(g->tensors().size(), 0u);
  EXPECT_TRUE(same_metadata(w.metadata(), g->metadata()));
  ASSERT_EQ(g->metadata().size(), 24u);
  EXPECT_EQ(g->metadata()[0].key, "t.u8");  // insertion order
  EXPECT_EQ(g->metadata()[23].key, "t.deepest");

  EXPECT_EQ(g->get_uint("t.u64").value(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(g->get_uint("t.u8").value(), 255u);
  EXPECT_EQ(g->get_float("t.f32").value(), 0.15625);
  EXPECT_EQ(g->get_float("t.i16").value(), -32768.0);
  EXPECT_EQ(g->get_bool("t.true").value(), true);
  EXPECT_EQ(g->get_bool("t.false").value(), false);
  EXPECT_EQ(g->get_string("t.string").value(), std::string("na\0me \xc3\xa9", 8));
  EXPECT_EQ(g->get_string_array("t.strings").value(),
            (std::vector<std::string>{"<s>", "", "\xe2\x96\x81the"}));
  EXPECT_EQ(g->get_float_array("t.floats").value(), (std::vector<double>{-1.5, 0.0, 3.25}));
  EXPECT_EQ(g->get_int_array("t.ints").value(), (std::vector<int64_t>{-7, 0, 2147483647}));
  EXPECT_EQ(g->get_int_array("t.u16s").value(), (std::vector<int64_t>{1, 65535}));
  EXPECT_FALSE(g->get_uint("absent").value().has_value());
  EXPECT_FALSE(g->get_string_array("absent").value().has_value());
}

TEST(gguf_writer, setting_a_key_again_replaces_it_in_place) {
  gguf_writer w;
  w.set_u32("a", 1);
  w.set_string("b", "x");
  w.set_f32("a", 2.5f);
  ASSERT_EQ(w.metadata().size(), 2u);
  const auto bytes = w.to_bytes();
  auto g = parse(bytes);
  ASSERT_TRUE(g) << g.message();
  ASSERT_EQ(g->metadata().size(), 2u);
  EXPECT_EQ(g->metadata()[0].key, "a");
  EXPECT_EQ(g->get_float("a").value(), 2.5);
  EXPECT_EQ(g->metadata()[1].key, "b");
}

class gguf_writer_alignment : public ::testing::TestWithParam<uint32_t> {};

TEST_P(gguf_writer_alignment, tensors_round_trip) {
  const uint32_t align = GetParam();
  gguf_writer w;
  if (align != 32) w.set_alignment(align);
  w.set_string("general.name", "tensors");
  const auto f32 = f32_bytes(
      {1, -2, 3.5f, 0, 1e-8f, -0.0f, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21});
  const auto f16 = pattern_bytes(2 * 16 * 3, 10);
  const auto q8 = pattern_bytes(34 * 2 * 5, 11);  // 64 x 5 values in 32-value blocks
  w.add_tensor("t.f32", tensor_type::f32, {7, 3}, f32);
  w.add_tensor("t.f16", tensor_type::f16, {16, 3}, f16);
  w.add_tensor("t.q8_0", tensor_type::q8_0, {64, 5, 1, 1}, q8);
  EXPECT_EQ(w.alignment(), align);

  const std::vector<uint8_t> bytes = w.to_bytes();
  EXPECT_EQ(bytes.size() % align, 0u);
  auto g = parse(bytes);
  ASSERT_TRUE(g) << g.message();
  EXPECT_EQ(g->alignment(), align);
  EXPECT_EQ(g->data_offset() % align, 0u);
  EXPECT_EQ(g->get_string("general.name").value(), "tensors");
  ASSERT_EQ(g->tensors().size(), 3u);

  struct expected {
    const char* name;
    tensor_type type;
    int n_dims;
    std::vector<int64_t> ne;
    const std::vector<uint8_t>* data;
  };
  const expected want[] = {{"t.f32", tensor_type::f32, 2, {7, 3, 1, 1}, &f32},
                           {"t.f16", tensor_type::f16, 2, {16, 3, 1, 1}, &f16},
                           {"t.q8_0", tensor_type::q8_0, 4, {64, 5, 1, 1}, &q8}};
  for (size_t k = 0; k < 3; ++k) {
    const gguf_tensor& t = g->tensors()[k];
    SCOPED_TRACE(want[k].name);
    EXPECT_EQ(t.name, want[k].name);
    EXPECT_EQ(t.type, want[k].type);
    EXPECT_EQ(t.n_dims, want[k].n_dims);
    EXPECT_EQ(std::vector<int64_t>(t.ne, t.ne + 4), want[k].ne);
    EXPECT_EQ(t.offset % align, 0u);
    ASSERT_EQ(t.n_bytes, want[k].data->size());
    EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.n_bytes), *want[k].data);
    EXPECT_EQ(g->find_tensor(want[k].name), &t);
  }
  EXPECT_EQ(g->find_tensor("t.missing"), nullptr);
}

INSTANTIATE_TEST_SUITE_P(alignments, gguf_writer_alignment, ::testing::Values(32u, 64u, 1u, 256u));

TEST(gguf_writer, move_overload_takes_the_bytes) {
  gguf_writer w;
  std::vector<uint8_t> data = f32_bytes({1, 2, 3, 4});
  w.add_tensor("t", tensor_type::f32, {4}, std::move(data));
  const auto bytes = w.to_bytes();
  auto g = parse(bytes);
  ASSERT_TRUE(g) << g.message();
  ASSERT_EQ(g->tensors().size(), 1u);
  EXPECT_EQ(std::vector<uint8_t>(g->tensors()[0].data, g->tensors()[0].data + 16),
            f32_bytes({1, 2, 3, 4}));
}

TEST(gguf_writer, write_file_renames_into_place) {
  const std::string dir = ::testing::TempDir() + "gguf_writer_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/small.gguf";
  const gguf_writer w = small_writer();
  auto written = w.write_file(path);
  ASSERT_TRUE(written) << written.message();
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(hearth::testing::read_file_bytes(path), w.to_bytes());
  auto g = gguf_file::open(path);
  ASSERT_TRUE(g) << g.message();
  EXPECT_EQ(g->tensors().size(), 3u);

  auto bad = w.write_file(dir + "/no/such/dir/x.gguf");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find(dir + "/no/such/dir/x.gguf.tmp"), std::string::npos)
      << bad.message();
  std::filesystem::remove_all(dir);
}

TEST(gguf_writer, programmer_errors_throw) {
  gguf_writer w;
  const auto f32x4 = f32_bytes({1, 2, 3, 4});
  EXPECT_THROW(w.add_tensor("t", tensor_type::f32, {5}, f32x4), std::invalid_argument);
  EXPECT_THROW(w.add_tensor("t", tensor_type::f32, {4, 0}, std::vector<uint8_t>{}),
               std::invalid_argument);
  EXPECT_THROW(w.add_tensor("t", tensor_type::f32, {}, std::vector<uint8_t>{}),
               std::invalid_argument);
  EXPECT_THROW(w.add_tensor("t", tensor_type::f32, {1, 1, 1, 1, 4}, f32x4), std::invalid_argument);
  EXPECT_THROW(w.add_tensor("t", tensor_type::q8_0, {33}, pattern_bytes(36, 0)),
               std::invalid_argument);
  EXPECT_THROW(w.add_tensor("t", tensor_type(4), {4}, f32x4), std::invalid_argument);
  EXPECT_THROW(w.add_tensor("t", tensor_type::f32, {int64_t(1) << 62, 16}, f32x4),
               std::invalid_argument);
  EXPECT_THROW(w.add_tensor(std::string(64, 'n'), tensor_type::f32, {4}, f32x4),
               std::invalid_argument);
  w.add_tensor("t", tensor_type::f32, {4}, f32x4);
  EXPECT_THROW(w.add_tensor("t", tensor_type::f32, {4}, f32x4), std::invalid_argument);
  EXPECT_EQ(w.tensor_count(), 1u);

  EXPECT_THROW(w.set_alignment(0), std::invalid_argument);
  EXPECT_THROW(w.set_alignment(3), std::invalid_argument);
  EXPECT_THROW(w.set_u64("general.alignment", 64), std::invalid_argument);
  EXPECT_THROW(w.set_u32("general.alignment", 48), std::invalid_argument);
  EXPECT_THROW(w.set_alignment(1u << 31), std::invalid_argument);
  EXPECT_THROW(w.set("k", gguf_value_of_u(gguf_value_type::u8, 256)), std::invalid_argument);
  EXPECT_THROW(w.set("k", gguf_value_of_i(gguf_value_type::i16, 40000)), std::invalid_argument);
  EXPECT_THROW(w.set("k", gguf_value_of_u(gguf_value_type::boolean, 2)), std::invalid_argument);
  EXPECT_THROW(w.set("k", gguf_value_of_u(gguf_value_type(13), 0)), std::invalid_argument);
  EXPECT_THROW(w.set("k", gguf_value_of_array(gguf_value_type::u8, {gguf_value_of_string("x")})),
               std::invalid_argument);
  EXPECT_THROW(w.set("k", gguf_value_of_array(
                              gguf_value_type::array,
                              {gguf_value_of_array(gguf_value_type::u8,
                                                   {gguf_value_of_u(gguf_value_type::u8, 999)})})),
               std::invalid_argument);
  EXPECT_TRUE(w.metadata().empty());
}

TEST(gguf_writer, v2_files_read_like_v3) {
  std::vector<uint8_t> bytes = small_writer().to_bytes();
  auto v3 = parse(bytes);
  ASSERT_TRUE(v3) << v3.message();
  poke<uint32_t>(bytes, 4, 2);
  auto v2 = parse(bytes);
  ASSERT_TRUE(v2) << v2.message();
  EXPECT_EQ(v2->version(), 2u);
  EXPECT_TRUE(same_metadata(v3->metadata(), v2->metadata()));
  ASSERT_EQ(v2->tensors().size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(v2->tensors()[k].name, v3->tensors()[k].name);
    EXPECT_EQ(v2->tensors()[k].offset, v3->tensors()[k].offset);
  }
}

// --- real files ------------------------------------------------------------------------------

TEST(gguf_real, stories260k_parses_and_rewrites_byte_identically) {
  const std::string path = hearth::testing::testdata_path("models/stories260K.gguf");
  ASSERT_FALSE(path.empty());
  auto g = gguf_file::open(path);
  ASSERT_TRUE(g) << g.message();
  EXPECT_EQ(g->get_string("general.architecture").value(), "llama");
  EXPECT_EQ(g->tensors().size(), 48u);
  EXPECT_EQ(g->get_string_array("tokenizer.ggml.tokens").value()->size(), 512u);
  walk(*g);

  // Metadata copied and every tensor re-added gives back the file llama.cpp wrote.
  gguf_writer w;
  w.copy_metadata_from(*g);
  for (const auto& t : g->tensors()) {
    w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims),
                 std::span<const uint8_t>(t.data, t.n_bytes));
  }
  EXPECT_TRUE(same_metadata(w.metadata(), g->metadata()));
  const std::vector<uint8_t> rewritten = w.to_bytes();
  EXPECT_EQ(rewritten, hearth::testing::read_file_bytes(path));
}

// Opens every .gguf file of `dir` under the test data root, each checked by `check` (which walks
// it); returns how many there were.
template <class Check>
int for_each_gguf(const std::string& dir_name, Check check) {
  const std::string dir = hearth::testing::testdata_root() + "/" + dir_name;
  EXPECT_TRUE(std::filesystem::is_directory(dir)) << dir;
  if (!std::filesystem::is_directory(dir)) return 0;
  int n_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    SCOPED_TRACE(entry.path().string());
    ++n_files;
    auto g = gguf_file::open(entry.path().string());
    EXPECT_TRUE(g) << g.message();
    if (g) check(*g);
  }
  return n_files;
}

TEST(gguf_real, vocab_only_files_parse_with_no_tensors) {
  const int n_files = for_each_gguf("vocab", [](gguf_file& g) {
    EXPECT_EQ(g.tensors().size(), 0u);
    auto tokens = g.get_string_array("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens) << tokens.message();
    ASSERT_TRUE(tokens.value().has_value());
    EXPECT_GT(tokens.value()->size(), 1000u);
    walk(g);
  });
  EXPECT_GE(n_files, 8);
}

TEST(gguf_real, synthetic_models_parse) {
  const int n_files = for_each_gguf("models/synthetic", [](gguf_file& g) {
    EXPECT_GT(g.tensors().size(), 0u);
    walk(g);
  });
  EXPECT_GT(n_files, 0);
}

TEST(gguf_open, missing_path_and_directory_are_errors_naming_the_path) {
  const std::string missing = ::testing::TempDir() + "hearth-no-such-file.gguf";
  auto a = gguf_file::open(missing);
  ASSERT_FALSE(a);
  EXPECT_NE(a.message().find(missing), std::string::npos) << a.message();
  EXPECT_NE(a.message().find("No such file"), std::string::npos) << a.message();

  const std::string dir = ::testing::TempDir();
  auto b = gguf_file::open(dir);
  ASSERT_FALSE(b);
  EXPECT_NE(b.message().find(dir), std::string::npos) << b.message();
  EXPECT_NE(b.message().find("not a regular file"), std::string::npos) << b.message();
}

// --- hostile input ---------------------------------------------------------------------------

TEST(gguf_hostile, bad_magic) {
  std::vector<uint8_t> bytes = small_writer().to_bytes();
  bytes[3] = 'X';
  EXPECT_TRUE(refused(bytes, {"not a GGUF file", "GGUF"}));
  EXPECT_TRUE(refused({}, {"not a GGUF file", "magic"}));
  EXPECT_TRUE(refused({'G', 'G'}, {"not a GGUF file"}));
}

TEST(gguf_hostile, unsupported_versions) {
  std::vector<uint8_t> bytes = small_writer().to_bytes();
  poke<uint32_t>(bytes, 4, 1);
  EXPECT_TRUE(refused(bytes, {"version 1", "not supported"}));
  poke<uint32_t>(bytes, 4, 99);
  EXPECT_TRUE(refused(bytes, {"unsupported GGUF version 99"}));
  poke<uint32_t>(bytes, 4, 0x03000000);  // 3 written big-endian
  EXPECT_TRUE(refused(bytes, {"byte-swapped"}));
  poke<uint32_t>(bytes, 4, 0x02000000);
  EXPECT_TRUE(refused(bytes, {"byte-swapped"}));
  EXPECT_TRUE(refused(raw_gguf{}.put<uint32_t>(0x46554747).put<uint16_t>(3).b, {"version"}));
}

TEST(gguf_hostile, every_truncation_is_refused) {
  const std::vector<uint8_t> bytes = small_writer().to_bytes();
  {
    auto full = parse(bytes);
    ASSERT_TRUE(full) << full.message();
    // The last tensor's data ends the file: no trailing padding a prefix could drop harmlessly.
    const gguf_tensor& last = full->tensors().back();
    ASSERT_EQ(full->data_offset() + last.offset + last.n_bytes, bytes.size());
  }
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + ptrdiff_t(n));
    result<gguf_file> r = error{""};
    ASSERT_NO_THROW(r = parse(prefix)) << "prefix of " << n << " bytes";
    ASSERT_FALSE(r) << "prefix of " << n << " of " << bytes.size() << " bytes was accepted";
    const bool names_problem = r.message().find("past the end") != std::string::npos ||
                               r.message().find("more than the file can hold") != std::string::npos;
    EXPECT_TRUE(names_problem) << "prefix of " << n << " bytes: " << r.message();
  }
}

TEST(gguf_hostile, random_byte_flips_never_crash) {
  gguf_writer w = small_writer();
  w.set_string_array("tokenizer.ggml.tokens", {"a", "bc", "def"});
  w.set("nested",
        gguf_value_of_array(gguf_value_type::array,
                            {gguf_value_of_array(gguf_value_type::i16,
                                                 {gguf_value_of_i(gguf_value_type::i16, 5)})}));
  w.set_bool("flag", true);
  const std::vector<uint8_t> bytes = w.to_bytes();
  const size_t header_size = size_t(parse(bytes)->data_offset());
  std::mt19937 rng(20240607);
  int n_ok = 0, n_err = 0;
  for (int k = 0; k < 20000; ++k) {
    std::vector<uint8_t> m = bytes;
    const int n_flips = 1 + int(rng() % 4);
    for (int f = 0; f < n_flips; ++f) {
      // Mostly the header, where the structure is.
      const size_t at = rng() % 8 ? rng() % header_size : rng() % m.size();
      switch (rng() % 4) {
        case 0:
          m[at] ^= uint8_t(1u << (rng() % 8));
          break;
        case 1:
          m[at] = uint8_t(rng());
          break;
        case 2:
          m[at] = 0xff;
          break;
        default:
          m[at] = 0;
          break;
      }
    }
    result<gguf_file> r = error{""};
    ASSERT_NO_THROW(r = parse(m)) << "mutation " << k;
    if (r) {
      ++n_ok;
      walk(*r);
    } else {
      ++n_err;
      EXPECT_FALSE(r.message().empty()) << "mutation " << k;
    }
  }
  // Both outcomes must occur, or the campaign is not exercising the parser.
  EXPECT_GT(n_ok, 100);
  EXPECT_GT(n_err, 100);
}

TEST(gguf_hostile, huge_counts) {
  EXPECT_TRUE(refused(raw_gguf{}.header(uint64_t(1) << 60, 0).zeros(64).b, {"tensor count"}));
  EXPECT_TRUE(refused(raw_gguf{}.header(~uint64_t(0), 0).zeros(64).b, {"tensor count"}));
  EXPECT_TRUE(refused(raw_gguf{}.header(0, uint64_t(1) << 60).zeros(64).b, {"metadata count"}));
  EXPECT_TRUE(refused(raw_gguf{}.header(0, ~uint64_t(0)).zeros(64).b, {"metadata count"}));
}

TEST(gguf_hostile, huge_string_lengths) {
  // A key length past the end.
  EXPECT_TRUE(refused(raw_gguf{}.header(0, 1).put<uint64_t>(~uint64_t(0)).zeros(16).b,
                      {"metadata key length", "past the end"}));
  // A string value length past the end.
  EXPECT_TRUE(refused(raw_gguf{}
                          .header(0, 1)
                          .str("k")
                          .put<uint32_t>(uint32_t(gguf_value_type::string))
                          .put<uint64_t>(uint64_t(1) << 40)
                          .zeros(16)
                          .b,
                      {"key 'k'", "string value length", "past the end"}));
  // A tensor name length past the end.
  EXPECT_TRUE(refused(raw_gguf{}.header(1, 0).put<uint64_t>(1000).zeros(40).b,
                      {"tensor name length", "past the end"}));
}

TEST(gguf_hostile, huge_array_count) {
  for (auto elem : {gguf_value_type::u8, gguf_value_type::u64, gguf_value_type::string,
                    gguf_value_type::array}) {
    SCOPED_TRACE(gguf_value_type_name(elem));
    EXPECT_TRUE(refused(raw_gguf{}
                            .header(0, 1)
                            .str("arr")
                            .put<uint32_t>(uint32_t(gguf_value_type::array))
                            .put<uint32_t>(uint32_t(elem))
                            .put<uint64_t>(uint64_t(1) << 61)
                            .zeros(64)
                            .b,
                        {"array of key 'arr'", "claims"}));
  }
}

TEST(gguf_hostile, arrays_nested_too_deep) {
  gguf_writer w;
  w.set("deep", nested_arrays(5));
  EXPECT_TRUE(refused(w.to_bytes(), {"nested deeper than", "'deep'"}));
  // A long chain of empty-looking nestings must not recurse without bound either.
  raw_gguf r;
  r.header(0, 1).str("chain").put<uint32_t>(uint32_t(gguf_value_type::array));
  for (int d = 0; d < 10000; ++d) {
    r.put<uint32_t>(uint32_t(gguf_value_type::array)).put<uint64_t>(1);
  }
  EXPECT_TRUE(refused(r.b, {"nested deeper than"}));
}

TEST(gguf_hostile, unknown_value_types) {
  EXPECT_TRUE(refused(raw_gguf{}.header(0, 1).str("k").put<uint32_t>(13).zeros(16).b,
                      {"'k'", "unknown value type 13"}));
  EXPECT_TRUE(refused(raw_gguf{}.header(0, 1).str("k").put<uint32_t>(0xffffffffu).zeros(16).b,
                      {"unknown value type 4294967295"}));
  EXPECT_TRUE(refused(raw_gguf{}
                          .header(0, 1)
                          .str("k")
                          .put<uint32_t>(uint32_t(gguf_value_type::array))
                          .put<uint32_t>(77)
                          .put<uint64_t>(1)
                          .zeros(16)
                          .b,
                      {"'k'", "unknown element type 77"}));
}

TEST(gguf_hostile, unknown_tensor_type) {
  for (uint32_t type : {4u, 5u, 31u, 36u, 1000u}) {
    auto b = raw_gguf{}.header(1, 0).tensor("w", {32}, type, 0).pad_to(32).zeros(256).b;
    EXPECT_TRUE(refused(b, {"tensor 'w'", "unknown tensor type id " + std::to_string(type)}));
  }
}

TEST(gguf_hostile, bad_dimension_counts_and_sizes) {
  auto dims = [](std::vector<uint64_t> ne) {
    return raw_gguf{}.header(1, 0).tensor("w", ne, 0, 0).pad_to(32).zeros(256).b;
  };
  EXPECT_TRUE(refused(dims({}), {"tensor 'w'", "0 dimensions"}));
  EXPECT_TRUE(refused(dims({1, 1, 1, 1, 1}), {"tensor 'w'", "5 dimensions"}));
  EXPECT_TRUE(refused(dims({4, 0}), {"tensor 'w'", "dimension 1 of size 0"}));
  EXPECT_TRUE(refused(dims({~uint64_t(0)}), {"tensor 'w'", "dimension 0 of size"}));
  EXPECT_TRUE(refused(dims({uint64_t(1) << 40, uint64_t(1) << 40}), {"tensor 'w'", "overflows"}));
  EXPECT_TRUE(refused(dims({uint64_t(1) << 62}), {"tensor 'w'", "byte size that overflows"}));
  // A huge shape that does not overflow is still bigger than the file.
  EXPECT_TRUE(refused(dims({uint64_t(1) << 40}), {"tensor 'w'", "runs past the end"}));
}

TEST(gguf_hostile, row_not_a_multiple_of_the_block) {
  auto b = raw_gguf{}
               .header(1, 0)
               .tensor("q", {33, 2}, uint32_t(tensor_type::q8_0), 0)
               .pad_to(32)
               .zeros(256)
               .b;
  EXPECT_TRUE(refused(b, {"tensor 'q'", "q8_0", "row length 33", "block size 32"}));
}

// Offset of tensor `name`'s data-offset field in a writer-made file.
size_t tensor_offset_field(const std::vector<uint8_t>& bytes, std::string_view name, int n_dims) {
  return find_bytes(bytes, name) + name.size() + 4 + 8 * size_t(n_dims) + 4;
}

TEST(gguf_hostile, tensor_offsets) {
  const std::vector<uint8_t> good = small_writer().to_bytes();
  ASSERT_TRUE(parse(good));
  const size_t c_offset = tensor_offset_field(good, "c.f16", 1);
  {
    auto b = good;
    poke<uint64_t>(b, c_offset, 1 << 20);
    EXPECT_TRUE(refused(b, {"tensor 'c.f16'", "runs past the end"}));
    poke<uint64_t>(b, c_offset, ~uint64_t(0) / 32 * 32);
    EXPECT_TRUE(refused(b, {"tensor 'c.f16'", "runs past the end"}));
  }
  {
    auto b = good;
    poke<uint64_t>(b, c_offset, 33);
    EXPECT_TRUE(refused(b, {"tensor 'c.f16'", "offset 33", "not a multiple of the alignment 32"}));
  }
  {
    // b.q8_0 (34 bytes) sits at 32; moving c.f16 from 96 to 64 makes them share bytes 64..65.
    auto b = good;
    poke<uint64_t>(b, c_offset, 64);
    EXPECT_TRUE(refused(b, {"'b.q8_0'", "'c.f16'", "overlap"}));
    poke<uint64_t>(b, c_offset, 0);
    EXPECT_TRUE(refused(b, {"'a.f32'", "'c.f16'", "overlap"}));
  }
}

TEST(gguf_hostile, tensor_data_start_past_the_end) {
  auto b = raw_gguf{}.header(1, 0).tensor("w", {1}, 0, 0).b;  // no padding, no data
  EXPECT_TRUE(refused(b, {"tensor data would start at byte 64", "past the end"}));
}

TEST(gguf_hostile, duplicate_tensor_name) {
  gguf_writer w;
  w.add_tensor("tensor_a", tensor_type::f32, {4}, f32_bytes({1, 2, 3, 4}));
  w.add_tensor("tensor_b", tensor_type::f32, {4}, f32_bytes({1, 2, 3, 4}));
  auto b = w.to_bytes();
  b[find_bytes(b, "tensor_b") + 7] = 'a';
  EXPECT_TRUE(refused(b, {"tensor 'tensor_a'", "appears twice"}));
}

TEST(gguf_hostile, duplicate_key) {
  gguf_writer w;
  w.set_u32("key.a", 1);
  w.set_string("key.b", "x");
  auto b = w.to_bytes();
  b[find_bytes(b, "key.b") + 4] = 'a';
  EXPECT_TRUE(refused(b, {"duplicate metadata key 'key.a'"}));
}

TEST(gguf_hostile, bad_alignment) {
  gguf_writer w = small_writer();
  w.set_alignment(32);
  const auto good = w.to_bytes();
  ASSERT_TRUE(parse(good));
  const size_t type_at = find_bytes(good, "general.alignment") + 17;
  // 2^21 and 2^31 are powers of two, but padding to them would cost gigabytes (fuzz_gguf found
  // the writer allocating 2 GiB to round-trip a file claiming 2^31).
  for (uint32_t a : {0u, 3u, 48u, 1u << 21, 1u << 31}) {
    auto b = good;
    poke<uint32_t>(b, type_at + 4, a);
    EXPECT_TRUE(refused(b, {"general.alignment", "power of two", std::to_string(a)})) << a;
  }
  for (auto t : {gguf_value_type::i32, gguf_value_type::f32}) {
    auto b = good;
    poke<uint32_t>(b, type_at, uint32_t(t));
    EXPECT_TRUE(refused(b, {"general.alignment", "u32"})) << gguf_value_type_name(t);
  }
  auto b = raw_gguf{}
               .header(0, 1)
               .str("general.alignment")
               .put<uint32_t>(uint32_t(gguf_value_type::u64))
               .put<uint64_t>(32)
               .b;
  EXPECT_TRUE(refused(b, {"general.alignment", "u32"}));
}

TEST(gguf_hostile, bool_value_two) {
  gguf_writer w;
  w.set_bool("flag", true);
  auto b = w.to_bytes();
  const size_t at = find_bytes(b, "flag") + 4 + 4;
  ASSERT_EQ(b[at], 1);
  b[at] = 2;
  EXPECT_TRUE(refused(b, {"bool value of key 'flag' is 2"}));
  // Inside an array too.
  gguf_writer wa;
  wa.set("flags", gguf_value_of_array(gguf_value_type::boolean,
                                      {gguf_value_of_u(gguf_value_type::boolean, 0)}));
  auto ba = wa.to_bytes();
  const size_t at_a = find_bytes(ba, "flags") + 5 + 4 + 4 + 8;
  ASSERT_EQ(ba[at_a], 0);
  ba[at_a] = 0xff;
  EXPECT_TRUE(refused(ba, {"bool value of key 'flags' is 255"}));
}

TEST(gguf_hostile, typed_getters_on_wrong_types_are_errors) {
  gguf_writer w;
  w.set_string("s", "text");
  w.set_i32("neg", -5);
  w.set_u8("u8", 1);
  w.set_u32("u32", 7);
  w.set_f32("f", 1.5f);
  w.set_i32_array("ints", {1, 2});
  w.set_string_array("strs", {"a"});
  w.set_f32_array("floats", {0.5f});
  w.set("big", gguf_value_of_array(gguf_value_type::u64,
                                   {gguf_value_of_u(gguf_value_type::u64, ~uint64_t(0))}));
  w.set("nested", gguf_value_of_array(gguf_value_type::array,
                                      {gguf_value_of_array(gguf_value_type::u8, {})}));
  const auto bytes = w.to_bytes();
  auto g = parse(bytes);
  ASSERT_TRUE(g) << g.message();

  auto wrong = [](const auto& r, std::string_view key, std::string_view what) {
    if (r) return ::testing::AssertionFailure() << "getter accepted '" << key << "'";
    if (r.message().find("'" + std::string(key) + "'") == std::string::npos ||
        r.message().find(what) == std::string::npos) {
      return ::testing::AssertionFailure() << r.message();
    }
    return ::testing::AssertionSuccess();
  };
  EXPECT_TRUE(wrong(g->get_uint("s"), "s", "is string, expected an unsigned integer"));
  EXPECT_TRUE(wrong(g->get_uint("neg"), "neg", "negative"));
  EXPECT_TRUE(wrong(g->get_uint("f"), "f", "is f32"));
  EXPECT_TRUE(wrong(g->get_float("s"), "s", "expected a number"));
  EXPECT_TRUE(wrong(g->get_float("ints"), "ints", "is an array of i32, expected a number"));
  EXPECT_TRUE(wrong(g->get_bool("u8"), "u8", "is u8, expected bool"));
  EXPECT_TRUE(wrong(g->get_string("u32"), "u32", "is u32, expected string"));
  EXPECT_TRUE(wrong(g->get_string_array("ints"), "ints",
                    "is an array of i32, expected an array of strings"));
  EXPECT_TRUE(wrong(g->get_string_array("s"), "s", "expected an array of strings"));
  EXPECT_TRUE(wrong(g->get_float_array("strs"), "strs",
                    "is an array of string, expected an array of numbers"));
  EXPECT_TRUE(wrong(g->get_float_array("f"), "f", "expected an array of numbers"));
  EXPECT_TRUE(wrong(g->get_int_array("floats"), "floats",
                    "is an array of f32, expected an array of integers"));
  EXPECT_TRUE(wrong(g->get_int_array("big"), "big", "expected an array of integers"));
  EXPECT_TRUE(wrong(g->get_int_array("nested"), "nested",
                    "is an array of array, expected an array of integers"));
  // And the right types still read.
  EXPECT_EQ(g->get_uint("u32").value(), 7u);
  EXPECT_EQ(g->get_float("neg").value(), -5.0);
  EXPECT_EQ(g->get_float_array("ints").value(), (std::vector<double>{1, 2}));
}

}  // namespace
}  // namespace hearth
