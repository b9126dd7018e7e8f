// catalog_engine: the part of a job_engine that is its model catalog, written once for the batch
// engine and the null engine (both serve every model of a model_catalog_watch): what it skipped,
// rescans, files by digest and hidden models. An engine derives from it and adds models() (what
// counts as loaded differs) and the running of attempts.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

#include "node/job-engine.h"
#include "node/model-catalog.h"

namespace hearth::node {

class catalog_engine : public job_engine {
 public:
  std::vector<wire::skipped_model> skipped() const override { return catalog_.get()->skipped(); }

  // A change is told to the sink by the catalog's own callback.
  void rescan_models() override { catalog_.rescan(); }

  std::optional<std::filesystem::path> file_by_digest(std::string_view digest) const override {
    return catalog_.file_by_digest(digest);
  }

  bool hide_model(std::string_view name) override { return catalog_.hide(name); }

 protected:
  // Scans the models directory (and the store) of `cfg` (batch_engine_config or
  // null_engine_config) now; throws as model_catalog_watch does. Every change a rescan finds is
  // told to `sink` (models_changed), from the catalog's thread.
  template <typename Config>
  catalog_engine(const Config& cfg, job_sink& sink)
      : catalog_({cfg.models_dir, cfg.store_dir, cfg.pinned,
                  std::chrono::milliseconds(cfg.models_rescan_ms)},
                 [&sink] { sink.models_changed(); }) {}

  // A base, so it outlives the engine's own members (its worker joins first): its rescan thread
  // calls only the sink, which outlives the engine.
  model_catalog_watch catalog_;
};

}  // namespace hearth::node
