#include "engine/eval-callback.h"

#include <cassert>
#include <vector>

namespace hearth {

void eval_callback_run(const eval_callback& cb, backend& be, const tensor& t, std::string_view name,
                       int32_t layer, int32_t head_dim) {
  assert(t.type == tensor_type::f32);
  if (!cb.observe || (cb.wants && !cb.wants(name, layer))) return;
  // A fresh buffer per intermediate: observing is for debugging, where this cost is nothing
  // beside the download; decoding without an observer never comes here.
  std::vector<float> host(size_t(t.n_elements()));
  be.download(t, host.data(), host.size() * sizeof(float));

  intermediate i;
  i.name = name;
  i.layer = layer;
  i.values.type = tensor_type::f32;
  i.values.data = host.data();
  i.values.name = "";
  const int64_t width = t.ne[0];
  const int64_t n_rows = t.rows();
  if (head_dim > 0) {
    assert(width % head_dim == 0);
    i.n_dims = 3;
    i.values.ne[0] = head_dim;
    i.values.ne[1] = width / head_dim;
    i.values.ne[2] = n_rows;
  } else {
    i.n_dims = 2;
    i.values.ne[0] = width;
    i.values.ne[1] = n_rows;
  }
  cb.observe(i);
}

}  // namespace hearth
