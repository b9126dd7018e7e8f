#include "schema/curve-cert.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>

namespace hearth::net {
namespace {

// A certificate is a few hundred bytes; the bound keeps a wrong path (a log, a model) from being
// read whole.
constexpr size_t k_max_cert_bytes = 64 * 1024;

constexpr std::string_view k_z85_alphabet =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

// A Z85 key of 40 characters, or what is wrong with it. Some strings of the alphabet still
// decode past 2^32 per group; zmq_z85_decode catches those.
std::optional<std::string> z85_key_problem(std::string_view key) {
  if (key.size() != z85_key_chars) {
    return "is " + std::to_string(key.size()) + " characters; a Z85 key has " +
           std::to_string(z85_key_chars);
  }
  for (size_t i = 0; i < key.size(); ++i) {
    if (k_z85_alphabet.find(key[i]) == std::string_view::npos) {
      return "has a character that is not Z85 at position " + std::to_string(i + 1);
    }
  }
  uint8_t raw[32];
  const std::string z(key);
  if (zmq_z85_decode(raw, z.c_str()) == nullptr) return "is not a valid Z85 key";
  return std::nullopt;
}

std::string_view trim_right(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// One ZPL line: its depth (4 spaces per level) and `name`, with `value` when it has one.
struct zpl_line {
  size_t depth = 0;
  std::string_view name;
  std::optional<std::string> value;
};

// Parses one non-blank, non-comment line, or says what is wrong with it.
result<zpl_line> zpl_parse_line(std::string_view line) {
  zpl_line out;
  size_t indent = 0;
  while (indent < line.size() && line[indent] == ' ') ++indent;
  if (indent < line.size() && line[indent] == '\t') {
    return error{"a tab in the indentation (ZPL indents with 4 spaces)"};
  }
  if (indent % 4 != 0) {
    return error{"indented by " + std::to_string(indent) + " spaces (ZPL indents by 4)"};
  }
  out.depth = indent / 4;
  std::string_view rest = line.substr(indent);
  size_t n = 0;
  while (n < rest.size() && rest[n] != ' ' && rest[n] != '=' && rest[n] != '#') ++n;
  out.name = rest.substr(0, n);
  if (out.name.empty()) return error{"a line without a name"};
  rest.remove_prefix(n);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  if (rest.empty() || rest.front() == '#') return out;
  if (rest.front() != '=') return error{"expected '=' after '" + std::string(out.name) + "'"};
  rest.remove_prefix(1);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  std::string_view value;
  if (!rest.empty() && (rest.front() == '"' || rest.front() == '\'')) {
    const char quote = rest.front();
    const size_t end = rest.find(quote, 1);
    if (end == std::string_view::npos) return error{"a quoted value without its closing quote"};
    value = rest.substr(1, end - 1);
    rest.remove_prefix(end + 1);
  } else {
    // Bare values end at a space; '#' is a Z85 character, so only " #" starts a comment.
    const size_t end = rest.find(' ');
    value = rest.substr(0, end);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end);
  }
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  if (!rest.empty() && rest.front() != '#') {
    return error{"unexpected text after the value of '" + std::string(out.name) + "'"};
  }
  out.value = std::string(value);
  return out;
}

std::string local_time_text() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

// ZPL cannot carry a double quote or a control character inside a quoted value.
std::string zpl_quotable(const std::string& s) {
  std::string out;
  for (char c : s) out += (c == '"' || uint8_t(c) < 0x20 || c == 0x7f) ? '_' : c;
  return out;
}

std::string cert_body(const curve_cert& c, bool with_secret) {
  std::string s = "metadata\n";
  if (!c.name.empty()) s += "    name = \"" + zpl_quotable(c.name) + "\"\n";
  s += "curve\n";
  s += "    public-key = \"" + c.public_key + "\"\n";
  if (with_secret) s += "    secret-key = \"" + c.secret_key + "\"\n";
  return s;
}

// Creates `path` (never an existing one) with exactly `mode`, whatever the umask, and writes it.
result<void> write_new_file(const std::string& path, const std::string& text, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno == EEXIST) return error{path + " exists; not overwriting it"};
    return error{"cannot create " + path + ": " + std::strerror(errno)};
  }
  bool ok = ::fchmod(fd, mode) == 0;
  size_t done = 0;
  while (ok && done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += size_t(n);
  }
  const int saved = errno;
  ok = (::close(fd) == 0) && ok;
  if (!ok) {
    ::unlink(path.c_str());
    return error{"cannot write " + path + ": " + std::strerror(saved ? saved : errno)};
  }
  return {};
}

}  // namespace

result<curve_cert> curve_cert_generate(std::string name) {
  char pub[z85_key_chars + 1] = {};
  char sec[z85_key_chars + 1] = {};
  if (zmq_curve_keypair(pub, sec) != 0) {
    return error{"cannot make a CURVE key pair: this libzmq was built without CURVE (" +
                 std::string(zmq_strerror(zmq_errno())) + ")"};
  }
  return curve_cert{pub, sec, std::move(name)};
}

result<curve_cert> curve_cert_parse(std::string_view text, const std::string& origin) {
  if (text.size() > k_max_cert_bytes) {
    return error{origin + ": " + std::to_string(text.size()) +
                 " bytes; a certificate file is at most 64 KiB"};
  }
  curve_cert c;
  std::string section;
  bool have_curve = false;
  size_t public_line = 0, secret_line = 0;
  bool have_public = false, have_secret = false;
  size_t line_no = 0;
  auto fail = [&](const std::string& why) {
    return error{origin + ": line " + std::to_string(line_no) + ": " + why};
  };
  while (!text.empty()) {
    ++line_no;
    const size_t eol = text.find('\n');
    std::string_view line = trim_right(text.substr(0, eol));
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    if (line.find('\0') != std::string_view::npos) return fail("a NUL byte (not a text file)");
    const size_t first = line.find_first_not_of(' ');
    if (first == std::string_view::npos || line[first] == '#') continue;
    auto l = zpl_parse_line(line);
    if (!l) return fail(l.message());
    if (l->depth == 0) {
      if (l->value) return fail("'" + std::string(l->name) + "' at column 0 must be a section");
      section = std::string(l->name);
      if (section == "curve") {
        if (have_curve) return fail("a second 'curve' section");
        have_curve = true;
      }
      continue;
    }
    if (section.empty()) return fail("an indented line before any section");
    // Deeper levels and other sections (CZMQ metadata may nest) carry nothing hearth reads.
    if (l->depth > 1 || (section != "curve" && section != "metadata")) continue;
    const std::string name(l->name);
    if (!l->value) return fail("'" + name + "' has no value");
    if (section == "metadata") {
      if (name == "name") c.name = *l->value;
      continue;
    }
    if (name == "public-key" || name == "secret-key") {
      const bool is_public = name == "public-key";
      if (is_public ? have_public : have_secret) return fail("a second '" + name + "'");
      if (auto p = z85_key_problem(*l->value)) return fail(name + " " + *p);
      (is_public ? c.public_key : c.secret_key) = *l->value;
      (is_public ? have_public : have_secret) = true;
      (is_public ? public_line : secret_line) = line_no;
    }
  }
  if (!have_curve) return error{origin + ": no 'curve' section (not a CurveZMQ certificate)"};
  if (!have_public) return error{origin + ": the 'curve' section has no public-key"};
  if (have_secret) {
    char derived[z85_key_chars + 1] = {};
    if (zmq_curve_public(derived, c.secret_key.c_str()) != 0) {
      return error{origin + ": cannot check the key pair: this libzmq was built without CURVE"};
    }
    if (c.public_key != derived) {
      line_no = public_line;
      return fail("public-key does not belong to the secret-key on line " +
                  std::to_string(secret_line) + " (the file was edited or mixes two certificates)");
    }
  }
  return c;
}

result<curve_cert> curve_cert_load(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return error{"cannot read the certificate " + path + ": " + std::strerror(errno)};
  std::string text;
  char buf[4096];
  // One byte past the bound is enough to refuse the file.
  while (text.size() <= k_max_cert_bytes) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int saved = errno;
      ::close(fd);
      return error{"cannot read the certificate " + path + ": " + std::strerror(saved)};
    }
    if (n == 0) break;
    text.append(buf, size_t(n));
  }
  ::close(fd);
  if (text.size() > k_max_cert_bytes) {
    return error{path + ": more than 64 KiB; a certificate file is a few hundred bytes"};
  }
  return curve_cert_parse(text, path);
}

result<curve_cert> curve_cert_load_secret(const std::string& path) {
  auto c = curve_cert_load(path);
  if (c && c->secret_key.empty()) {
    return error{path + ": a public certificate; this needs the secret one (the .key file)"};
  }
  return c;
}

std::string curve_cert_public_text(const curve_cert& c) {
  return "#   ****  Generated on " + local_time_text() +
         " by hearth  ****\n"
         "#   ZeroMQ CURVE Public Certificate\n"
         "#   Exchange securely, or use a secure mechanism to verify the contents\n"
         "#   of this file after exchange. Store public certificates in your home\n"
         "#   directory, in the .curve subdirectory.\n"
         "\n" +
         cert_body(c, false);
}

std::string curve_cert_secret_text(const curve_cert& c) {
  return "#   ****  Generated on " + local_time_text() +
         " by hearth  ****\n"
         "#   ZeroMQ CURVE **Secret** Certificate\n"
         "#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.\n"
         "\n" +
         cert_body(c, true);
}

result<void> curve_cert_save(const curve_cert& c, const std::string& dir, const std::string& name) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return error{"cannot create the folder " + dir + ": " + ec.message()};
  const std::string pub = dir + "/" + name + ".pub";
  const std::string key = dir + "/" + name + ".key";
  // Both checked first so that a refusal leaves no half pair behind.
  for (const auto& p : {pub, key}) {
    if (std::filesystem::exists(std::filesystem::symlink_status(p, ec))) {
      return error{p + " exists; not overwriting it"};
    }
  }
  if (auto r = write_new_file(key, curve_cert_secret_text(c), 0600); !r) return r;
  if (auto r = write_new_file(pub, curve_cert_public_text(c), 0644); !r) {
    ::unlink(key.c_str());
    return r;
  }
  return {};
}

result<curve_client_keys> curve_client_keys_load(const std::string& broker_key_path,
                                                 const std::string& key_path) {
  if (broker_key_path.empty() && key_path.empty()) return curve_client_keys{};
  if (key_path.empty()) {
    return error{"the broker's key (broker-key " + broker_key_path +
                 ") is set but not this peer's own secret key (key); give both or neither"};
  }
  if (broker_key_path.empty()) {
    return error{"this peer's key (key " + key_path +
                 ") is set but not the broker's public key (broker-key); give both or neither"};
  }
  auto broker = curve_cert_load(broker_key_path);
  if (!broker) return broker.err();
  auto own = curve_cert_load_secret(key_path);
  if (!own) return own.err();
  return curve_client_keys{broker->public_key, std::move(own.value())};
}

void curve_client_apply(zmq::socket_t& s, const curve_client_keys& keys) {
  if (!keys.enabled()) return;
  s.set(zmq::sockopt::curve_serverkey, keys.broker_public);
  s.set(zmq::sockopt::curve_publickey, keys.own.public_key);
  s.set(zmq::sockopt::curve_secretkey, keys.own.secret_key);
}

}  // namespace hearth::net
