// Writes the seed corpora of the wire fuzz targets and their dictionary:
//   <dir>/<message>/sample, default   the body of schema/samples.h's sample and of M{}
//   <dir>/<message>/wide               the sample with every number in its widest form (uint64,
//                                      int64, float 64), which the decoder accepts too: mutating
//                                      those bytes reaches the range checks
//   <dir>/envelope/<message>           the sample framed for wire_envelope_fuzz, and a few
//                                      refused envelopes (another version, unknown command)
//   <dir>/wire.dict                    every field name and enumeration name as msgpack strings,
//                                      the signature, and msgpack headers worth trying
//
// Usage: wire_fuzz_seeds <output dir>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <cstring>
#include <msgpack.hpp>

#include "schema/codec.h"
#include "schema/samples.h"

namespace {

using namespace hearth::wire;
namespace fs = std::filesystem;

template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

// Collects the field names of a message and of every struct inside it.
struct name_collector {
  std::set<std::string>& names;
  template <class T>
  void operator()(const char* name, T&) {
    names.insert(name);
    visit<T>();
  }
  template <class T>
  void optional(const char* name, T& v) {
    (*this)(name, v);
  }
  template <class T>
  void visit() {
    if constexpr (is_vector<T>::value) {
      visit<typename T::value_type>();
    } else if constexpr (std::is_class_v<T> && !std::is_same_v<T, std::string>) {
      T inner{};
      inner.fields(*this);
    }
  }
};

// `o` packed again with every integer as uint64/int64 and every float as float 64.
void pack_wide(msgpack::packer<msgpack::sbuffer>& pk, const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::POSITIVE_INTEGER:
      pk.pack_fix_uint64(o.via.u64);
      break;
    case msgpack::type::NEGATIVE_INTEGER:
      pk.pack_fix_int64(o.via.i64);
      break;
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: {
      uint64_t bits;
      std::memcpy(&bits, &o.via.f64, sizeof bits);
      char bytes[9] = {char(0xcb)};
      for (int i = 0; i < 8; ++i) bytes[1 + i] = char(bits >> (56 - 8 * i));
      pk.pack_bin_body(bytes, sizeof bytes);  // appends the bytes as they are
      break;
    }
    case msgpack::type::ARRAY:
      pk.pack_array(o.via.array.size);
      for (uint32_t i = 0; i < o.via.array.size; ++i) pack_wide(pk, o.via.array.ptr[i]);
      break;
    case msgpack::type::MAP:
      pk.pack_map(o.via.map.size);
      for (uint32_t i = 0; i < o.via.map.size; ++i) {
        pack_wide(pk, o.via.map.ptr[i].key);
        pack_wide(pk, o.via.map.ptr[i].val);
      }
      break;
    default:
      pk.pack(o);
  }
}

std::string wide(const std::string& body) {
  const auto handle = msgpack::unpack(body.data(), body.size());
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pack_wide(pk, handle.get());
  return std::string(buf.data(), buf.size());
}

bool write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) std::fprintf(stderr, "wire_fuzz_seeds: cannot write %s\n", path.c_str());
  return bool(out);
}

// The input form of wire_envelope_fuzz: [n0][frame 0][n1][frame 1][frame 2].
std::string framed(std::string_view sig, std::string_view cmd, std::string_view body) {
  std::string s;
  s += char(sig.size());
  s += sig;
  s += char(cmd.size());
  s += cmd;
  s += body;
  return s;
}

std::string msgpack_str(std::string_view s) {
  return char(0xa0 | s.size()) + std::string(s);  // fixstr: every name here is under 32 bytes
}

// One libFuzzer dictionary line, every byte but letters, digits and '_' escaped.
std::string dict_entry(std::string_view bytes) {
  std::string line = "\"";
  for (const char c : bytes) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_') {
      line += c;
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", unsigned(uint8_t(c)));
      line += hex;
    }
  }
  return line + "\"\n";
}

template <class M>
bool write_seeds(const fs::path& dir, const char* message, std::set<std::string>& names) {
  const fs::path own = dir / message;
  fs::create_directories(own);
  const std::string body = encode(samples::sample<M>());
  const char code = char(uint8_t(M::cmd));
  name_collector collect{names};
  M m{};
  m.fields(collect);
  return write_file(own / "sample", body) && write_file(own / "default", encode(M{})) &&
         write_file(own / "wide", wide(body)) &&
         write_file(dir / "envelope" / own.filename(),
                    framed(signature, std::string_view(&code, 1), body));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: wire_fuzz_seeds <output dir>\n");
    return 2;
  }
  const fs::path dir = argv[1];
  fs::create_directories(dir / "envelope");
  std::set<std::string> names;
  bool written = true;
#define HEARTH_WIRE_SEEDS(M) written = write_seeds<M>(dir, #M, names) && written;
  HEARTH_WIRE_MESSAGES(HEARTH_WIRE_SEEDS)
#undef HEARTH_WIRE_SEEDS

  const std::string ok_body = encode(samples::sample<hearth::wire::ok>());
  written = write_file(dir / "envelope" / "other_version", framed("HEARTH/2", "\x69", ok_body)) &&
            written;
  written = write_file(dir / "envelope" / "unknown_command", framed(signature, "\x7f", ok_body)) &&
            written;
  written =
      write_file(dir / "envelope" / "one_frame", framed(signature, "\x69", "").substr(0, 9)) &&
      written;

  std::string dict = "# Written by wire_fuzz_seeds: field and enumeration names, the signature.\n";
  for (const auto& name : names) dict += dict_entry(msgpack_str(name));
  for (int i = 0; job_state_name(job_state(i)) != "unknown"; ++i) {
    dict += dict_entry(msgpack_str(job_state_name(job_state(i))));
  }
  for (int i = 0; error_code_name(error_code(i)) != "unknown"; ++i) {
    dict += dict_entry(msgpack_str(error_code_name(error_code(i))));
  }
  dict += dict_entry(std::string(1, char(signature.size())) + std::string(signature));
  dict += dict_entry("HEARTH/");
  // Float 32 and 64 markers; array, map and string headers at and just past the decoder's limits
  // (4096 items, 256 entries, 4 MiB); a float 32 NaN; float 64 NaN, 2^64 and the largest double.
  using namespace std::string_view_literals;
  for (const std::string_view s :
       {"\xca"sv, "\xcb"sv, "\xdc\x10\x00"sv, "\xdd\x00\x00\x10\x01"sv, "\xde\x01\x00"sv,
        "\xdb\x00\x40\x00\x01"sv, "\xca\x7f\xc0\x00\x00"sv,
        "\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00"sv, "\xcb\x43\xf0\x00\x00\x00\x00\x00\x00"sv,
        "\xcb\x7f\xef\xff\xff\xff\xff\xff\xff"sv}) {
    dict += dict_entry(s);
  }
  written = write_file(dir / "wire.dict", dict) && written;
  return written ? 0 : 1;
}
