#include "node/pipeline-link.h"

#include <algorithm>

#include "schema/zmq-io.h"

namespace hearth::node {

pipeline_link::pipeline_link(wire::stage_assign assign, net::curve_cert own_key,
                             std::chrono::milliseconds step_timeout)
    : zctx_(1), assign_(std::move(assign)), key_(std::move(own_key)), timeout_(step_timeout) {}

pipeline_link::~pipeline_link() {
  out_.reset();  // before the context it belongs to
}

layer_range pipeline_link::range() const {
  const auto& s = assign_.stages.at(assign_.index);
  return {s.first, s.end};
}

std::string pipeline_link::describe() const {
  const auto& s = assign_.stages.at(assign_.index);
  return "stage " + std::to_string(assign_.index + 1) + " of " +
         std::to_string(assign_.stages.size()) + " (layers " + std::to_string(s.first) + "-" +
         std::to_string(s.end) + ") of pipeline " + std::to_string(assign_.pipeline_id);
}

void pipeline_link::open(int32_t n_seq, int32_t n_ctx_per_seq) {
  ops_.push_back({"open", n_seq, n_ctx_per_seq});
}

result<std::vector<float>> pipeline_link::run(std::span<const batch_token> batch, uint32_t n_embd,
                                              int32_t n_batch) {
  if (broken_)
    return error{describe() + ": the pipeline failed a step before; it is not used again"};
  size_t piece = wire::max_stage_tokens;
  piece = std::min<size_t>(piece, wire::max_stage_rows_bytes / (uint64_t(n_embd) * 4));
  if (n_batch > 0 && piece >= size_t(n_batch)) piece -= piece % size_t(n_batch);
  piece = std::max<size_t>(piece, 1);
  std::vector<float> rows;
  rows.reserve(batch.size() * n_embd);
  for (size_t at = 0; at < batch.size(); at += piece) {
    auto r = run_piece(batch.subspan(at, std::min(piece, batch.size() - at)), n_embd);
    if (!r) {
      broken_ = true;
      return error{r.message()};
    }
    rows.insert(rows.end(), r->begin(), r->end());
  }
  return rows;
}

result<std::vector<float>> pipeline_link::run_piece(std::span<const batch_token> piece,
                                                    uint32_t n_embd) {
  if (!out_) {
    const auto& first = assign_.stages.front();
    out_.emplace(net::make_socket(zctx_, zmq::socket_type::dealer));
    if (!key_.public_key.empty()) net::curve_client_apply(*out_, {first.public_key, key_});
    out_->connect(first.endpoint);
  }
  wire::stage_batch m;
  m.pipeline_id = assign_.pipeline_id;
  m.version = assign_.version;
  m.step = step_++;
  m.ops = std::move(ops_);
  ops_.clear();
  stage_tokens_set(m, piece);
  if (!net::send(*out_, "", m))
    return error{describe() + ": cannot send to the first stage (" + assign_.stages[0].node + ")"};
  std::unique_lock lk(mu_);
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (true) {
    if (!closed_.empty()) return error{describe() + ": " + closed_};
    while (!inbox_.empty()) {
      stage_message got = std::move(inbox_.front());
      inbox_.pop_front();
      if (got.batch.step != m.step) continue;  // a step given up on before
      if (!got.batch.error.empty()) return error{got.batch.error};
      if (got.batch.tokens != m.tokens || got.batch.n_embd != n_embd ||
          got.rows.size() != piece.size() * size_t(n_embd)) {
        return error{describe() + ": the stage before this one sent rows for another batch"};
      }
      return std::move(got.rows);
    }
    if (cv_.wait_until(lk, deadline) == std::cv_status::timeout && inbox_.empty()) {
      return error{describe() + ": no answer from the stages within " +
                   std::to_string(timeout_.count()) + " ms"};
    }
  }
}

void pipeline_link::deliver(stage_message m) {
  std::lock_guard lk(mu_);
  if (inbox_.size() >= 64) inbox_.pop_front();  // bounded: the engine takes one per step
  inbox_.push_back(std::move(m));
  cv_.notify_all();
}

bool pipeline_link::closed() const {
  std::lock_guard lk(mu_);
  return !closed_.empty();
}

void pipeline_link::close(std::string why) {
  std::lock_guard lk(mu_);
  closed_ = why.empty() ? "the pipeline was released" : std::move(why);
  cv_.notify_all();
}

}  // namespace hearth::node
