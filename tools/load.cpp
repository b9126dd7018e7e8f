#include "tools/load.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

namespace hearth::cli {

std::unique_ptr<model> load_model(const std::string& path, int threads) {
  model_params mp;
  mp.n_threads = threads;
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  const bool show = !ec && size > (64u << 20) && isatty(STDERR_FILENO);
  auto last = std::chrono::steady_clock::now();
  if (show) {
    mp.progress = [&](uint64_t done, uint64_t total) {
      const auto now = std::chrono::steady_clock::now();
      if (done < total && now - last < std::chrono::milliseconds(100)) return;
      last = now;
      const int width = 40;
      const int filled = int(double(done) / double(total) * width);
      std::fprintf(stderr, "\rloading %s [%.*s%*s] %3d%%",
                   std::filesystem::path(path).filename().c_str(), filled,
                   "########################################", width - filled, "",
                   int(100.0 * double(done) / double(total)));
      if (done == total) std::fprintf(stderr, "\n");
      std::fflush(stderr);
    };
  }
  return model::load(path, mp);
}

std::vector<int32_t> parse_token_list(const std::string& s) {
  std::vector<int32_t> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const std::string item =
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < 0 || v > 0x7fffffff) {
      throw std::runtime_error("--tokens: '" + item + "' is not a token id");
    }
    out.push_back(int32_t(v));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace hearth::cli
