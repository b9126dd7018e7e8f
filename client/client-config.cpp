#include "client/client-config.h"

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace hearth::client {
namespace {

std::string flag_or_env(std::string_view flag, const char* env) {
  if (!flag.empty()) return std::string(flag);
  if (const char* v = std::getenv(env); v && *v) return v;
  return {};
}

}  // namespace

std::string client_config_dir() {
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg) {
    return std::string(xdg) + "/hearth";
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return std::string(home) + "/.config/hearth";
  }
  return {};
}

std::string broker_endpoint(std::string_view flag) {
  if (auto e = flag_or_env(flag, "HEARTH_BROKER"); !e.empty()) return e;
  return std::string(broker_endpoint_default);
}

net::curve_client_keys broker_keys(std::string_view broker_key_flag, std::string_view key_flag) {
  std::string broker_key = flag_or_env(broker_key_flag, "HEARTH_BROKER_KEY");
  std::string key = flag_or_env(key_flag, "HEARTH_KEY");
  if (broker_key.empty() && key.empty()) {
    const std::string dir = client_config_dir();
    std::error_code ec;
    if (dir.empty() || !std::filesystem::exists(dir + "/broker.pub", ec) ||
        !std::filesystem::exists(dir + "/client.key", ec)) {
      return {};
    }
    broker_key = dir + "/broker.pub";
    key = dir + "/client.key";
  }
  if (key.empty()) {
    throw std::runtime_error("--broker-key " + broker_key +
                             " needs --key FILE (or $HEARTH_KEY): this client's secret "
                             "certificate, made by `hearth keygen`");
  }
  if (broker_key.empty()) {
    throw std::runtime_error("--key " + key +
                             " needs --broker-key FILE (or $HEARTH_BROKER_KEY): the broker's "
                             "public certificate");
  }
  auto keys = net::curve_client_keys_load(broker_key, key);
  if (!keys) throw std::runtime_error(keys.message());
  return std::move(keys).value();
}

}  // namespace hearth::client
