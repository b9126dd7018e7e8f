#include "tests/fake-node.h"

namespace hearth::testing {

using namespace std::chrono_literals;

fake_node::fake_node(const std::string& endpoint, const net::curve_client_keys& keys,
                     const std::string& name)
    : name_(name), sock_(std::make_unique<test_client>(endpoint, keys)) {}

void fake_node::hello(const std::string& name, uint32_t slots,
                      const std::vector<std::string>& models) {
  wire::node_hello h;
  h.name = name;
  h.hostname = "fake-host";
  h.engine = "fake";
  h.slots = slots;
  h.hardware.cpu_model = "claims to be fast";
  h.hardware.cpu_threads = 1024;
  h.hardware.memory_total = uint64_t(1) << 40;
  h.hardware.gpus.push_back({"cuda", "imaginary GPU", uint64_t(80) << 30, uint64_t(80) << 30});
  for (const auto& m : models) {
    wire::model_info mi;
    mi.name = m;
    mi.architecture = "llama";
    mi.loaded = true;
    h.models.push_back(mi);
  }
  send(h);
}

fake_node::replies fake_node::hello_flood(int n, std::chrono::milliseconds wait) {
  for (int i = 0; i < n; ++i) hello("flood-" + std::to_string(i), 1, {"alpha"});
  return listen(wait, [n](auto& h) { return h.welcomes + int(h.errors.size()) >= n; });
}

bool fake_node::welcomed() {
  return listen(5s, [](auto& h) { return h.welcomes > 0 || !h.errors.empty(); }).welcomes == 1;
}

int fake_node::bounce(int times, std::chrono::milliseconds wait) {
  int taken = 0;
  send(wire::node_pull{1});
  for (; taken < times; ++taken) {
    auto heard = listen(wait, [](auto& h) { return !h.assigns.empty(); });
    if (heard.assigns.empty()) break;
    hello(1, {"alpha"});
    send(wire::node_pull{1});
  }
  return taken;
}

uint64_t fake_node::run_one(const std::vector<std::string>& pieces, uint32_t tokens_per_piece) {
  send(wire::node_pull{1});
  auto a = next<wire::job_assign>();
  if (!a) return 0;
  send(wire::job_started{a->job_id, a->attempt, 1});
  uint64_t seq = 0;
  for (const auto& p : pieces) {
    send(wire::job_tokens{a->job_id, a->attempt, seq, tokens_per_piece, p});
    seq += tokens_per_piece;
  }
  complete(*a, uint32_t(seq));
  return a->job_id;
}

void fake_node::complete(const wire::job_assign& a, uint32_t n_gen) {
  wire::job_final f;
  f.job_id = a.job_id;
  f.attempt = a.attempt;
  f.state = wire::job_state::completed;
  f.stop_reason = "max_tokens";
  f.n_prompt = 1;
  f.n_gen = n_gen;
  send(f);
}

wire::node_hello plain_hello(const std::string& name, std::vector<wire::model_info> models) {
  wire::node_hello h;
  h.name = name;
  h.hostname = name + "-host";
  h.engine = "fake";
  h.slots = 1;
  h.hardware.cpu_threads = 4;
  h.hardware.memory_total = h.hardware.memory_available = uint64_t(8) << 30;
  h.models = std::move(models);
  return h;
}

void fake_node::serve(uint32_t slots, const std::vector<std::string>& models, std::stop_token stop,
                      const std::function<void(const wire::job_assign&)>& run) {
  hello(slots, models);
  pull_and_run(slots, stop, run);
}

void fake_node::pull_and_run(uint32_t slots, std::stop_token stop,
                             const std::function<void(const wire::job_assign&)>& run) {
  send(wire::node_pull{slots});
  while (!stop.stop_requested()) {
    if (auto a = next<wire::job_assign>(100ms)) run(*a);
  }
}

void fake_node::bye() {
  send(wire::node_bye{});
  sock_->socket().set(zmq::sockopt::linger, 500);
}

fake_node::replies fake_node::listen(std::chrono::milliseconds timeout,
                                     const std::function<bool(const replies&)>& until) {
  replies h;
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    auto ev = sock_->next_event(20ms);
    if (!ev) continue;
    if (ev->cmd == wire::command::node_welcome) ++h.welcomes;
    if (ev->cmd == wire::command::job_assign) {
      if (auto a = wire::decode<wire::job_assign>(ev->body)) h.assigns.push_back(*a);
    }
    if (ev->cmd == wire::command::job_cancel) {
      if (auto c = wire::decode<wire::job_cancel>(ev->body)) h.cancels.push_back(*c);
    }
    if (ev->cmd == wire::command::error) {
      if (auto e = wire::decode<wire::error_reply>(ev->body)) h.errors.push_back(*e);
    }
    if (until && until(h)) break;
  }
  return h;
}

}  // namespace hearth::testing
