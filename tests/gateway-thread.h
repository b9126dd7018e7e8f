// A gateway serving every route (gateway/routes.h) on 127.0.0.1:<free port>, on its own thread,
// in the test's process: the gateway tests' harness.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "gateway/gateway.h"
#include "gateway/routes.h"

namespace hearth::testing {

class gateway_thread {
 public:
  explicit gateway_thread(gateway::gateway_options o)
      : g_(std::make_unique<gateway::gateway>(std::move(o), gateway::add_routes)),
        t_([this] { g_->run(stop_); }) {}
  ~gateway_thread() {
    stop_ = true;
    t_.join();
  }
  bool bound() const { return g_->bound(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(g_->port()); }

 private:
  std::atomic<bool> stop_{false};
  std::unique_ptr<gateway::gateway> g_;
  std::thread t_;
};

}  // namespace hearth::testing
