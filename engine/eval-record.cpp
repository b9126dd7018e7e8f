#include "engine/eval-record.h"

#include <stdexcept>

namespace hearth {

std::string recorded_intermediate::label() const {
  return layer < 0 ? name : name + "-" + std::to_string(layer);
}

eval_record::eval_record(std::function<bool(std::string_view, int32_t)> wants) {
  cb_.wants = std::move(wants);
  cb_.observe = [this](const intermediate& i) { append(i); };
}

const recorded_intermediate* eval_record::find(std::string_view name, int32_t layer) const {
  for (const recorded_intermediate& r : items_)
    if (r.name == name && r.layer == layer) return &r;
  return nullptr;
}

void eval_record::append(const intermediate& i) {
  recorded_intermediate* r = nullptr;
  for (recorded_intermediate& have : items_)
    if (have.name == i.name && have.layer == i.layer) r = &have;
  if (!r) {
    r = &items_.emplace_back();
    r->name = std::string(i.name);
    r->layer = i.layer;
    r->n_dims = i.n_dims;
    for (int d = 0; d < 4; ++d) r->ne[d] = i.values.ne[d];
    r->ne[i.n_dims - 1] = 0;
  } else {
    for (int d = 0; d < i.n_dims - 1; ++d) {
      if (r->ne[d] != i.values.ne[d] || r->n_dims != i.n_dims)
        throw std::logic_error("intermediate " + r->label() + " changed shape between passes");
    }
  }
  r->ne[i.n_dims - 1] += i.values.ne[i.n_dims - 1];
  const float* v = static_cast<const float*>(i.values.data);
  r->values.insert(r->values.end(), v, v + i.values.n_elements());
}

}  // namespace hearth
