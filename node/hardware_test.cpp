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

namespace hearth::node {
namespace {

gpu::backend_entry fake_backend(gpu::backend_kind kind, const char* name,
                                std::vector<gpu::device> devices) {
  gpu::backend_entry e;
  e.kind = kind;
  e.name = name;
  e.loaded = true;
  e.devices = [devices] { return devices; };
  return e;
}

gpu::device card(gpu::backend_kind kind, const char* name, const char* uuid, uint64_t free) {
  gpu::device d;
  d.name = name;
  d.backend = kind;
  d.type = gpu::device_type::discrete;
  d.memory_total = 80ull << 30;
  d.memory_free = free;
  d.uuid = uuid;
  return d;
}

// One NVIDIA card seen through CUDA and Vulkan is one GPU to the broker (its memory counted
// once), as CUDA sees it; other cards, and cards whose UUID is unknown, are all listed.
TEST(hardware_read, a_card_two_backends_see_is_listed_once) {
  using gpu::backend_kind;
  gpu::registry r;
  r.add(fake_backend(backend_kind::cuda, "cuda",
                     {card(backend_kind::cuda, "H200", "aa11", 70ull << 30)}));
  r.add(fake_backend(backend_kind::vulkan, "vulkan",
                     {card(backend_kind::vulkan, "H200", "aa11", 69ull << 30),
                      card(backend_kind::vulkan, "Radeon", "bb22", 8ull << 30),
                      card(backend_kind::vulkan, "old", "", 1ull << 30),
                      card(backend_kind::vulkan, "old too", "", 1ull << 30)}));
  const auto h = hardware_read(r);
  ASSERT_EQ(h.gpus.size(), 4u);
  EXPECT_EQ(h.gpus[0].backend, "cuda");
  EXPECT_EQ(h.gpus[0].memory_free, 70ull << 30);
  EXPECT_EQ(h.gpus[1].name, "Radeon");
  EXPECT_EQ(h.gpus[2].name, "old");
  EXPECT_EQ(h.gpus[3].name, "old too");
}

TEST(uuid_hex, bytes_as_hex_and_all_zero_as_unknown) {
  const unsigned char zero[16] = {};
  EXPECT_EQ(gpu::uuid_hex(zero), "");
  const unsigned char some[16] = {0x00, 0x01, 0xab, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10};
  EXPECT_EQ(gpu::uuid_hex(some), "0001abff000000000000000000000010");
}

}  // namespace
}  // namespace hearth::node
