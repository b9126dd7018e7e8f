// The web dashboard's files (dashboard/, embedded at build time: dashboard-files.h): GET / sends
// the browser to /dashboard/, GET /dashboard/{file} serves one embedded file by its exact name (no
// file system is read, so no path can reach outside the bundle). Public routes: the page holds
// no data, and asks for the API key itself. Every file is revalidated (ETag) since the names
// carry no content hash, and a strict Content-Security-Policy allows only the bundle's own
// script and style and requests to this gateway.
#include <algorithm>

#include "gateway/routes.h"

namespace hearth::gateway {
namespace {

constexpr std::string_view k_csp =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

http_response redirect_to_dashboard() {
  http_response r;
  r.status = 302;
  r.content_type.clear();
  r.headers = {{"Location", "/dashboard/"}, {"Cache-Control", "no-cache"}};
  return r;
}

http_response no_dashboard() {
  return error_response(404, "this gateway was built without the dashboard (HEARTH_DASHBOARD=OFF)",
                        "not_found_error", {}, "dashboard_not_built");
}

void serve_file(std::span<const dashboard_file> files, const std::string& name,
                const std::shared_ptr<exchange>& ex) {
  if (files.empty()) return ex->out->reply(no_dashboard());
  auto it = std::find_if(files.begin(), files.end(),
                         [&](const dashboard_file& f) { return f.name == name; });
  if (it == files.end()) {
    return ex->out->reply(error_response(404, "the dashboard has no file '" + name + "'",
                                         "not_found_error", {}, "not_found"));
  }
  http_response r;
  r.headers = {{"Cache-Control", "no-cache"},
               {"ETag", std::string(it->etag)},
               {"Content-Security-Policy", std::string(k_csp)},
               {"X-Content-Type-Options", "nosniff"},
               {"Referrer-Policy", "no-referrer"},
               {"X-Frame-Options", "DENY"}};
  if (ex->request.header("if-none-match") == it->etag) {
    r.status = 304;
    r.content_type.clear();
  } else {
    r.content_type = std::string(it->content_type);
    r.body = std::string(it->body);
  }
  ex->out->reply(std::move(r));
}

}  // namespace

void add_dashboard_routes(router& r, std::span<const dashboard_file> files) {
  const route_options pub{.is_public = true};
  auto to_index = [files](std::shared_ptr<exchange> ex) {
    ex->out->reply(files.empty() ? no_dashboard() : redirect_to_dashboard());
  };
  r.add("GET", "/", to_index, pub);
  r.add("GET", "/dashboard", to_index, pub);
  r.add(
      "GET", "/dashboard/",
      [files](std::shared_ptr<exchange> ex) { serve_file(files, "index.html", ex); }, pub);
  r.add(
      "GET", "/dashboard/{file}",
      [files](std::shared_ptr<exchange> ex) { serve_file(files, ex->params["file"], ex); }, pub);
}

}  // namespace hearth::gateway
