#include "tools/load.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

namespace hearth::cli {

void add_backend_options(CLI::App* cmd, backend_options& o) {
  cmd->add_option("--backend", o.backend,
                  "cpu, cuda (an NVIDIA GPU), vulkan (a Vulkan device) — each falling back to "
                  "the CPU when it cannot run the model — or auto (a CUDA GPU if there is one, "
                  "else a Vulkan GPU)")
      ->check(CLI::IsMember({"cpu", "cuda", "vulkan", "auto"}))
      ->capture_default_str();
  o.device_opt = cmd->add_option(
      "--device", o.device, "device index of that backend (hearth devices); default: the best");
}

gpu::loaded_model load_model(const std::string& path, const backend_options& o, int threads,
                             int32_t n_ctx) {
  gpu::backend_choice choice;
  choice.kind = gpu::backend_kind_from_name(o.backend).value_or(gpu::backend_kind::cpu);
  if (o.device_opt && o.device_opt->count() > 0) {
    if (choice.kind == gpu::backend_kind::cpu)
      throw std::runtime_error("--device needs --backend cuda, vulkan or auto");
    if (o.device < 0) throw std::runtime_error("--device must not be negative");
    choice.device = o.device;
  }
  choice.threads = threads;
  choice.n_ctx_per_seq = n_ctx;
  model_params mp;
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
  auto m = gpu::load_model_on(path, choice, mp);
  if (!m.note.empty()) std::fprintf(stderr, "%s\n", m.note.c_str());
  return m;
}

std::string backend_text(const gpu::loaded_model& m) {
  return m.device_name.empty() ? m.backend : m.backend + " (" + m.device_name + ")";
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
