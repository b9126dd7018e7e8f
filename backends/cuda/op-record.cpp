#include "backends/cuda/op-record.h"

#include <cstring>

namespace hearth::cuda {
namespace {

int64_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return int64_t(u);
}

}  // namespace

void append_key(const op_record& r, std::vector<int64_t>& key) {
  key.push_back(int64_t(r.kind));
  key.push_back(r.n_t);
  for (int k = 0; k < r.n_t; ++k) {
    const tensor& t = r.t[k];
    key.push_back(int64_t(reinterpret_cast<uintptr_t>(t.data)));
    key.push_back(int64_t(t.type));
    for (int d = 0; d < 4; ++d) key.push_back(t.ne[d]);
  }
  key.push_back(bits(r.f[0]));
  key.push_back(bits(r.f[1]));
  key.push_back(r.i[0]);
  key.push_back(r.i[1]);
  switch (r.kind) {
    case op_kind::rope:
      key.push_back(r.rope.n_dims);
      key.push_back(bits(r.rope.freq_base));
      key.push_back(bits(r.rope.freq_scale));
      key.push_back(r.rope.neox);
      key.push_back(bits(r.rope.ext_factor));
      key.push_back(bits(r.rope.attn_factor));
      key.push_back(bits(r.rope.beta_fast));
      key.push_back(bits(r.rope.beta_slow));
      key.push_back(r.rope.n_ctx_orig);
      break;
    case op_kind::attention:
      key.push_back(r.attn.n_head);
      key.push_back(r.attn.n_head_kv);
      key.push_back(r.attn.head_dim_k);
      key.push_back(r.attn.head_dim_v);
      key.push_back(bits(r.attn.scale));
      key.push_back(bits(r.attn.softcap));
      key.push_back(r.attn.window);
      key.push_back(r.slot);
      break;
    case op_kind::elementwise:
      key.push_back(int64_t(r.ew));
      break;
    default:
      break;
  }
}

}  // namespace hearth::cuda
