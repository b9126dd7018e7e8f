// A broker's endpoint as a person writes it (--broker, $HEARTH_BROKER, the YAML files), checked
// before ZeroMQ sees it: ZeroMQ's own answer to "10.77.0.1:5555" is "Invalid argument", and it
// retries a host name that does not resolve without a word, which looks like a broker that does
// not answer.
#pragma once

#include <string>

#include "common/result.h"

namespace hearth::net {

// tcp://HOST:PORT, ipc://PATH or inproc://NAME; an error names the expected form.
result<void> endpoint_check(const std::string& endpoint);

// For tcp://HOST:PORT, whether HOST resolves (getaddrinfo); an error names the host and why.
// Other endpoints pass.
result<void> endpoint_host_check(const std::string& endpoint);

}  // namespace hearth::net
