#include "tools/interrupt.h"

#include <atomic>
#include <csignal>

namespace hearth::cli {
namespace {

std::atomic<bool> g_interrupted{false};

void on_sigint(int) {
  g_interrupted.store(true);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process
}

}  // namespace

void catch_interrupt() {
  std::signal(SIGINT, on_sigint);
}

bool interrupted() {
  return g_interrupted.load();
}

}  // namespace hearth::cli
