// One device a model can run on, as every backend describes it: the one description that the
// registry holds (backends/registry.h), `hearth devices` prints, placement ranks (device_better)
// and the node's hello carries (filled from it by node/hardware.cpp). A new device property is a
// field here, set by the backend that knows it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hearth::gpu {

// The backends of the registry, and what a caller may ask for. Only the config and CLI parsers
// see these as strings (backend_kind_from_name); everything after them holds the kind.
enum class backend_kind {
  cpu,        // the reference CPU backend
  vulkan,     // a Vulkan device (any type, lavapipe included)
  cuda,       // an NVIDIA GPU through CUDA
  automatic,  // a request only: the best GPU of any backend (never a CPU implementation such as
              // lavapipe); no device has this kind
};

// "cpu" | "vulkan" | "cuda" | "auto" -> kind; nullopt for anything else.
std::optional<backend_kind> backend_kind_from_name(const std::string& name);
// "cpu", "vulkan", "cuda", "auto": for logs, reports and the wire.
const char* backend_kind_name(backend_kind k);

// 16 UUID bytes as 32 lowercase hex digits; "" when all are zero (a driver that does not say).
// Inline: the backend modules, which fill devices, link nothing of hearth_backends.
inline std::string uuid_hex(const unsigned char (&bytes)[16]) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  bool any = false;
  for (unsigned char b : bytes) {
    any = any || b != 0;
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return any ? s : std::string();
}

enum class device_type { discrete, integrated, virtual_gpu, cpu, other };
// "discrete", "integrated", "virtual", "cpu", "other".
const char* device_type_name(device_type t);

// One memory heap of a device, as the driver describes it.
struct memory_heap {
  uint64_t size = 0;  // bytes
  bool device_local = false;
};

struct device {
  std::string name;  // "NVIDIA GeForce RTX 4090", "llvmpipe (LLVM 15.0.6, 256 bits)"
  backend_kind backend = backend_kind::cpu;
  int index = 0;  // within its backend: what --device names
  device_type type = device_type::other;
  std::string vendor;         // "NVIDIA", "AMD", "Intel", "Mesa", ... or "0x1234"; "" unknown
  uint64_t memory_total = 0;  // bytes of device-local memory (the sum of those heaps)
  uint64_t memory_free = 0;   // bytes the driver says are free now; 0: it does not say
  // Share of the last sample period the device was busy, 0 to 1 (NVML's GPU utilisation);
  // negative: the backend does not say.
  double utilization = -1;
  std::vector<memory_heap> heaps;
  bool subgroup_arithmetic = false;  // Vulkan: compute shaders have subgroupAdd/subgroupMax
  std::string compute_capability;    // CUDA: "8.6", "9.0"; "" otherwise
  // The card's UUID as 32 hex digits where the driver says ("" unknown). CUDA and Vulkan report
  // the same one for the same NVIDIA card, so a node can advertise it once.
  std::string uuid;
  std::string detail;  // one backend-specific line ("compute capability 9.0")

  // What a model may take: free memory where the driver says, else the total.
  uint64_t memory_available() const { return memory_free > 0 ? memory_free : memory_total; }
};

// The one device ranking: whether `a` is a better place for a model than `b` — a discrete GPU
// before an integrated one before a virtual one before anything else before a CPU
// implementation; then the backend listed first in the registry (`a_order`, `b_order`: CUDA
// before Vulkan, so an NVIDIA card seen by both runs on CUDA); then the most memory.
bool device_better(const device& a, int a_order, const device& b, int b_order);

}  // namespace hearth::gpu
