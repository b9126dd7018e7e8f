// The dashboard's files (dashboard/, bundled by esbuild), embedded into hearth-gateway at build
// time by cmake/embed-files.cmake so that the binary and its package need nothing else. The
// library hearth_dashboard_files defines dashboard_files(); with HEARTH_DASHBOARD=OFF it holds
// none.
#pragma once

#include <span>
#include <string_view>

namespace hearth::gateway {

struct dashboard_file {
  std::string_view name;          // "index.html", "app.js" (served under /dashboard/)
  std::string_view content_type;  // from the extension
  std::string_view etag;          // quoted, from the bytes' SHA-256
  std::string_view body;
};

// Every embedded file; empty when built without the dashboard.
std::span<const dashboard_file> dashboard_files();

}  // namespace hearth::gateway
