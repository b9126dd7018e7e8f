#include "node/hardware.h"

#include <gtest/gtest.h>

namespace hearth::node {
namespace {

wire::hardware_info machine() {
  wire::hardware_info h;
  h.cpu_model = "cpu";
  h.cpu_threads = 8;
  h.memory_total = 32ull << 30;
  h.memory_available = 20ull << 30;
  h.gpus.push_back({"cuda", "gpu", 24ull << 30, 10ull << 30});
  h.gpus.back().utilization = 0.10;
  return h;
}

TEST(hardware_changed, small_moves_are_not_worth_a_message) {
  const auto sent = machine();
  auto now = sent;
  EXPECT_FALSE(hardware_changed(sent, now));
  now.memory_available += 63ull << 20;
  now.gpus[0].memory_free -= 63ull << 20;
  now.gpus[0].utilization = 0.14;
  EXPECT_FALSE(hardware_changed(sent, now));
}

TEST(hardware_changed, what_the_broker_should_hear) {
  const auto sent = machine();
  auto ram = sent;
  ram.memory_available -= 64ull << 20;
  EXPECT_TRUE(hardware_changed(sent, ram));
  auto vram = sent;
  vram.gpus[0].memory_free += 1ull << 30;
  EXPECT_TRUE(hardware_changed(sent, vram));
  auto busy = sent;
  busy.gpus[0].utilization = 0.15;
  EXPECT_TRUE(hardware_changed(sent, busy));
  auto unknown = sent;
  unknown.gpus[0].utilization = -1;  // the driver stopped saying
  EXPECT_TRUE(hardware_changed(sent, unknown));
  auto gone = sent;
  gone.gpus.clear();
  EXPECT_TRUE(hardware_changed(sent, gone));
  auto other = sent;
  other.gpus[0].name = "another gpu";
  EXPECT_TRUE(hardware_changed(sent, other));
}

}  // namespace
}  // namespace hearth::node
