#include "engine/kv-cache.h"

#include <algorithm>

namespace hearth {

uint64_t kv_cache::bytes_per_cell(const model_hparams& hp, layer_range layers) {
  const uint64_t k = uint64_t(hp.n_head_kv) * uint64_t(hp.head_dim_k);
  const uint64_t v = uint64_t(hp.n_head_kv) * uint64_t(hp.head_dim_v);
  return uint64_t(layers.resolved(hp.n_layer).size()) * (k + v) * 2;  // F16
}

kv_cache::kv_cache(hearth::backend& b, const model_hparams& hp, int32_t n_cells, layer_range layers)
    : backend_(b),
      layers_(layers),
      cell_seq_(size_t(n_cells), -1),
      cell_pos_(size_t(n_cells), -1),
      n_free_(n_cells) {
  for (int32_t l = layers.first; l < layers.end; ++l) {
    k_.push_back(backend_.alloc(tensor_type::f16, int64_t(hp.n_head_kv) * hp.head_dim_k, n_cells,
                                "cache_k"));
    v_.push_back(backend_.alloc(tensor_type::f16, int64_t(hp.n_head_kv) * hp.head_dim_v, n_cells,
                                "cache_v"));
  }
  cell_seq_t_ = backend_.alloc(tensor_type::i32, n_cells, 1, "cell_seq");
  cell_pos_t_ = backend_.alloc(tensor_type::i32, n_cells, 1, "cell_pos");
  upload_cells();
}

kv_cache::~kv_cache() {
  for (auto& t : k_) backend_.free(t);
  for (auto& t : v_) backend_.free(t);
  backend_.free(cell_seq_t_);
  backend_.free(cell_pos_t_);
}

bool kv_cache::place(std::span<const int32_t> seqs, std::span<const int32_t> positions,
                     std::span<int32_t> cells) {
  if (int32_t(seqs.size()) > n_free_) return false;
  const int32_t n = size();
  int32_t c = search_from_;
  for (size_t i = 0; i < seqs.size(); ++i) {
    while (cell_seq_[size_t(c)] != -1) c = (c + 1) % n;
    cell_seq_[size_t(c)] = seqs[i];
    cell_pos_[size_t(c)] = positions[i];
    cells[i] = c;
    extent_ = std::max(extent_, c + 1);
  }
  search_from_ = c;
  n_free_ -= int32_t(seqs.size());
  return true;
}

void kv_cache::seq_clear(int32_t seq) {
  for (size_t c = 0; c < cell_seq_.size(); ++c) {
    if (cell_seq_[c] == seq) {
      cell_seq_[c] = -1;
      cell_pos_[c] = -1;
      ++n_free_;
    }
  }
  recompute_extent();
}

void kv_cache::seq_truncate(int32_t seq, int32_t pos) {
  for (size_t c = 0; c < cell_seq_.size(); ++c) {
    if (cell_seq_[c] == seq && cell_pos_[c] >= pos) {
      cell_seq_[c] = -1;
      cell_pos_[c] = -1;
      ++n_free_;
      // The next search starts at the first freed cell, so refilling the tail takes the cells
      // it held before, as a fresh context would.
      search_from_ = std::min(search_from_, int32_t(c));
    }
  }
  recompute_extent();
}

void kv_cache::clear() {
  std::fill(cell_seq_.begin(), cell_seq_.end(), -1);
  std::fill(cell_pos_.begin(), cell_pos_.end(), -1);
  n_free_ = size();
  recompute_extent();
}

void kv_cache::recompute_extent() {
  extent_ = 0;
  for (int32_t c = size() - 1; c >= 0; --c) {
    if (cell_seq_[size_t(c)] != -1) {
      extent_ = c + 1;
      break;
    }
  }
  // Fill from the start again when the cache empties, so a reused context keeps its cells
  // packed at the front exactly as a fresh one would.
  if (extent_ == 0) search_from_ = 0;
}

int32_t kv_cache::seq_pos_max(int32_t seq) const {
  int32_t best = -1;
  for (size_t c = 0; c < cell_seq_.size(); ++c) {
    if (cell_seq_[c] == seq) best = std::max(best, cell_pos_[c]);
  }
  return best;
}

std::vector<int32_t> kv_cache::seq_cells(int32_t seq) const {
  std::vector<int32_t> out;
  for (size_t c = 0; c < cell_seq_.size(); ++c)
    if (cell_seq_[c] == seq) out.push_back(int32_t(c));
  std::sort(out.begin(), out.end(),
            [&](int32_t a, int32_t b) { return cell_pos_[size_t(a)] < cell_pos_[size_t(b)]; });
  return out;
}

void kv_cache::upload_cells() {
  backend_.upload(cell_seq_t_, cell_seq_.data(), cell_seq_.size() * 4);
  backend_.upload(cell_pos_t_, cell_pos_.data(), cell_pos_.size() * 4);
}

}  // namespace hearth
