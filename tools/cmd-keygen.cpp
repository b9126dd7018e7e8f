// hearth keygen: a CurveZMQ key pair as two certificates in CZMQ's zcert format
// (schema/curve-cert.h): NAME.pub to hand to the broker's admin, NAME.key to keep.
#include <cstdio>
#include <stdexcept>

#include "schema/curve-cert.h"
#include "tools/commands.h"

namespace hearth::cli {
namespace {

struct keygen_options {
  std::string name;
  std::string dir = ".";
};

// NAME becomes two file names and a quoted metadata value: one plain name, no path.
void check_key_name(const std::string& name) {
  if (name.empty()) throw std::runtime_error("the key name is empty");
  if (name.find('/') != std::string::npos) {
    throw std::runtime_error("the key name '" + name + "' has a '/'; give the folder with --dir");
  }
  if (name.front() == '.') {
    throw std::runtime_error("the key name '" + name + "' starts with '.'");
  }
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f || c == '"') {
      throw std::runtime_error("the key name has a control character or a '\"'");
    }
  }
}

int keygen(const keygen_options& o) {
  check_key_name(o.name);
  auto cert = net::curve_cert_generate(o.name);
  if (!cert) throw std::runtime_error(cert.message());
  if (auto r = net::curve_cert_save(*cert, o.dir, o.name); !r) {
    throw std::runtime_error(r.message());
  }
  const std::string base = o.dir + "/" + o.name;
  std::printf("public certificate: %s.pub (give it to the broker's admin)\n", base.c_str());
  std::printf("secret certificate: %s.key (keep it; mode 0600)\n", base.c_str());
  std::printf("public key: %s\n", cert->public_key.c_str());
  return 0;
}

}  // namespace

action add_keygen(CLI::App& app) {
  auto o = std::make_shared<keygen_options>();
  CLI::App* cmd = app.add_subcommand(
      "keygen", "Make a CurveZMQ key pair: DIR/NAME.pub (public) and DIR/NAME.key (secret)");
  cmd->add_option("name", o->name, "Key name: node, client or admin name (no '/')")->required();
  cmd->add_option("--dir", o->dir, "Folder for the two files (default: the current one)");
  return [o] { return keygen(*o); };
}

}  // namespace hearth::cli
