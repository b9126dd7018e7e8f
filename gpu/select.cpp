#include "gpu/select.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "engine/context.h"
#include "engine/system-info.h"
#include "engine/tensor-type.h"

#if defined(HEARTH_HAVE_VULKAN_BACKEND) && __has_include("gpu/vulkan/backend-vulkan.h")
#include "gpu/vulkan/backend-vulkan.h"
#define HEARTH_SELECT_VULKAN 1
#endif
#if defined(HEARTH_HAVE_CUDA_BACKEND) && __has_include("gpu/cuda/backend-cuda.h")
#include "gpu/cuda/backend-cuda.h"
#define HEARTH_SELECT_CUDA 1
#endif

namespace hearth::gpu {
namespace {

// Lower is better: what `best` prefers among devices.
int type_rank(const std::string& type) {
  if (type == "discrete") return 0;
  if (type == "integrated") return 1;
  if (type == "virtual") return 2;
  if (type == "cpu") return 4;
  return 3;
}

// Exceptions become one line, whatever they hold.
std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  while (!s.empty() && (s.back() == ' ' || s.back() == '.')) s.pop_back();
  return s;
}

std::string on_cpu(const std::string& why) {
  return why + "; running on the CPU";
}

}  // namespace

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

device_backend_source vulkan_source() {
  device_backend_source s;
  s.name = "vulkan";
  s.title = "Vulkan";
#ifdef HEARTH_SELECT_VULKAN
  s.built = true;
  s.devices = [] {
    std::vector<backend_device> out;
    for (const auto& d : vulkan_devices()) {
      out.push_back(
          {d.index, d.name, d.vendor, d.type, d.device_local_bytes, d.subgroup_arithmetic});
    }
    return out;
  };
  s.make = [](int index) {
    vulkan_options o;
    o.device = index;
    return make_vulkan_backend(o);
  };
#else
  s.devices = [] { return std::vector<backend_device>{}; };
  s.make = [](int) -> std::unique_ptr<backend> {
    throw std::runtime_error("this build has no Vulkan backend");
  };
#endif
  return s;
}

device_backend_source cuda_source() {
  device_backend_source s;
  s.name = "cuda";
  s.title = "CUDA";
#ifdef HEARTH_SELECT_CUDA
  s.built = true;
  s.devices = [] {
    std::vector<backend_device> out;
    for (const auto& d : cuda::devices()) {
      backend_device b;
      b.index = d.index;
      b.name = d.name;
      b.vendor = "NVIDIA";
      b.type = "discrete";  // CUDA does not say; integrated parts (Jetson) share system memory
      b.memory_bytes = d.memory_total;
      b.memory_free = d.memory_free;
      b.detail = "compute capability " + cuda::compute_capability(d);
      out.push_back(std::move(b));
    }
    return out;
  };
  s.make = [](int index) {
    cuda_options o;
    o.device = index;
    return make_cuda_backend(o);
  };
#else
  s.devices = [] { return std::vector<backend_device>{}; };
  s.make = [](int) -> std::unique_ptr<backend> {
    throw std::runtime_error("this build has no CUDA backend");
  };
#endif
  return s;
}

device_backend_source source_for(backend_kind k) {
  if (k == backend_kind::cuda) return cuda_source();
  if (k == backend_kind::automatic) {
    device_backend_source c = cuda_source();
    if (c.built && !c.devices().empty()) return c;
  }
  return vulkan_source();
}

backend_plan backend_plan_for(const backend_choice& choice, const device_backend_source& source) {
  backend_plan plan;
  if (choice.kind == backend_kind::cpu) return plan;
  const std::string who = choice.kind == backend_kind::automatic ? "auto" : source.name;
  if (!source.built) {
    plan.note = on_cpu(who + ": this build has no " + source.title + " backend");
    return plan;
  }
  const auto devices = source.devices ? source.devices() : std::vector<backend_device>{};
  if (devices.empty()) {
    plan.note = on_cpu(who + ": no " + source.title + " device found");
    return plan;
  }
  const backend_device* pick = nullptr;
  if (choice.device >= 0) {
    for (const auto& d : devices)
      if (d.index == choice.device) pick = &d;
    if (!pick) {
      plan.note = on_cpu(who + ": there is no device " + std::to_string(choice.device) + " (" +
                         std::to_string(devices.size()) + " device" +
                         (devices.size() == 1 ? "" : "s") + ", see `hearth devices`)");
      return plan;
    }
  } else {
    for (const auto& d : devices) {
      if (choice.kind == backend_kind::automatic && d.type == "cpu") continue;
      if (!pick || type_rank(d.type) < type_rank(pick->type) ||
          (type_rank(d.type) == type_rank(pick->type) && d.memory_bytes > pick->memory_bytes)) {
        pick = &d;
      }
    }
    if (!pick) {
      // Only CPU implementations: the CPU backend is faster than running through them.
      plan.note = on_cpu("auto: no " + source.title + " GPU found (" + devices.front().name +
                         " is a CPU implementation; ask for " + source.name + " to use it)");
      return plan;
    }
  }
  plan.backend = source.name;
  plan.device = pick->index;
  plan.device_name = pick->name;
  plan.device_memory = pick->memory_free > 0 ? pick->memory_free : pick->memory_bytes;
  return plan;
}

context_params device_context_params(const model_hparams& hp, int32_t n_ctx_per_seq,
                                     int32_t n_seq) {
  const int64_t per_seq = n_ctx_per_seq > 0 ? n_ctx_per_seq : context_params_resolved(hp, {}).n_ctx;
  context_params p;
  p.n_seq_max = std::max(1, n_seq);
  p.n_ctx = int32_t(std::min<int64_t>(per_seq * p.n_seq_max, INT32_MAX));
  return p;
}

memory_estimate device_memory_needed(const model_file& f, int32_t n_ctx_per_seq, int32_t n_seq) {
  return memory_needed(f.hparams, f.weight_bytes,
                       device_context_params(f.hparams, n_ctx_per_seq, n_seq));
}

std::vector<std::string> unsupported_weight_types(const gguf_file& f, const backend& b) {
  std::set<uint32_t> seen;
  std::vector<std::string> out;
  for (const auto& t : f.tensors()) {
    if (t.n_dims < 2 || b.supports_weight_type(t.type)) continue;
    if (seen.insert(uint32_t(t.type)).second) out.emplace_back(tensor_type_name(t.type));
  }
  return out;
}

namespace {

// The largest context per sequence (a multiple of 256 cells, at least 256, below `asked`) whose
// weights and cache fit in `memory`; 0 when none does.
int32_t context_that_fits(const model_file& f, int32_t asked, int32_t n_seq, uint64_t memory) {
  for (int32_t cells = (asked - 1) / 256 * 256; cells >= 256; cells -= 256) {
    if (device_memory_needed(f, cells, n_seq).total() <= memory) return cells;
  }
  return 0;
}

// Why the planned device cannot run the model in `f` ("" when it can), checked in order of
// cost: memory for the weights and the cache, the backend starting (made into `made`), a kernel
// for every weight type. Nothing is uploaded.
std::string device_unfit(const model_file& f, const backend_plan& plan, backend_choice& choice,
                         const device_backend_source& source, std::unique_ptr<backend>& made,
                         std::string& context_note) {
  const std::string& dev = plan.device_name;
  const auto need = device_memory_needed(f, choice.n_ctx_per_seq, choice.n_seq);
  if (need.total() > plan.device_memory) {
    // The model's default context is a preference, not a requirement: take what fits.
    const int32_t asked = context_params_resolved(f.hparams, {}).n_ctx;
    const int32_t fits = choice.n_ctx_per_seq == 0
                             ? context_that_fits(f, asked, choice.n_seq, plan.device_memory)
                             : 0;
    if (fits == 0) {
      return dev + " has " + format_bytes(plan.device_memory) +
             " of device memory but the model needs " + format_bytes(need.total()) + " (weights " +
             format_bytes(need.weights) + " + cache " + format_bytes(need.context()) + ")";
    }
    choice.n_ctx_per_seq = fits;
    context_note = source.name + ": " + dev + " has room for " + std::to_string(fits) +
                   " tokens of context per sequence (of " + std::to_string(asked) +
                   "): the cache is sized to its free memory";
  }
  try {
    made = source.make(plan.device);
  } catch (const std::exception& e) {
    std::string msg = one_line(e.what());
    if (msg.rfind(source.name + ": ", 0) == 0) msg.erase(0, source.name.size() + 2);
    return dev + ": " + msg;
  }
  if (!made) return dev + ": the backend did not start";
  const auto missing = unsupported_weight_types(f.gguf, *made);
  if (!missing.empty()) {
    std::string list;
    for (const auto& t : missing) list += (list.empty() ? "" : ", ") + t;
    return dev + " has no " + list + " matrix kernel" + (missing.size() > 1 ? "s" : "") + " yet";
  }
  return "";
}

}  // namespace

loaded_model load_model_on(const std::string& path, const backend_choice& choice,
                           const model_params& params) {
  return load_model_on(path, choice, params, source_for(choice.kind));
}

loaded_model load_model_on(const std::string& path, const backend_choice& asked,
                           const model_params& params, const device_backend_source& source) {
  // Opened once: the fit is checked against this handle and the model loaded from it.
  model_file file = model::open(path);

  loaded_model out;
  backend_choice choice = asked;
  model_params mp = params;
  mp.n_threads = choice.threads;
  mp.make_backend = nullptr;

  const backend_plan plan = backend_plan_for(choice, source);
  out.note = plan.note;
  if (plan.device >= 0) {
    std::unique_ptr<backend> device_backend;
    std::string context_note;
    std::string why = device_unfit(file, plan, choice, source, device_backend, context_note);
    if (why.empty()) {
      // The factory hands over the backend made above; the model owns it from then on.
      auto holder = std::make_shared<std::unique_ptr<backend>>(std::move(device_backend));
      mp.make_backend = [holder] { return std::move(*holder); };
      try {
        // A copy of the handle (its metadata; the mapping is shared), kept for the CPU fallback.
        out.model = model::load(file, mp);
        out.backend = plan.backend;
        out.device = plan.device;
        out.device_name = plan.device_name;
        if (!context_note.empty()) {
          out.note = context_note;
          out.n_ctx_per_seq = choice.n_ctx_per_seq;
        }
        return out;
      } catch (const std::exception& e) {
        why = plan.device_name + ": " + one_line(e.what());
      }
      mp.make_backend = nullptr;
    }
    out.note = on_cpu(source.name + ": " + why);
  }
  out.model = model::load(std::move(file), mp);
  return out;
}

}  // namespace hearth::gpu
