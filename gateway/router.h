// The gateway's routes: method + path pattern -> handler. A pattern's "{name}" segment matches
// one path segment and lands in exchange::params["name"]. The HTTP server (http-server.*) looks a
// request up here, answers 404 (no such path) or 405 (path known, method not) itself, checks the
// caller's API key unless the route is public, then calls the handler.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/http.h"

namespace hearth::gateway {

struct route_options {
  bool is_public = false;  // no API key needed (/health)
  // The largest request body this route takes; 0 = the server's max_body_bytes. A larger body
  // is answered 413 before it is read.
  uint64_t max_body_bytes = 0;
};

class router {
 public:
  void add(std::string method, std::string pattern, handler h, route_options o = {});

  struct match {
    const handler* h = nullptr;
    route_options options;
    std::map<std::string, std::string> params;
    bool path_known = false;  // some route has this path, with another method (405)
  };
  // The route for `method` and `path` (h == nullptr when none).
  match find(std::string_view method, std::string_view path) const;

 private:
  struct route {
    std::string method;
    std::vector<std::string> segments;  // "{id}" = a parameter
    handler h;
    route_options options;
  };
  std::vector<route> routes_;
};

}  // namespace hearth::gateway
