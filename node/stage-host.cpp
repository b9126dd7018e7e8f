#include "node/stage-host.h"

#include <spdlog/spdlog.h>

#include <array>
#include <optional>
#include <stdexcept>

#include "common/format-bytes.h"
#include "engine/context.h"
#include "schema/codec.h"
#include "schema/zap-any-key.h"
#include "schema/zmq-io.h"

namespace hearth::node {
namespace {

constexpr auto k_tick = std::chrono::milliseconds(20);
constexpr auto k_hold = std::chrono::seconds(10);
constexpr size_t k_held_max = 64;
constexpr size_t k_held_max_bytes = 64 << 20;  // their rows, in all
// Rows frames up to max_stage_rows_bytes, and the header around them.
constexpr int64_t k_max_frame = int64_t(wire::max_stage_rows_bytes) + (1 << 20);

}  // namespace

// One pipeline's stage on this node.
struct stage_host::stage {
  wire::stage_assign assign;
  std::shared_ptr<pipeline_link> link;  // the last stage: the batch engine computes
  // Any other stage: its layers, the cache a step opened, and the socket to the next stage.
  std::unique_ptr<model> weights;
  std::unique_ptr<context> ctx;
  std::string load_error;
  std::optional<zmq::socket_t> next;
  uint64_t next_step = 0;

  const wire::pipeline_stage& self() const { return assign.stages[assign.index]; }
  const wire::pipeline_stage& prev() const {
    return assign.stages[(assign.index + assign.stages.size() - 1) % assign.stages.size()];
  }
  std::string name() const {
    return "stage " + std::to_string(assign.index + 1) + " of " +
           std::to_string(assign.stages.size()) + " of pipeline " +
           std::to_string(assign.pipeline_id) + " (" + self().node + ")";
  }
};

struct stage_host::sockets {
  zmq::context_t ctx;
  std::optional<zmq::socket_t> zap;
  zmq::socket_t router;
  sockets() : router(net::make_socket(ctx, zmq::socket_type::router)) {}
};

stage_host::stage_host(stage_host_options opts, stage_loader load)
    : opts_(std::move(opts)), load_(std::move(load)), socks_(std::make_unique<sockets>()) {
  auto& s = *socks_;
  if (!opts_.key.public_key.empty()) {
    s.zap.emplace(net::zap_bind(s.ctx));
    s.router.set(zmq::sockopt::curve_server, 1);
    s.router.set(zmq::sockopt::curve_secretkey, opts_.key.secret_key);
    s.router.set(zmq::sockopt::zap_domain, "hearth-stage");
  }
  s.router.set(zmq::sockopt::maxmsgsize, k_max_frame);
  s.router.set(zmq::sockopt::handshake_ivl, 5000);
  try {
    s.router.bind(opts_.endpoint);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("cannot bind the stage socket on " + opts_.endpoint + ": " + e.what());
  }
  const std::string bound = s.router.get(zmq::sockopt::last_endpoint);
  port_ = uint16_t(std::stoi(bound.substr(bound.rfind(':') + 1)));
  thread_ = std::thread([this] { serve(); });
}

stage_host::~stage_host() {
  stop_ = true;
  thread_.join();
  std::lock_guard lk(mu_);
  for (auto& [id, link] : drivers_) link->close("the node is stopping");
}

void stage_host::assign(const wire::stage_assign& a) {
  std::lock_guard lk(mu_);
  assigns_.push_back(a);
  // The last stage's link is there at once: the broker may assign the pipeline's first job right
  // after this, before the host's thread has looked at its queue.
  const bool last = a.stages.size() >= 2 && a.index + 1 == a.stages.size();
  if (auto it = drivers_.find(a.pipeline_id); it != drivers_.end()) {
    it->second->close("the pipeline was planned again");
    drivers_.erase(it);
  }
  if (last) {
    drivers_[a.pipeline_id] = std::make_shared<pipeline_link>(a, opts_.key, opts_.step_timeout);
  }
}

void stage_host::release(uint64_t pipeline_id) {
  std::lock_guard lk(mu_);
  releases_.push_back(pipeline_id);
}

std::shared_ptr<pipeline_link> stage_host::driver(uint64_t pipeline_id) const {
  std::lock_guard lk(mu_);
  auto it = drivers_.find(pipeline_id);
  return it == drivers_.end() ? nullptr : it->second;
}

stage_host_stats stage_host::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

void stage_host::drop(const std::string& why) {
  {
    std::lock_guard lk(mu_);
    ++stats_.dropped;
  }
  const auto now = std::chrono::steady_clock::now();
  if (now - last_drop_log_ < std::chrono::seconds(1)) return;
  last_drop_log_ = now;
  spdlog::warn("stage socket: dropped a message: {}", why);
}

uint64_t stage_host::stage_memory(const stage* except) const {
  uint64_t total = 0;
  for (const auto& [id, s] : stages_) {
    if (s.get() == except || !s->weights) continue;
    total += s->weights->weight_bytes();
    if (s->ctx) {
      context_params cp;
      cp.n_seq_max = s->ctx->n_seq_max();
      cp.n_ctx = s->ctx->n_ctx();
      total += memory_needed(s->weights->hparams(), 0, cp, s->weights->layers()).context();
    }
  }
  return total;
}

void stage_host::report_memory() {
  const uint64_t now = stage_memory();
  if (now == reported_memory_) return;
  reported_memory_ = now;
  if (opts_.on_memory) opts_.on_memory(now);
}

void stage_host::apply_control() {
  std::vector<wire::stage_assign> assigns;
  std::vector<uint64_t> releases;
  {
    std::lock_guard lk(mu_);
    assigns.swap(assigns_);
    releases.swap(releases_);
  }
  for (uint64_t id : releases) {
    if (stages_.erase(id) == 0) continue;
    std::lock_guard lk(mu_);
    if (auto it = drivers_.find(id); it != drivers_.end()) {
      it->second->close("the pipeline was released");
      drivers_.erase(it);
    }
    spdlog::info("pipeline {}: stage released", id);
  }
  for (auto& a : assigns) {
    const std::string where = "pipeline " + std::to_string(a.pipeline_id);
    if (a.index >= a.stages.size() || a.stages.size() < 2) {
      spdlog::warn("{}: an assignment without this node's stage; ignored", where);
      continue;
    }
    if (!stages_.contains(a.pipeline_id) && stages_.size() >= opts_.max_pipelines) {
      spdlog::warn("{}: this node holds {} stages already; ignored", where, stages_.size());
      continue;
    }
    auto s = std::make_unique<stage>();
    s->assign = a;
    const bool last = a.index + 1 == a.stages.size();
    if (last) {
      std::lock_guard lk(mu_);
      auto it = drivers_.find(a.pipeline_id);
      if (it == drivers_.end() || it->second->assignment().version != a.version) continue;
      s->link = it->second;
    }
    const auto& me = s->self();
    // Planned again (a neighbour moved): the same layers of the same model are kept, not read
    // again; the cache is opened anew by the next step.
    if (auto old = stages_.find(a.pipeline_id);
        !last && old != stages_.end() && old->second->weights &&
        old->second->assign.model == a.model && old->second->self().first == me.first &&
        old->second->self().end == me.end) {
      s->weights = std::move(old->second->weights);
    }
    if (!last && !s->weights) {
      auto loaded = load_(a.model, {me.first, me.end});
      if (!loaded) {
        s->load_error = s->name() + ": " + loaded.message();
        spdlog::error("{}", s->load_error);
      } else {
        s->weights = std::move(*loaded);
      }
    }
    if (!last) {
      const auto& next = a.stages[a.index + 1];
      s->next.emplace(net::make_socket(socks_->ctx, zmq::socket_type::dealer));
      if (!opts_.key.public_key.empty())
        net::curve_client_apply(*s->next, {next.public_key, opts_.key});
      s->next->connect(next.endpoint);
    }
    spdlog::info("{}: {} layers [{}, {}) of model {}{}", where, last ? "runs its jobs on" : "holds",
                 me.first, me.end, a.model, s->load_error.empty() ? "" : " (failed to load)");
    stages_[a.pipeline_id] = std::move(s);
  }
  report_memory();
}

void stage_host::serve() {
  auto& s = *socks_;
  std::array<zmq::pollitem_t, 2> items = {
      zmq::pollitem_t{s.router.handle(), 0, ZMQ_POLLIN, 0},
      zmq::pollitem_t{s.zap ? s.zap->handle() : nullptr, 0, ZMQ_POLLIN, 0}};
  while (!stop_.load()) {
    net::poll(items.data(), s.zap ? 2 : 1, k_tick);
    if (s.zap) net::zap_answer_any_curve_key(*s.zap);
    apply_control();
    // Held steps whose assignment has come, in the order they arrived.
    std::vector<held_step> held;
    held.swap(held_);
    for (auto& h : held) {
      if (route(h.from_key, h.m)) continue;
      if (std::chrono::steady_clock::now() - h.since < k_hold) {
        held_.push_back(std::move(h));
      } else {
        drop("a step of pipeline " + std::to_string(h.m.batch.pipeline_id) + " version " +
             std::to_string(h.m.batch.version) + " waited " + std::to_string(k_hold.count()) +
             " s for an assignment that did not come");
      }
    }
    for (int i = 0; i < 64; ++i) {
      auto msg = net::try_recv(s.router, true);
      if (!msg) break;
      const auto frames = msg->views();
      auto head = stage_header_read(frames);
      if (!head) {
        drop(head.message());
        continue;
      }
      // The sender first, from the header alone: a stranger's rows are never decoded.
      if (const std::string why = refuse_sender(*head, msg->user_id); !why.empty()) {
        drop(why);
        continue;
      }
      auto m = stage_rows_read(std::move(*head), frames);
      if (!m) {
        drop(m.message());
        continue;
      }
      if (route(msg->user_id, *m)) continue;
      size_t held_bytes = m->rows.size() * sizeof(float);
      for (const auto& h : held_) held_bytes += h.m.rows.size() * sizeof(float);
      if (held_.size() >= k_held_max || held_bytes > k_held_max_bytes) {
        drop("a step of pipeline " + std::to_string(m->batch.pipeline_id) + " version " +
             std::to_string(m->batch.version) + ", not assigned here (" +
             std::to_string(held_.size()) + " such steps held already)");
        continue;
      }
      held_.push_back({std::chrono::steady_clock::now(), msg->user_id, std::move(*m)});
    }
    std::lock_guard lk(mu_);
    stats_.held = held_.size();
  }
}

std::string stage_host::refuse_sender(const wire::stage_batch& head,
                                      const std::string& from_key) const {
  auto it = stages_.find(head.pipeline_id);
  if (it == stages_.end() || head.version != it->second->assign.version) return "";
  return key_refused(*it->second, from_key);
}

std::string stage_host::key_refused(const stage& s, const std::string& from_key) const {
  if (opts_.key.public_key.empty() || from_key == s.prev().public_key) return "";
  return s.name() + ": a step from a key that is not the stage before this one (" + s.prev().node +
         ")";
}

bool stage_host::route(const std::string& from_key, stage_message& m) {
  auto it = stages_.find(m.batch.pipeline_id);
  // Not assigned (yet), or a newer version than this node holds: held for the assignment.
  if (it == stages_.end() || m.batch.version > it->second->assign.version) return false;
  if (m.batch.version < it->second->assign.version) {
    drop(it->second->name() + ": a step of version " + std::to_string(m.batch.version) +
         " (this node holds version " + std::to_string(it->second->assign.version) + ")");
    return true;
  }
  take(*it->second, from_key, std::move(m));
  return true;
}

void stage_host::take(stage& s, const std::string& from_key, stage_message m) {
  if (const std::string why = key_refused(s, from_key); !why.empty()) return drop(why);
  if (s.link) return s.link->deliver(std::move(m));

  // A stage that computes: the step's ops, its layers, then the rows on to the next stage.
  wire::stage_batch out = std::move(m.batch);
  auto fail = [&](const std::string& why) {
    out.error = s.name() + ": " + why;
    spdlog::warn("{}", out.error);
  };
  const bool first = s.assign.index == 0;
  if (out.error.empty() && (first ? !m.rows.empty() : m.rows.empty()))
    fail(first ? "the first stage takes no rows" : "a step without rows");
  if (out.error.empty() && out.step != s.next_step)
    fail("step " + std::to_string(out.step) + " arrived, " + std::to_string(s.next_step) +
         " was due");
  s.next_step = out.step + 1;
  if (out.error.empty() && !s.load_error.empty()) out.error = s.load_error;
  for (const auto& op : out.ops) {
    if (!out.error.empty()) break;
    if (op.op == "open") {
      if (op.seq < 1 || op.seq > 1024 || op.arg < 1 || int64_t(op.seq) * op.arg > (1 << 24)) {
        fail("open: " + std::to_string(op.seq) + " sequences of " + std::to_string(op.arg) +
             " cells is out of range");
        break;
      }
      context_params cp;
      cp.n_seq_max = op.seq;
      cp.n_ctx = op.seq * op.arg;
      const auto& hp = s.weights->hparams();
      const memory_estimate need =
          memory_needed(hp, s.weights->weight_bytes(), cp, s.weights->layers());
      // Within the limit beside the node's other stages (its engine's models fit the rest).
      const uint64_t others = stage_memory(&s);
      if (opts_.memory_limit > 0 && others + need.total() > opts_.memory_limit) {
        fail("its layers and cache need " + format_bytes(need.total()) + " but this node's " +
             "memory limit is " + format_bytes(opts_.memory_limit) +
             (others > 0 ? " (" + format_bytes(others) + " held by its other stages)" : ""));
        break;
      }
      s.ctx.reset();
      try {
        s.ctx = std::make_unique<context>(*s.weights, cp);
      } catch (const std::exception& e) {
        fail(e.what());
      }
      report_memory();
    } else if (!s.ctx) {
      fail("a step before the pipeline's context was opened");
    } else if (op.op == "seq_clear" && op.seq >= 0 && op.seq < s.ctx->n_seq_max()) {
      s.ctx->seq_clear(op.seq);
    } else if (op.op == "seq_copy") {
      if (auto r = s.ctx->seq_copy(op.seq, op.arg); !r) fail(r.message());
    } else {
      fail("unknown or out-of-range cache op '" + op.op + "'");
    }
  }
  if (out.error.empty() && !s.ctx) fail("a step before the pipeline's context was opened");
  std::string rows;
  if (out.error.empty()) {
    const auto batch = stage_tokens(out);
    auto r = first ? s.ctx->decode(batch) : s.ctx->decode(batch, m.rows);
    if (!r) {
      fail(r.message());
    } else {
      const uint32_t n_embd = uint32_t(s.weights->hparams().n_embd);
      auto enc = stage_rows_encode(s.assign.hidden_type, s.ctx->hidden_out(), n_embd);
      if (!enc) {
        fail(enc.message());
      } else {
        rows = std::move(*enc);
        out.hidden_type = s.assign.hidden_type;
        out.n_embd = n_embd;
      }
    }
  }
  // The ops travel on with the step: every stage applies them.
  if (!out.error.empty()) {
    out.hidden_type.clear();
    rows.clear();
  }
  {
    // Counted before it is sent: the last stage may have the rows before this thread goes on.
    std::lock_guard lk(mu_);
    ++stats_.steps;
  }
  net::send_raw(*s.next, "", wire::command::stage_batch, wire::encode(out),
                out.hidden_type.empty() ? std::nullopt : std::optional<std::string_view>(rows));
}

}  // namespace hearth::node
