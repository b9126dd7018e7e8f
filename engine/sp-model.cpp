#include "engine/sp-model.h"

#include <sentencepiece_processor.h>

namespace hearth {

struct sp_model::impl {
  sentencepiece::SentencePieceProcessor processor;
};

sp_model::sp_model(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
sp_model::sp_model(sp_model&&) noexcept = default;
sp_model& sp_model::operator=(sp_model&&) noexcept = default;
sp_model::~sp_model() = default;

result<sp_model> sp_model::load(const std::string& path) {
  auto p = std::make_unique<impl>();
  const auto status = p->processor.Load(path);
  if (!status.ok()) {
    return error{"loading SentencePiece model " + path + ": " + status.ToString()};
  }
  if (p->processor.GetPieceSize() <= 0) {
    return error{"loading SentencePiece model " + path + ": it has no pieces"};
  }
  return sp_model(std::move(p));
}

std::vector<int32_t> sp_model::encode(std::string_view text) const {
  std::vector<int> ids;
  // Encode fails only when no model is loaded, which load() rules out.
  if (!impl_->processor.Encode(text, &ids).ok()) return {};
  return {ids.begin(), ids.end()};
}

std::string sp_model::decode(std::span<const int32_t> ids) const {
  // The library rejects the whole call for one bad id; skip those instead, as the API promises.
  std::vector<int> valid;
  valid.reserve(ids.size());
  for (const int32_t id : ids) {
    if (id >= 0 && id < n_tokens()) valid.push_back(id);
  }
  std::string text;
  if (!impl_->processor.Decode(valid, &text).ok()) return {};
  return text;
}

int32_t sp_model::n_tokens() const {
  return impl_->processor.GetPieceSize();
}

}  // namespace hearth
