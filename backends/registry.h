// The device registry: every backend of this process (the CPU, and each GPU module that loaded)
// with its devices in one description (backends/device.h), or, for a module that did not load or
// found no device, why. Discovery for the node's hello (node/hardware.cpp), `hearth devices` and
// placement (backends/select.cpp) all read it; tests build their own with fake entries.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/device.h"
#include "engine/backend.h"

namespace hearth::gpu {

struct backend_entry {
  backend_kind kind = backend_kind::cpu;
  std::string name;   // "cpu", "vulkan", "cuda" (a fake in tests): in reports and notes
  std::string title;  // "CPU", "Vulkan", "CUDA": in sentences
  bool loaded = false;
  // Why it did not load ("libhearth-cuda.so: libcublas.so.13: cannot open shared object file"),
  // or, loaded, why it has no device ("no NVIDIA driver (libcuda) found"); "" otherwise.
  std::string why;
  // The devices, enumerated now; empty when not loaded. Never throws.
  std::function<std::vector<device>()> devices;
  // A backend on device `index`; throws std::runtime_error with one line when it cannot start.
  std::function<std::unique_ptr<backend>(int index)> make;
};

class registry {
 public:
  // Entries keep the order they are added in: the order device_better prefers backends in.
  void add(backend_entry e) { entries_.push_back(std::move(e)); }
  const std::vector<backend_entry>& backends() const { return entries_; }
  // The entry of that kind, or nullptr (automatic has none).
  const backend_entry* find(backend_kind k) const;

  // The best device of backend `k` (automatic: of every GPU backend, CPU implementations left
  // out) by device_better; `entry` is set to its backend. False when there is none.
  bool best(backend_kind k, device& out, const backend_entry*& entry) const;
  // Why backend `k` has no device to run on ("not loaded: <why>", "no device: <why>"); "" when
  // it has one.
  std::string why_no_device(backend_kind k) const;

 private:
  std::vector<backend_entry> entries_;
};

// This process's registry, made on first use: the CPU, then the CUDA and Vulkan modules found
// (backends/modules.h), in that order.
const registry& device_registry();

// One line per backend for logs and reports: "cuda: not loaded: <why>", "vulkan: 1 device",
// "vulkan: loaded, no device: <why>".
std::vector<std::string> registry_report(const registry& r);

}  // namespace hearth::gpu
