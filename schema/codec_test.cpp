// Tests of schema/codec: every message round-trips with every field intact, and every malformed
// body or envelope that schema/PROTOCOL.md ("Encoding", "Framing") names is refused with an
// error value that says which field, never with an exception or a crash.
#include "schema/codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <msgpack.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "schema/samples.h"

namespace hearth::wire {
namespace {

using samples::sample;

// --- every field of a value, as (path, value) pairs with the decoder's path syntax ---

template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

using leaves = std::vector<std::pair<std::string, std::string>>;

struct flattener {
  leaves& out;
  std::string prefix;

  template <class T>
  void operator()(const char* name, T& v) {
    add(prefix.empty() ? name : prefix + "." + name, v);
  }
  template <class T>
  void optional(const char* name, T& v) {
    (*this)(name, v);
  }

  template <class T>
  void add(const std::string& path, T& v) {
    if constexpr (std::is_same_v<T, bool>) {
      out.emplace_back(path, v ? "true" : "false");
    } else if constexpr (std::is_integral_v<T>) {
      out.emplace_back(path, std::to_string(v));
    } else if constexpr (std::is_floating_point_v<T>) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%a", double(v));
      out.emplace_back(path, buf);
    } else if constexpr (std::is_same_v<T, std::string>) {
      out.emplace_back(path, v);
    } else if constexpr (std::is_same_v<T, job_state>) {
      out.emplace_back(path, std::string(job_state_name(v)));
    } else if constexpr (std::is_same_v<T, error_code>) {
      out.emplace_back(path, std::string(error_code_name(v)));
    } else if constexpr (is_vector<T>::value) {
      out.emplace_back(path + "#size", std::to_string(v.size()));
      for (size_t i = 0; i < v.size(); ++i) add(path + "[" + std::to_string(i) + "]", v[i]);
    } else {
      flattener sub{out, path};
      v.fields(sub);
    }
  }
};

template <class M>
leaves flatten(M m) {
  leaves out;
  flattener f{out, ""};
  m.fields(f);
  return out;
}

// Does `path` name `field` or something inside it ("params" covers "params.top_k")?
bool is_within(const std::string& path, const std::string& field) {
  return path.compare(0, field.size(), field) == 0 &&
         (path.size() == field.size() || path[field.size()] == '.' || path[field.size()] == '[' ||
          path[field.size()] == '#');
}

// The top-level fields of a message: name and whether it is required.
struct field_list {
  std::vector<std::pair<std::string, bool>> fields;
  template <class T>
  void operator()(const char* name, T&) {
    fields.emplace_back(name, true);
  }
  template <class T>
  void optional(const char* name, T&) {
    fields.emplace_back(name, false);
  }
};

// --- msgpack built by hand ---

using packer = msgpack::packer<msgpack::sbuffer>;
using writer = std::function<void(packer&)>;

std::string packed(const writer& write) {
  msgpack::sbuffer buf;
  packer pk(buf);
  write(pk);
  return std::string(buf.data(), buf.size());
}

void pack_string(packer& pk, std::string_view s) {
  pk.pack_str(uint32_t(s.size()));
  pk.pack_str_body(s.data(), uint32_t(s.size()));
}

// A path of the decoder's syntax split into map keys and array indexes.
struct step {
  std::string key;  // empty: an array index
  uint32_t index = 0;
};

std::vector<step> parse_path(const std::string& path) {
  std::vector<step> steps;
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '.') {
      ++i;
    } else if (path[i] == '[') {
      const size_t close = path.find(']', i);
      steps.push_back({"", uint32_t(std::stoul(path.substr(i + 1, close - i - 1)))});
      i = close + 1;
    } else {
      const size_t end = path.find_first_of(".[", i);
      steps.push_back({path.substr(i, end - i), 0});
      i = end == std::string::npos ? path.size() : end;
    }
  }
  return steps;
}

// Packs `o` with the value at steps[at...] replaced by what `write` packs (added when absent),
// or removed when `write` is empty.
void repack(packer& pk, const msgpack::object& o, const std::vector<step>& steps, size_t at,
            const writer& write) {
  const step& s = steps[at];
  const bool last = at + 1 == steps.size();
  if (!s.key.empty()) {
    if (o.type != msgpack::type::MAP)
      throw std::logic_error("path step '" + s.key + "' on a non-map");
    const auto& map = o.via.map;
    bool found = false;
    for (uint32_t i = 0; i < map.size; ++i) {
      if (map.ptr[i].key.type == msgpack::type::STR && map.ptr[i].key.as<std::string>() == s.key) {
        found = true;
      }
    }
    uint32_t n = map.size;
    if (last && found && !write) --n;
    if (last && !found && write) ++n;
    pk.pack_map(n);
    for (uint32_t i = 0; i < map.size; ++i) {
      const auto& kv = map.ptr[i];
      if (kv.key.type == msgpack::type::STR && kv.key.as<std::string>() == s.key) {
        if (last && !write) continue;
        pk.pack(kv.key);
        last ? write(pk) : repack(pk, kv.val, steps, at + 1, write);
      } else {
        pk.pack(kv.key);
        pk.pack(kv.val);
      }
    }
    if (last && !found && write) {
      pack_string(pk, s.key);
      write(pk);
    }
  } else {
    if (o.type != msgpack::type::ARRAY) throw std::logic_error("path index on a non-array");
    const auto& array = o.via.array;
    pk.pack_array(last && !write ? array.size - 1 : array.size);
    for (uint32_t i = 0; i < array.size; ++i) {
      if (i != s.index) {
        pk.pack(array.ptr[i]);
      } else if (!last) {
        repack(pk, array.ptr[i], steps, at + 1, write);
      } else if (write) {
        write(pk);
      }
    }
  }
}

// The body of `m` with the value at `path` ("params.top_k", "models[1].name") replaced by what
// `write` packs (added when absent), or removed when `write` is empty. The other values go
// through packer::pack, which writes whole floats as integers (the decoder takes both) and must
// not meet a float of 2^64 (undefined behaviour in msgpack-cxx 4).
template <class M>
std::string edited(const M& m, const std::string& path, const writer& write) {
  const std::string body = encode(m);
  const auto handle = msgpack::unpack(body.data(), body.size());
  return packed([&](packer& pk) { repack(pk, handle.get(), parse_path(path), 0, write); });
}

template <class V>
writer value(V v) {
  return [v](packer& pk) { pk.pack(v); };
}

const writer nil = [](packer& pk) { pk.pack_nil(); };

// A float 64 even for whole numbers (packer::pack writes those as integers).
writer float64(double d) {
  return [d](packer& pk) {
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    char bytes[9] = {char(0xcb)};
    for (int i = 0; i < 8; ++i) bytes[1 + i] = char(bits >> (56 - 8 * i));
    pk.pack_bin_body(bytes, 9);  // appends the bytes as they are
  };
}

// Expects decoding to fail with a message that contains `what`.
template <class M>
void expect_refused(std::string_view body, const std::string& what) {
  const auto d = decode<M>(body);
  ASSERT_FALSE(d) << command_name(M::cmd) << " accepted a body that should fail with: " << what;
  EXPECT_NE(d.message().find(what), std::string::npos) << d.message();
  EXPECT_EQ(d.message().rfind(std::string(command_name(M::cmd)) + ": ", 0), 0u) << d.message();
}

// --- every message ---

template <class M>
void expect_round_trip() {
  const M m = sample<M>();
  const std::string body = encode(m);
  const auto d = decode<M>(body);
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ(flatten(d.value()), flatten(m));
  EXPECT_EQ(encode(d.value()), body);

  // A field the sample leaves at its default could be dropped by the codec unnoticed.
  std::map<std::string, std::string> defaults;
  for (const auto& [path, v] : flatten(M{})) defaults[path] = v;
  for (const auto& [path, v] : flatten(m)) {
    const auto it = defaults.find(path);
    if (it != defaults.end()) {
      EXPECT_NE(v, it->second) << "the sample leaves " << path << " at its default";
    }
  }

  const auto d0 = decode<M>(encode(M{}));
  ASSERT_TRUE(d0) << d0.message();
  EXPECT_EQ(flatten(d0.value()), flatten(M{}));
}

// Each top-level field removed: a required one is named in the error, an optional one keeps
// its default and leaves the other fields alone.
template <class M>
void expect_required_fields_checked() {
  M m = sample<M>();
  field_list list;
  m.fields(list);
  for (const auto& [name, required] : list.fields) {
    SCOPED_TRACE(name);
    const auto d = decode<M>(edited(m, name, nullptr));
    if (required) {
      ASSERT_FALSE(d);
      EXPECT_NE(d.message().find("missing field '" + name + "'"), std::string::npos) << d.message();
      continue;
    }
    ASSERT_TRUE(d) << d.message();
    leaves want;
    for (const auto& leaf : flatten(m)) {
      if (!is_within(leaf.first, name)) want.push_back(leaf);
    }
    for (const auto& leaf : flatten(M{})) {
      if (is_within(leaf.first, name)) want.push_back(leaf);
    }
    leaves got = flatten(d.value());
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want);
  }
}

// Every field at every depth (structs and lists too) replaced by nil, which no field accepts:
// the error names exactly that field.
template <class M>
void expect_wrong_types_named() {
  const M m = sample<M>();
  std::set<std::string> paths;
  for (const auto& [leaf, v] : flatten(m)) {
    const std::string path = leaf.substr(0, leaf.find('#'));
    for (size_t i = 1; i <= path.size(); ++i) {
      if (i == path.size() || path[i] == '.' || path[i] == '[') paths.insert(path.substr(0, i));
    }
  }
  for (const auto& path : paths) {
    SCOPED_TRACE(path);
    expect_refused<M>(edited(m, path, nil), "field '" + path + "' must be");
  }
}

// No proper prefix of a body is a body (msgpack is prefix-free).
template <class M>
void expect_prefixes_refused() {
  const std::string body = encode(sample<M>());
  for (size_t n = 0; n < body.size(); ++n) {
    const auto d = decode<M>(std::string_view(body).substr(0, n));
    EXPECT_FALSE(d) << n << " of " << body.size() << " bytes";
  }
}

#define HEARTH_MESSAGE_TESTS(M)          \
  TEST(CodecRoundTrip, M) {              \
    expect_round_trip<M>();              \
  }                                      \
  TEST(CodecRequired, M) {               \
    expect_required_fields_checked<M>(); \
  }                                      \
  TEST(CodecWrongType, M) {              \
    expect_wrong_types_named<M>();       \
  }                                      \
  TEST(CodecTruncated, M) {              \
    expect_prefixes_refused<M>();        \
  }
HEARTH_WIRE_MESSAGES(HEARTH_MESSAGE_TESTS)
#undef HEARTH_MESSAGE_TESTS

TEST(Codec, EveryCommandCodeHasOneMessage) {
  std::map<int, std::string> by_code;
#define HEARTH_COLLECT(M) \
  EXPECT_TRUE(by_code.emplace(int(M::cmd), #M).second) << #M " reuses a command code";
  HEARTH_WIRE_MESSAGES(HEARTH_COLLECT)
#undef HEARTH_COLLECT
  EXPECT_EQ(by_code.size(), 57u);
  for (int b = 0; b < 256; ++b) {
    const auto c = command_from_byte(uint8_t(b));
    EXPECT_EQ(c.has_value(), by_code.count(b) == 1) << b;
    if (c) {
      EXPECT_NE(command_name(*c), "unknown") << b;
    }
  }
}

// A body that does not decode still says its request_id when it comes before what is wrong.
TEST(Codec, PeeksTheRequestIdOfABodyThatDoesNotDecode) {
  cancel c{77, 5, ""};
  EXPECT_EQ(peek_request_id(encode(c) + "\xc1"), 77u);  // trailing bytes
  std::string body = encode(c);
  EXPECT_EQ(peek_request_id(body.substr(0, body.size() - 1)), 77u);  // truncated after the id
  // {"pad": <a 5 MiB string, over max_string_bytes>, ...}: the id is not reached.
  EXPECT_EQ(peek_request_id(std::string("\x82\xa3pad\xdb\x00\x50\x00\x00", 9)), std::nullopt);
  EXPECT_EQ(peek_request_id(std::string("\x81\xaarequest_id\xa1x")), std::nullopt);  // a string
  EXPECT_EQ(peek_request_id("\xc1"), std::nullopt);
  EXPECT_EQ(peek_request_id(""), std::nullopt);
  // Nested maps and arrays deeper than max_depth stop the scan, not the process.
  EXPECT_EQ(peek_request_id(std::string(100000, '\x91')), std::nullopt);
  // A request_id inside a nested map is not the body's.
  EXPECT_EQ(peek_request_id(std::string("\x81\xa1p\x81\xaarequest_id\x05")), std::nullopt);
}

// --- strict decoding, case by case ---

TEST(Codec, RoundTripsAJobAssign) {
  job_assign a;
  a.job_id = 42;
  a.attempt = 2;
  a.model = "stories260K";
  a.prompt = "Once upon a time";
  a.messages = {{"user", "hi"}};
  a.params.max_tokens = 7;
  a.params.temperature = 0;
  a.params.seed = 0xFFFFFFFFFFFFFFFFull;
  a.params.stop = {"\n", "The end"};
  auto d = decode<job_assign>(encode(a));
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ(d->job_id, 42u);
  EXPECT_EQ(d->attempt, 2u);
  EXPECT_EQ(d->model, "stories260K");
  EXPECT_EQ(d->messages.size(), 1u);
  EXPECT_EQ(d->params.seed, 0xFFFFFFFFFFFFFFFFull);
  EXPECT_EQ(d->params.stop, a.params.stop);
}

TEST(Codec, WrongTypeForAField) {
  expect_refused<node_pull>(edited(node_pull{1}, "credit", value(std::string("3"))),
                            "field 'credit' must be an integer");
  expect_refused<node_pull>(edited(node_pull{1}, "credit", float64(1.0)),
                            "field 'credit' must be an integer");
  expect_refused<submit>(edited(sample<submit>(), "watch", value(1)),
                         "field 'watch' must be a boolean");
  expect_refused<job_tokens>(edited(sample<job_tokens>(), "text", value(7)),
                             "field 'text' must be a string");
  // A string must be str, not bin.
  expect_refused<job_tokens>(edited(sample<job_tokens>(), "text",
                                    [](packer& pk) {
                                      pk.pack_bin(2);
                                      pk.pack_bin_body("hi", 2);
                                    }),
                             "field 'text' must be a string");
  expect_refused<job_assign>(edited(sample<job_assign>(), "params.top_p", value(std::string("x"))),
                             "field 'params.top_p' must be a number");
  expect_refused<job_assign>(edited(sample<job_assign>(), "params", value(std::vector<int>{1})),
                             "field 'params' must be a map");
  expect_refused<job_assign>(edited(sample<job_assign>(), "messages", value(std::string("hi"))),
                             "field 'messages' must be an array");
  expect_refused<node_hello>(
      edited(sample<node_hello>(), "hardware.gpus[1].memory_free", value(true)),
      "field 'hardware.gpus[1].memory_free' must be an integer");
}

TEST(Codec, MissingRequiredField) {
  expect_refused<job_cancel>(edited(sample<job_cancel>(), "attempt", nullptr),
                             "missing field 'attempt'");
  expect_refused<job_assign>(edited(sample<job_assign>(), "params.seed", nullptr),
                             "missing field 'params.seed'");
  expect_refused<node_hello>(edited(sample<node_hello>(), "models[1].loaded", nullptr),
                             "missing field 'models[1].loaded'");
}

TEST(Codec, OptionalFieldAbsentKeepsItsDefault) {
  auto a = decode<job_assign>(edited(sample<job_assign>(), "params.stop", nullptr));
  ASSERT_TRUE(a) << a.message();
  EXPECT_TRUE(a->params.stop.empty());
  EXPECT_EQ(a->params.seed, sample<job_assign>().params.seed);

  auto h = decode<node_hello>(edited(sample<node_hello>(), "hardware.gpus", nullptr));
  ASSERT_TRUE(h) << h.message();
  EXPECT_TRUE(h->hardware.gpus.empty());
  EXPECT_EQ(h->running.size(), 2u);

  // Present, an optional field is checked like any other.
  expect_refused<node_hello>(edited(sample<node_hello>(), "running[0].attempt", value(-1)),
                             "field 'running[0].attempt' must not be negative");
}

TEST(Codec, UnknownFieldsAreIgnored) {
  const writer anything = [](packer& pk) {
    pk.pack_map(2);
    pack_string(pk, "list");
    pk.pack(std::vector<std::string>{"a", "b"});
    pack_string(pk, "other");
    pk.pack_array(4);
    pk.pack_nil();
    pk.pack(2.5);
    pk.pack(-3);
    pk.pack_bin(1);
    pk.pack_bin_body("x", 1);
  };
  auto p = decode<node_pull>(edited(node_pull{5}, "added_in_1_1", anything));
  ASSERT_TRUE(p) << p.message();
  EXPECT_EQ(p->credit, 5u);
  auto a = decode<job_assign>(edited(sample<job_assign>(), "params.mirostat", value(2)));
  ASSERT_TRUE(a) << a.message();
  EXPECT_EQ(encode(*a), encode(sample<job_assign>()));
  // Keys that are not strings cannot name a field; they are ignored too.
  const std::string int_key = packed([](packer& pk) {
    pk.pack_map(2);
    pk.pack(7);
    pk.pack(std::string("x"));
    pack_string(pk, "credit");
    pk.pack(9);
  });
  auto q = decode<node_pull>(int_key);
  ASSERT_TRUE(q) << q.message();
  EXPECT_EQ(q->credit, 9u);
}

TEST(Codec, FieldGivenTwiceIsRefused) {
  const std::string twice = packed([](packer& pk) {
    pk.pack_map(2);
    pack_string(pk, "credit");
    pk.pack(1);
    pack_string(pk, "credit");
    pk.pack(2);
  });
  expect_refused<node_pull>(twice, "field 'credit' appears twice");
  // An unknown key given twice is as ignored as once.
  const std::string unknown_twice = packed([](packer& pk) {
    pk.pack_map(3);
    pack_string(pk, "x");
    pk.pack(1);
    pack_string(pk, "credit");
    pk.pack(2);
    pack_string(pk, "x");
    pk.pack(3);
  });
  EXPECT_TRUE(decode<node_pull>(unknown_twice));
}

TEST(Codec, IntegerRanges) {
  // Negative into unsigned.
  expect_refused<node_pull>(edited(node_pull{}, "credit", value(-1)),
                            "field 'credit' must not be negative");
  expect_refused<job_cancel>(edited(job_cancel{}, "job_id", value(int64_t(-1))),
                             "field 'job_id' must not be negative");
  // Above the range of uint32 (and exactly at its end).
  expect_refused<node_pull>(edited(node_pull{}, "credit", value(uint64_t(1) << 32)),
                            "field 'credit' is out of range (4294967296)");
  auto top = decode<node_pull>(edited(node_pull{}, "credit", value(uint64_t(0xFFFFFFFF))));
  ASSERT_TRUE(top) << top.message();
  EXPECT_EQ(top->credit, 0xFFFFFFFFu);
  // int32 both ends.
  const job_assign a = sample<job_assign>();
  expect_refused<job_assign>(edited(a, "params.max_tokens", value(int64_t(1) << 31)),
                             "field 'params.max_tokens' is out of range");
  expect_refused<job_assign>(edited(a, "params.max_tokens", value(-(int64_t(1) << 31) - 1)),
                             "field 'params.max_tokens' is out of range");
  auto low = decode<job_assign>(edited(a, "params.max_tokens", value(-(int64_t(1) << 31))));
  ASSERT_TRUE(low) << low.message();
  EXPECT_EQ(low->params.max_tokens, std::numeric_limits<int32_t>::min());
  // int64 above its range; uint64 to its end.
  expect_refused<jobs_reply>(
      edited(sample<jobs_reply>(), "jobs[0].created_ms", value(uint64_t(1) << 63)),
      "field 'jobs[0].created_ms' is out of range");
  auto big = decode<cancel>(edited(cancel{}, "job_id", value(~uint64_t(0))));
  ASSERT_TRUE(big) << big.message();
  EXPECT_EQ(big->job_id, ~uint64_t(0));
}

TEST(Codec, IntegerEncodingWidthDoesNotMatter) {
  // 7 as uint64 (0xcf) and as int8 (0xd0): values are checked, not encodings.
  auto wide =
      decode<node_pull>(edited(node_pull{}, "credit", [](packer& pk) { pk.pack_fix_uint64(7); }));
  ASSERT_TRUE(wide) << wide.message();
  EXPECT_EQ(wide->credit, 7u);
  auto signed_form =
      decode<node_pull>(edited(node_pull{}, "credit", [](packer& pk) { pk.pack_fix_int8(7); }));
  ASSERT_TRUE(signed_form) << signed_form.message();
  EXPECT_EQ(signed_form->credit, 7u);
}

TEST(Codec, FloatsMustBeFiniteAndInRange) {
  const job_assign a = sample<job_assign>();
  const double inf = std::numeric_limits<double>::infinity();
  for (const double bad : {std::nan(""), inf, -inf}) {
    expect_refused<job_assign>(edited(a, "params.temperature", value(bad)),
                               "field 'params.temperature' must be a finite number");
    expect_refused<job_assign>(edited(a, "params.temperature", value(float(bad))),
                               "field 'params.temperature' must be a finite number");
    expect_refused<job_final>(edited(sample<job_final>(), "gen_ms", value(bad)),
                              "field 'gen_ms' must be a finite number");
  }
  // A finite double beyond the float range would be infinity in a float field.
  expect_refused<job_assign>(edited(a, "params.temperature", value(1e300)),
                             "field 'params.temperature' is out of range for a 32-bit float");
  expect_refused<job_assign>(edited(a, "params.temperature", value(-1e39)),
                             "field 'params.temperature' is out of range for a 32-bit float");
  auto max = decode<job_assign>(
      edited(a, "params.temperature", value(double(std::numeric_limits<float>::max()))));
  ASSERT_TRUE(max) << max.message();
  EXPECT_EQ(max->params.temperature, std::numeric_limits<float>::max());
  // Integers are numbers too.
  auto whole = decode<job_assign>(edited(a, "params.temperature", value(-2)));
  ASSERT_TRUE(whole) << whole.message();
  EXPECT_EQ(whole->params.temperature, -2.0f);
}

TEST(Codec, FloatsAreEncodedAsFloats) {
  using namespace std::string_literals;
  // Whole numbers too, and 2^64 (which msgpack-cxx's packer::pack would convert to an integer).
  job_final f = sample<job_final>();
  f.prompt_ms = 2;
  f.gen_ms = 18446744073709551616.0;
  const std::string body = encode(f);
  EXPECT_NE(body.find("\xa9prompt_ms\xcb\x40\x00\x00\x00\x00\x00\x00\x00"s), std::string::npos);
  EXPECT_NE(body.find("\xa6gen_ms\xcb\x43\xf0\x00\x00\x00\x00\x00\x00"s), std::string::npos);
  job_assign a = sample<job_assign>();
  a.params.temperature = 0;
  a.params.top_p = 18446744073709551616.0f;
  const std::string assign = encode(a);
  EXPECT_NE(assign.find("\xabtemperature\xca\x00\x00\x00\x00"s), std::string::npos);
  EXPECT_NE(assign.find("\xa5top_p\xca\x5f\x80\x00\x00"s), std::string::npos);
  auto d = decode<job_assign>(assign);
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ(d->params.top_p, 18446744073709551616.0f);
  // Any float form is read: float 64 into a float field, within range.
  auto wide = decode<job_assign>(edited(sample<job_assign>(), "params.min_p", float64(0.5)));
  ASSERT_TRUE(wide) << wide.message();
  EXPECT_EQ(wide->params.min_p, 0.5f);
}

TEST(Codec, UnknownEnumerationNames) {
  expect_refused<job_final>(edited(sample<job_final>(), "state", value(std::string("exploded"))),
                            "field 'state' has unknown job state 'exploded'");
  expect_refused<job_final>(edited(sample<job_final>(), "state", value(std::string("Completed"))),
                            "unknown job state");
  expect_refused<job_final>(edited(sample<job_final>(), "state", value(2)),
                            "field 'state' must be a string");
  expect_refused<error_reply>(edited(sample<error_reply>(), "code", value(std::string("oops"))),
                              "field 'code' has unknown error code 'oops'");
}

TEST(Codec, TrailingBytes) {
  expect_refused<ok>(encode(sample<ok>()) + '\0', "1 trailing bytes after the body");
  expect_refused<ok>(encode(sample<ok>()) + encode(sample<ok>()), "trailing bytes");
}

TEST(Codec, TopLevelMustBeAMap) {
  expect_refused<ok>(packed([](packer& pk) { pk.pack_array(0); }), "field 'body' must be a map");
  expect_refused<ok>(packed([](packer& pk) { pk.pack(5); }), "must be a map");
  expect_refused<ok>(packed([](packer& pk) { pk.pack_nil(); }), "must be a map");
  expect_refused<heartbeat>(packed([](packer& pk) { pk.pack(std::string("hi")); }),
                            "must be a map");
}

TEST(Codec, EmptyBody) {
  expect_refused<heartbeat>("", "not valid msgpack");
  expect_refused<node_bye>("", "not valid msgpack");
  expect_refused<ok>("", "not valid msgpack");
  EXPECT_TRUE(decode<heartbeat>("\x80"));  // the empty map
}

TEST(Codec, HugeCountsInAFewBytes) {
  using namespace std::string_literals;
  // An array of 2^32-1 items, a map of as many entries, a string and a bin of 4 GiB: 5 bytes each.
  for (const std::string& claim : {"\xdd\xff\xff\xff\xff"s, "\xdf\xff\xff\xff\xff"s,
                                   "\xdb\xff\xff\xff\xff"s, "\xc6\xff\xff\xff\xff"s}) {
    expect_refused<ok>(claim, "not valid msgpack");
    const std::string inside = "\x81\xa6models"s + claim;  // {"models": <claim>}
    expect_refused<node_status>(inside, "not valid msgpack");
  }
}

TEST(Codec, ArrayAndMapLimits) {
  const std::string over = packed([](packer& pk) {
    pk.pack_map(1);
    pack_string(pk, "models");
    pk.pack_array(max_array_items + 1);
    for (uint32_t i = 0; i <= max_array_items; ++i) pk.pack_nil();
  });
  expect_refused<node_status>(over, "array size overflow");
  // The limit holds inside unknown fields too.
  const std::string unknown = packed([](packer& pk) {
    pk.pack_map(2);
    pack_string(pk, "models");
    pk.pack_array(0);
    pack_string(pk, "x");
    pk.pack_array(max_array_items + 1);
    for (uint32_t i = 0; i <= max_array_items; ++i) pk.pack_nil();
  });
  expect_refused<node_status>(unknown, "array size overflow");
  const std::string wide_map = packed([](packer& pk) {
    pk.pack_map(257);
    for (int i = 0; i < 257; ++i) {
      pack_string(pk, "k" + std::to_string(i));
      pk.pack_nil();
    }
  });
  expect_refused<heartbeat>(wide_map, "map size overflow");
}

TEST(Codec, NestingDepth) {
  // 100000 nested arrays: refused at the depth limit, long before the stack runs out.
  std::string deep(100000, '\x91');
  deep += '\xc0';
  expect_refused<ok>(deep, "depth size overflow");
  expect_refused<node_status>("\x81\xa6models" + deep, "depth size overflow");

  // The body's map is level 1: an unknown field may nest arrays down to level max_depth.
  const auto nested = [](uint32_t levels) {
    return edited(node_pull{3}, "x", [levels](packer& pk) {
      for (uint32_t i = 0; i < levels; ++i) pk.pack_array(1);
      pk.pack_nil();
    });
  };
  EXPECT_TRUE(decode<node_pull>(nested(max_depth - 1)));
  expect_refused<node_pull>(nested(max_depth), "depth size overflow");
}

TEST(Codec, StringLimit) {
  job_tokens t = sample<job_tokens>();
  t.text.assign(max_string_bytes, 'a');
  auto at_limit = decode<job_tokens>(encode(t));
  ASSERT_TRUE(at_limit) << at_limit.message();
  EXPECT_EQ(at_limit->text.size(), size_t(max_string_bytes));
  t.text += 'a';
  expect_refused<job_tokens>(encode(t), "str size overflow");
}

TEST(Codec, BodyLargerThanAMessage) {
  expect_refused<ok>(std::string(size_t(max_message_bytes) + 1, '\0'), "is too large");
}

TEST(Codec, ExtensionTypesAreRefused) {
  const writer ext = [](packer& pk) {
    pk.pack_ext(1, 5);
    pk.pack_ext_body("x", 1);
  };
  expect_refused<node_pull>(edited(node_pull{}, "x", ext), "ext size overflow");
}

// --- the envelope ---

envelope_result open_frames(std::vector<std::string> frames) {
  const std::vector<std::string_view> views(frames.begin(), frames.end());
  return open_envelope(views);
}

std::string code(command c) {
  return std::string(1, char(uint8_t(c)));
}

TEST(Envelope, OpensEveryCommand) {
#define HEARTH_OPEN(M)                                            \
  {                                                               \
    const std::string body = encode(sample<M>());                 \
    const std::string c = code(M::cmd);                           \
    const std::vector<std::string_view> f = {signature, c, body}; \
    const auto r = open_envelope(f);                              \
    ASSERT_TRUE(r.ok) << #M << ": " << r.err.message;             \
    EXPECT_EQ(r.env.cmd, M::cmd);                                 \
    EXPECT_EQ(r.env.body.data(), body.data());                    \
    EXPECT_EQ(r.env.body.size(), body.size());                    \
  }
  HEARTH_WIRE_MESSAGES(HEARTH_OPEN)
#undef HEARTH_OPEN
}

void expect_envelope_error(const envelope_result& r, error_code c, const std::string& what) {
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.err.code, c) << error_code_name(r.err.code);
  EXPECT_NE(r.err.message.find(what), std::string::npos) << r.err.message;
}

TEST(Envelope, WrongFrameCount) {
  const std::string sig(signature);
  expect_envelope_error(open_frames({}), error_code::malformed, "expected 3 frames");
  expect_envelope_error(open_frames({sig}), error_code::malformed, "got 1");
  expect_envelope_error(open_frames({sig, code(command::ok)}), error_code::malformed, "got 2");
  expect_envelope_error(open_frames({sig, code(command::ok), "\x80", ""}), error_code::malformed,
                        "got 4");
}

TEST(Envelope, WrongSignature) {
  const std::string body = encode(sample<ok>());
  for (const std::string_view other : {"HEARTH/2", "HEARTH/10", "HEARTH/", "HEARTH/1 "}) {
    SCOPED_TRACE(other);
    expect_envelope_error(open_frames({std::string(other), code(command::ok), body}),
                          error_code::version_mismatch, "is not supported");
  }
  // Whatever the other frames: a later version may frame its messages differently.
  expect_envelope_error(open_frames({"HEARTH/2"}), error_code::version_mismatch, "HEARTH/2");
  expect_envelope_error(open_frames({"HEARTH/2", "", "", ""}), error_code::version_mismatch,
                        "is not supported");
  for (const std::string_view junk : {"", "junk", "hearth/1", "HEARTH1", "MDPC02", "\xff\xfe"}) {
    SCOPED_TRACE(junk);
    expect_envelope_error(open_frames({std::string(junk), code(command::ok), body}),
                          error_code::malformed, "not the hearth signature");
  }
}

TEST(Envelope, CommandFrameIsOneByte) {
  const std::string sig(signature);
  expect_envelope_error(open_frames({sig, "", "\x80"}), error_code::malformed, "one byte");
  expect_envelope_error(open_frames({sig, "\x01\x01", "\x80"}), error_code::malformed, "one byte");
}

TEST(Envelope, UnknownCommand) {
  const std::string sig(signature);
  for (const int b : {0x00, 0x03, 0x19, 0x30, 0x53, 0x70, 0x7f, 0xff}) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", unsigned(b));
    expect_envelope_error(open_frames({sig, std::string(1, char(b)), "\x80"}),
                          error_code::malformed, std::string("unknown command ") + hex);
  }
}

TEST(Envelope, BodyLargerThanAMessage) {
  expect_envelope_error(open_frames({std::string(signature), code(command::ok),
                                     std::string(max_message_bytes + 1, 'x')}),
                        error_code::malformed, "larger than the message limit");
}

}  // namespace
}  // namespace hearth::wire
