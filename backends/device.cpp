#include "backends/device.h"

namespace hearth::gpu {

std::optional<backend_kind> backend_kind_from_name(const std::string& name) {
  if (name == "cpu") return backend_kind::cpu;
  if (name == "vulkan") return backend_kind::vulkan;
  if (name == "cuda") return backend_kind::cuda;
  if (name == "auto") return backend_kind::automatic;
  return std::nullopt;
}

const char* backend_kind_name(backend_kind k) {
  switch (k) {
    case backend_kind::cpu:
      return "cpu";
    case backend_kind::vulkan:
      return "vulkan";
    case backend_kind::cuda:
      return "cuda";
    case backend_kind::automatic:
      return "auto";
  }
  return "cpu";
}

const char* device_type_name(device_type t) {
  switch (t) {
    case device_type::discrete:
      return "discrete";
    case device_type::integrated:
      return "integrated";
    case device_type::virtual_gpu:
      return "virtual";
    case device_type::cpu:
      return "cpu";
    case device_type::other:
      return "other";
  }
  return "other";
}

namespace {

// Lower is better.
int type_rank(device_type t) {
  switch (t) {
    case device_type::discrete:
      return 0;
    case device_type::integrated:
      return 1;
    case device_type::virtual_gpu:
      return 2;
    case device_type::other:
      return 3;
    case device_type::cpu:
      return 4;
  }
  return 3;
}

}  // namespace

bool device_better(const device& a, int a_order, const device& b, int b_order) {
  if (type_rank(a.type) != type_rank(b.type)) return type_rank(a.type) < type_rank(b.type);
  if (a_order != b_order) return a_order < b_order;
  return a.memory_total > b.memory_total;
}

}  // namespace hearth::gpu
