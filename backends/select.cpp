#include "backends/select.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "engine/context.h"
#include "engine/io/tensor-type.h"
#include "engine/system-info.h"

namespace hearth::gpu {
namespace {

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

namespace {

// Why `k` has no GPU for `auto`: each GPU backend's reason, or the CPU implementation it has.
std::string no_gpu_reasons(const registry& devices) {
  std::string out;
  for (const auto& e : devices.backends()) {
    if (e.kind == backend_kind::cpu) continue;
    std::string why;
    if (!e.loaded) {
      why = "not loaded: " + e.why;
    } else {
      const auto list = e.devices();
      if (list.empty())
        why = e.why.empty() ? "no device" : e.why;
      else
        why = list.front().name + " is a CPU implementation; ask for " + e.name + " to use it";
    }
    out += (out.empty() ? "" : "; ") + e.name + ": " + why;
  }
  return out;
}

}  // namespace

backend_plan backend_plan_for(const backend_choice& choice, const registry& devices) {
  backend_plan plan;
  if (choice.kind == backend_kind::cpu) return plan;
  device pick;
  const backend_entry* entry = nullptr;
  if (choice.kind == backend_kind::automatic) {
    if (!devices.best(backend_kind::automatic, pick, entry)) {
      // Only CPU implementations, or nothing: the CPU backend is faster than running through them.
      const std::string why = no_gpu_reasons(devices);
      plan.note = on_cpu("auto: no GPU found" + (why.empty() ? "" : " (" + why + ")"));
      return plan;
    }
  } else {
    entry = devices.find(choice.kind);
    const std::string who = entry ? entry->name : backend_kind_name(choice.kind);
    if (!entry || !entry->loaded) {
      plan.note = on_cpu(who + ": the " + (entry ? entry->title : std::string(who)) +
                         " backend is not loaded" + (entry ? " (" + entry->why + ")" : ""));
      return plan;
    }
    const auto list = entry->devices();
    if (list.empty()) {
      plan.note = on_cpu(who + ": no " + entry->title + " device found" +
                         (entry->why.empty() ? "" : " (" + entry->why + ")"));
      return plan;
    }
    if (choice.device >= 0) {
      bool found = false;
      for (const auto& d : list) {
        if (d.index != choice.device) continue;
        pick = d;
        found = true;
      }
      if (!found) {
        plan.note = on_cpu(who + ": there is no device " + std::to_string(choice.device) + " (" +
                           std::to_string(list.size()) + " device" + (list.size() == 1 ? "" : "s") +
                           ", see `hearth devices`)");
        return plan;
      }
    } else {
      devices.best(choice.kind, pick, entry);
    }
  }
  plan.backend = entry->kind;
  plan.backend_name = entry->name;
  plan.device = pick.index;
  plan.device_name = pick.name;
  plan.device_memory = pick.memory_available();
  return plan;
}

int32_t context_per_seq(const model_hparams& hp, int32_t n_ctx_per_seq) {
  return n_ctx_per_seq > 0 ? n_ctx_per_seq : context_params_resolved(hp, {}).n_ctx;
}

context_params device_context_params(const model_hparams& hp, int32_t n_ctx_per_seq,
                                     int32_t n_seq) {
  const int64_t per_seq = context_per_seq(hp, n_ctx_per_seq);
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
                         const backend_entry& source, std::unique_ptr<backend>& made,
                         std::string& context_note) {
  const std::string& dev = plan.device_name;
  const auto need = device_memory_needed(f, choice.n_ctx_per_seq, choice.n_seq);
  if (need.total() > plan.device_memory) {
    // The model's default context is a preference, not a requirement: take what fits.
    const int32_t asked = context_per_seq(f.hparams, 0);
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

namespace {

// The registry a choice needs: the CPU needs no module (loading them, a Vulkan instance, a CUDA
// context, would only cost).
const registry& registry_for(const backend_choice& choice) {
  static const registry none{};
  return choice.kind == backend_kind::cpu ? none : device_registry();
}

}  // namespace

loaded_model load_model_on(const std::string& path, const backend_choice& choice,
                           const model_params& params) {
  return load_model_on(path, choice, params, registry_for(choice));
}

loaded_model load_model_on(model_file file, const backend_choice& choice,
                           const model_params& params) {
  return load_model_on(std::move(file), choice, params, registry_for(choice));
}

loaded_model load_model_on(const std::string& path, const backend_choice& choice,
                           const model_params& params, const registry& devices) {
  // Opened once: the fit is checked against this handle and the model loaded from it.
  return load_model_on(model::open(path), choice, params, devices);
}

loaded_model load_model_on(model_file file, const backend_choice& asked, const model_params& params,
                           const registry& devices) {
  loaded_model out;
  backend_choice choice = asked;
  model_params mp = params;
  mp.n_threads = choice.threads;
  mp.make_backend = nullptr;

  const backend_plan plan = backend_plan_for(choice, devices);
  out.note = plan.note;
  const backend_entry* source = devices.find(plan.backend);
  if (plan.device >= 0 && source) {
    std::unique_ptr<backend> device_backend;
    std::string context_note;
    std::string why = device_unfit(file, plan, choice, *source, device_backend, context_note);
    if (why.empty()) {
      // The factory hands over the backend made above; the model owns it from then on.
      auto holder = std::make_shared<std::unique_ptr<backend>>(std::move(device_backend));
      mp.make_backend = [holder] { return std::move(*holder); };
      try {
        // A copy of the handle (its metadata; the mapping is shared), kept for the CPU fallback.
        out.model = model::load(file, mp);
        out.backend = plan.backend_name;
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
    out.note = on_cpu(source->name + ": " + why);
  }
  out.model = model::load(std::move(file), mp);
  return out;
}

}  // namespace hearth::gpu
