#include "schema/endpoint.h"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>

namespace hearth::net {
namespace {

// HOST of tcp://HOST:PORT ([IPv6] without its brackets), "" when there is none.
std::string tcp_host(const std::string& endpoint) {
  if (!endpoint.starts_with("tcp://")) return "";
  std::string rest = endpoint.substr(6);
  const auto colon = rest.rfind(':');
  if (colon == std::string::npos) return "";
  std::string host = rest.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host;
}

}  // namespace

result<void> endpoint_check(const std::string& endpoint) {
  const auto scheme_end = endpoint.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "" : endpoint.substr(0, scheme_end);
  const std::string rest = scheme_end == std::string::npos ? "" : endpoint.substr(scheme_end + 3);
  bool ok = (scheme == "ipc" || scheme == "inproc") && !rest.empty();
  if (scheme == "tcp") {
    const auto colon = rest.rfind(':');
    const std::string port = colon == std::string::npos ? "" : rest.substr(colon + 1);
    ok = colon != std::string::npos && colon > 0 && !port.empty() &&
         (port == "*" ||
          (port.size() <= 5 &&
           std::all_of(port.begin(), port.end(),
                       [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) &&
           std::stoul(port) <= 65535));
  }
  if (ok) return {};
  std::string hint;
  if (scheme.empty() && endpoint.find(':') != std::string::npos) {
    hint = " (did you mean tcp://" + endpoint + "?)";
  }
  return error{"broker endpoint '" + endpoint +
               "': expected tcp://HOST:PORT (such as tcp://127.0.0.1:5555), or ipc://PATH" + hint};
}

result<void> endpoint_host_check(const std::string& endpoint) {
  const std::string host = tcp_host(endpoint);
  if (host.empty() || host == "*") return {};
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (found) freeaddrinfo(found);
  if (rc == 0) return {};
  return error{"broker endpoint '" + endpoint + "': cannot resolve host '" + host +
               "': " + gai_strerror(rc)};
}

}  // namespace hearth::net
