// The node's settings: flags for the essentials, a YAML file for the rest. Every setting has a
// default, so `hearth-node` alone serves the models `hearth pull` put into the store.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/device.h"
#include "common/result.h"

namespace hearth::node {

struct node_config {
  std::string broker = "tcp://127.0.0.1:5555";
  std::string models_dir;           // "" = none: the store's models only
  std::string name;                 // "" = the hostname
  uint32_t slots = 2;               // jobs run at once (hearth up's default too)
  std::string engine = "cpu";       // cpu | null
  double null_tokens_per_s = 1000;  // null engine rate per job
  // Bytes the node offers for models and their contexts (weights, KV cache, scratch): what it
  // loads stays within it, and the broker plans splits of larger models within it; 0 = what is
  // available. One machine can so play several small ones (`--memory-limit 2GiB`).
  uint64_t memory_limit = 0;
  int32_t threads = 0;       // 0 = all cores
  int32_t ctx_per_slot = 0;  // context cells per slot; 0 = the model's (at most 4096)
  // Where models load: the best GPU by default (a CUDA, else a Vulkan one), else the CPU.
  gpu::backend_kind backend = gpu::backend_kind::automatic;
  int32_t device = -1;                // device index (`hearth devices`); -1: the best
  uint32_t drain_timeout_ms = 30000;  // on SIGTERM: how long running jobs may finish
  // How often the models directory is scanned again for added, changed and removed files
  // (only changed ones are read); 0: only at start.
  uint32_t models_rescan_ms = 10000;
  // How often free RAM, GPU memory and GPU utilisation are read again and, when they changed,
  // sent to the broker (node_status; the dashboard and /metrics show them); 0: only at start.
  uint32_t hardware_refresh_ms = 5000;
  std::string log_level = "info";
  // CURVE (schema/curve-cert.h): the broker's public certificate and this node's secret one, both
  // or neither; neither = plain ZMTP to a broker without --auth. Relative paths in the YAML file
  // are relative to its folder.
  std::string broker_key;
  std::string key;
  // The content-addressed model store (store/README.md) that `hearth pull` and copies from other
  // nodes fill: its folder ("" = store::default_store_root(): $HEARTH_STORE, else
  // $XDG_DATA_HOME/hearth/store, else ~/.local/share/hearth/store), its size limit (bytes; 0 =
  // the disk), kept by evicting the least recently used models but never these pinned ones.
  std::string store;
  uint64_t store_limit = 0;
  std::vector<std::string> pinned;
  // The transfer socket where other nodes copy models from this one (node/README.md, PROTOCOL.md
  // 16.4): its TCP port (0: off; a port in use: logged, and the node serves no copies) and
  // address; the rate cap of copies onto this node (bytes/s, 0: none) so that a copy leaves room
  // for inference traffic; how many copies it serves at once.
  uint32_t transfer_port = 7712;
  std::string transfer_bind = "0.0.0.0";
  uint64_t transfer_rate_limit = 0;
  uint32_t transfer_max_copies = 4;
  // The stage socket where the stage before this node's in a pipeline sends each step of a split
  // model (PROTOCOL.md 17.2): its TCP port (0: off, the node holds no stages; a port in use:
  // logged, and a free one taken) and address.
  uint32_t stage_port = 7713;
  std::string stage_bind = "0.0.0.0";
};

// This machine's host name: a node's name when its configuration names none.
std::string node_host_name();

// Reads the YAML file into `cfg`. Unknown keys, wrong types and bad values are errors naming the
// key and the file. memory_limit (memory_budget, its older name) accepts bytes or a size such as
// "8GiB", "512MiB".
result<void> node_config_load(const std::string& path, node_config& cfg);

// "8GiB", "512 MiB", "1000000" -> bytes (memory_limit, store_limit, --memory-limit, ...).
result<uint64_t> node_size_parse(const std::string& s);

// "cpu" | "cuda" | "vulkan" | "auto" from the YAML file or a flag; the error names the values.
result<gpu::backend_kind> node_backend_parse(const std::string& name);

// Checks values that flags may also have set (broker_key and key: both or neither).
result<void> node_config_check(const node_config& cfg);

}  // namespace hearth::node
