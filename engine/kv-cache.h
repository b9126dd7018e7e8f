// The key/value cache of one context: a pool of cells shared by any number of sequences. Each
// cell holds one token's keys and values for every layer and remembers which sequence and
// position it belongs to; attention derives its mask from that metadata on every call.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/backend.h"
#include "engine/model.h"

namespace hearth {

class kv_cache {
 public:
  // Allocates n_cells cells of keys and values (F16) for the layers of `layers` (resolved: a
  // pipeline stage's share, every layer of a whole model).
  kv_cache(hearth::backend& b, const model_hparams& hp, int32_t n_cells, layer_range layers);
  ~kv_cache();
  kv_cache(const kv_cache&) = delete;
  kv_cache& operator=(const kv_cache&) = delete;

  // Bytes one cell takes across all layers, or those of `layers` (for memory planning before
  // construction).
  static uint64_t bytes_per_cell(const model_hparams& hp, layer_range layers = {});

  int32_t size() const { return int32_t(cell_seq_.size()); }
  int32_t n_free() const { return n_free_; }
  // One past the highest used cell: attention scans [0, extent()).
  int32_t extent() const { return extent_; }

  // Takes free cells for tokens of (seq, pos) pairs, writing the chosen cells to `cells`.
  // The caller checked n_free() first; returns false (changing nothing) when too few are free.
  bool place(std::span<const int32_t> seqs, std::span<const int32_t> positions,
             std::span<int32_t> cells);

  // Frees every cell of one sequence / of all sequences.
  void seq_clear(int32_t seq);
  // Frees the cells of one sequence at positions >= pos: it keeps its prefix 0..pos-1.
  void seq_truncate(int32_t seq, int32_t pos);
  void clear();
  // Highest position stored for a sequence, or -1 when it has none.
  int32_t seq_pos_max(int32_t seq) const;
  // The cells of a sequence, by position (what context::seq_copy copies).
  std::vector<int32_t> seq_cells(int32_t seq) const;
  // The position a cell holds (-1 when free).
  int32_t cell_pos(int32_t cell) const { return cell_pos_[size_t(cell)]; }
  // The layers held: k(il) and v(il) for il in [first, end).
  const layer_range& layers() const { return layers_; }

  // Copies the cell metadata to the backend tensors below (after place/clear).
  void upload_cells();

  // F16 [n_cells, n_head_kv*head_dim_k] and [n_cells, n_head_kv*head_dim_v] of a held layer.
  const tensor& k(int32_t layer) const { return k_[size_t(layer - layers_.first)]; }
  const tensor& v(int32_t layer) const { return v_[size_t(layer - layers_.first)]; }
  const tensor& cell_seq() const { return cell_seq_t_; }  // I32 [n_cells], -1 = free
  const tensor& cell_pos() const { return cell_pos_t_; }  // I32 [n_cells]

 private:
  void recompute_extent();

  hearth::backend& backend_;
  layer_range layers_;
  std::vector<tensor> k_, v_;
  tensor cell_seq_t_, cell_pos_t_;
  std::vector<int32_t> cell_seq_, cell_pos_;
  int32_t n_free_ = 0;
  int32_t extent_ = 0;
  int32_t search_from_ = 0;
};

}  // namespace hearth
