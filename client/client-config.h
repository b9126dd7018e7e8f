// Which broker a client talks to and with which keys, as the CLI's users configure it: flags,
// else the environment ($HEARTH_BROKER, $HEARTH_BROKER_KEY, $HEARTH_KEY), else the files in
// ~/.config/hearth.
#pragma once

#include <string>
#include <string_view>

#include "schema/curve-cert.h"

namespace hearth::client {

inline constexpr std::string_view broker_endpoint_default = "tcp://127.0.0.1:5555";

// The broker to talk to: `flag` (--broker) when set, else $HEARTH_BROKER, else the default.
std::string broker_endpoint(std::string_view flag);

// Where the CLI looks for its keys by default: $XDG_CONFIG_HOME/hearth, else ~/.config/hearth;
// empty when neither variable is set.
std::string client_config_dir();

// The CURVE keys to talk to the broker with: the files `broker_key_flag` (--broker-key, the
// broker's public certificate) and `key_flag` (--key, this client's secret certificate), each
// else $HEARTH_BROKER_KEY / $HEARTH_KEY. When neither is given: $XDG_CONFIG_HOME/hearth/broker.pub
// and client.key (XDG_CONFIG_HOME defaults to ~/.config) when both files exist, else no keys
// (plain ZMTP). Throws std::runtime_error when only one is given or a file does not load.
net::curve_client_keys broker_keys(std::string_view broker_key_flag, std::string_view key_flag);

// What a broker command's flags say about the broker: --broker, --broker-key and --key, each
// empty when not given (broker_endpoint() and broker_keys() resolve them).
struct broker_options {
  std::string endpoint;
  std::string broker_key;
  std::string key;
};

}  // namespace hearth::client
