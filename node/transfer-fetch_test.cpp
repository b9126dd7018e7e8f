// The copy between nodes: fetch_model against real transfer servers in this process (real
// sockets on loopback, CURVE keys, real stores in temporary folders).
#include "node/transfer-fetch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "node/transfer-server.h"
#include "schema/codec.h"
#include "schema/zmq-io.h"
#include "store/test-store-dir.h"

namespace hearth::node {
namespace {

using store::testing::generated_bytes;
using store::testing::store_test_dir;
using store::testing::write_test_file;

constexpr uint64_t k_transfer = 41;

net::curve_cert make_key(const std::string& name) {
  auto k = net::curve_cert_generate(name);
  EXPECT_TRUE(k) << k.message();
  return *k;
}

// A node's side of it: a store and a transfer server serving its blobs.
struct holder {
  store_test_dir dir;
  store::model_store store{dir.path() / "store"};
  std::unique_ptr<transfer_server> server;

  explicit holder(const net::curve_cert& key, const std::string& endpoint = "tcp://127.0.0.1:*") {
    start(key, endpoint);
  }
  void start(const net::curve_cert& key, const std::string& endpoint) {
    server = std::make_unique<transfer_server>(
        transfer_server_options{endpoint, key},
        [this](std::string_view d) -> std::optional<std::filesystem::path> {
          if (!store.has_blob(d)) return std::nullopt;
          return store.blob_path(d);
        });
  }
  std::string endpoint() const { return "tcp://127.0.0.1:" + std::to_string(server->port()); }
  // A blob of `bytes` in the store; returns its model_file.
  wire::model_file add(const std::string& path, const std::string& bytes) {
    const auto src = dir.path() / "src" / path;
    write_test_file(src, bytes);
    const std::string digest = store::sha256_bytes(bytes);
    store.import_file(src, digest);
    return {path, digest, bytes.size()};
  }
  void allow(const net::curve_cert& fetcher, std::vector<std::string> digests,
             uint32_t ttl_ms = 60000, uint64_t transfer = k_transfer) {
    server->allow({transfer, "fetcher", fetcher.public_key, std::move(digests), ttl_ms});
  }
};

wire::transfer_peer peer_of(const holder& h, const std::string& node, const net::curve_cert& key) {
  return {node, h.endpoint(), key.public_key};
}

wire::model_fetch copy_of(std::vector<wire::model_file> files,
                          std::vector<wire::transfer_peer> peers) {
  wire::model_fetch m;
  m.transfer_id = k_transfer;
  m.name = "tiny";
  m.source = "peer:" + peers.front().node;
  m.files = std::move(files);
  m.peers = std::move(peers);
  m.origin = "hf:owner/repo@abc/tiny.gguf";
  return m;
}

fetch_options quick(const net::curve_cert& key) {
  fetch_options o;
  o.key = key;
  o.peer_timeout = std::chrono::milliseconds(500);
  o.retry_pause = std::chrono::milliseconds(100);
  return o;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

class TransferFetch : public ::testing::Test {
 protected:
  net::curve_cert holder_key = make_key("holder");
  net::curve_cert fetcher_key = make_key("fetcher");
  store_test_dir target_dir;
  store::model_store target{target_dir.path() / "store"};
};

TEST_F(TransferFetch, CopiesAModelOfSeveralFilesWithKeys) {
  holder h(holder_key);
  const std::string a = generated_bytes((9 << 20) + 123, 1), b = generated_bytes(1000, 2);
  const auto fa = h.add("m-00001-of-00002.gguf", a), fb = h.add("m-00002-of-00002.gguf", b);
  h.allow(fetcher_key, {fa.digest, fb.digest});
  fetch_progress last;
  auto m = fetch_model(
      target, copy_of({fa, fb}, {peer_of(h, "n1", holder_key)}), quick(fetcher_key),
      [&](const fetch_progress& p) { last = p; }, nullptr);
  ASSERT_TRUE(m) << m.message();
  EXPECT_EQ(m->name, "tiny");
  EXPECT_EQ(m->source, "hf:owner/repo@abc/tiny.gguf");
  EXPECT_EQ(m->metadata.value("copied_from", ""), "peer:n1");
  EXPECT_EQ(m->kind, "gguf-split");
  EXPECT_EQ(read_file(target.blob_path(fa.digest)), a);
  EXPECT_EQ(read_file(target.blob_path(fb.digest)), b);
  EXPECT_EQ(last.bytes_done, a.size() + b.size());
  EXPECT_EQ(last.bytes_total, a.size() + b.size());
  EXPECT_EQ(last.bytes_from_peers, a.size() + b.size());
  EXPECT_EQ(last.from, "peer:n1");
  EXPECT_TRUE(std::filesystem::exists(target.views() / "tiny" / "m-00001-of-00002.gguf"));
  EXPECT_EQ(h.server->stats().bytes, a.size() + b.size());
}

TEST_F(TransferFetch, WithoutKeysTheTransferIdIsTheTicket) {
  const net::curve_cert none;
  holder h(none);
  const auto f = h.add("tiny.gguf", generated_bytes(5000, 3));
  h.allow(none, {f.digest}, 60000, k_transfer + 1);  // another transfer's ticket
  auto refused =
      fetch_model(target, copy_of({f}, {peer_of(h, "n1", none)}), quick(none), {}, nullptr);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("no ticket for transfer 41"), std::string::npos)
      << refused.message();
  h.allow(none, {f.digest});
  auto m = fetch_model(target, copy_of({f}, {peer_of(h, "n1", none)}), quick(none), {}, nullptr);
  ASSERT_TRUE(m) << m.message();
  EXPECT_EQ(m->kind, "gguf");
  EXPECT_TRUE(std::filesystem::exists(target.views() / "tiny.gguf"));
}

TEST_F(TransferFetch, NoTicketIsRefused) {
  holder h(holder_key);
  const auto f = h.add("tiny.gguf", generated_bytes(5000, 4));
  auto m = fetch_model(target, copy_of({f}, {peer_of(h, "n1", holder_key)}), quick(fetcher_key), {},
                       nullptr);
  ASSERT_FALSE(m);
  EXPECT_NE(m.message().find("n1: unauthorized: no ticket"), std::string::npos) << m.message();
  EXPECT_FALSE(target.has_blob(f.digest));
  EXPECT_FALSE(target.find("tiny"));
}

TEST_F(TransferFetch, AnExpiredTicketIsRefused) {
  holder h(holder_key);
  const auto f = h.add("tiny.gguf", generated_bytes(5000, 5));
  h.allow(fetcher_key, {f.digest}, 50);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto m = fetch_model(target, copy_of({f}, {peer_of(h, "n1", holder_key)}), quick(fetcher_key), {},
                       nullptr);
  ASSERT_FALSE(m);
  EXPECT_NE(m.message().find("no ticket"), std::string::npos) << m.message();
}

TEST_F(TransferFetch, AStrangersKeyIsRefused) {
  holder h(holder_key);
  const auto f = h.add("tiny.gguf", generated_bytes(5000, 6));
  h.allow(fetcher_key, {f.digest});
  const net::curve_cert stranger = make_key("stranger");
  auto m = fetch_model(target, copy_of({f}, {peer_of(h, "n1", holder_key)}), quick(stranger), {},
                       nullptr);
  ASSERT_FALSE(m);
  EXPECT_NE(m.message().find("is for another node's key"), std::string::npos) << m.message();
  // A ticket covers its digests only.
  const auto other = h.add("other.gguf", generated_bytes(700, 7));
  auto m2 = fetch_model(target, copy_of({other}, {peer_of(h, "n1", holder_key)}),
                        quick(fetcher_key), {}, nullptr);
  ASSERT_FALSE(m2);
  EXPECT_NE(m2.message().find("does not cover"), std::string::npos) << m2.message();
}

// A FAKE holder: a real transfer server whose file for the digest has one byte changed. Its
// bytes fail verification; the copy drops it and takes the blob from the next holder.
TEST_F(TransferFetch, AWrongByteFromAHolderIsRefusedAndTheNextHolderUsed) {
  holder good(holder_key);
  const std::string bytes = generated_bytes((6 << 20) + 17, 8);
  const auto f = good.add("tiny.gguf", bytes);
  store_test_dir fake_dir;
  std::string corrupt = bytes;
  corrupt[(5 << 20) + 3] ^= 0x20;
  write_test_file(fake_dir.path() / "corrupt", corrupt);
  transfer_server fake_corrupting_holder({"tcp://127.0.0.1:*", holder_key}, [&](std::string_view) {
    return std::optional(fake_dir.path() / "corrupt");
  });
  const wire::transfer_peer fake{"fake",
                                 "tcp://127.0.0.1:" + std::to_string(fake_corrupting_holder.port()),
                                 holder_key.public_key};
  fake_corrupting_holder.allow({k_transfer, "fetcher", fetcher_key.public_key, {f.digest}, 60000});
  good.allow(fetcher_key, {f.digest});
  auto m = fetch_model(target, copy_of({f}, {fake, peer_of(good, "n2", holder_key)}),
                       quick(fetcher_key), {}, nullptr);
  ASSERT_TRUE(m) << m.message();
  EXPECT_EQ(read_file(target.blob_path(f.digest)), bytes);
  EXPECT_EQ(fake_corrupting_holder.stats().bytes, bytes.size());
  EXPECT_EQ(good.server->stats().bytes, bytes.size());
  EXPECT_EQ(m->metadata.value("copied_from", ""), "peer:n2");
}

// The holder stops mid-copy and starts again on the same port: the copy waits (its only peer
// failed), asks again and goes on from where it stopped.
TEST_F(TransferFetch, ResumesAfterTheHolderIsStoppedMidCopy) {
  holder h(holder_key);
  const std::string bytes = generated_bytes(32 << 20, 9);
  const auto f = h.add("tiny.gguf", bytes);
  h.allow(fetcher_key, {f.digest});
  const std::string endpoint = h.endpoint();
  auto opts = quick(fetcher_key);
  opts.rate_limit = 32 << 20;  // about a second, so that the stop lands in the middle
  opts.flush_bytes = 4 << 20;
  opts.rounds = 20;
  std::atomic<uint64_t> done{0};
  result<store::manifest> m = error{"not run"};
  std::thread copy([&] {
    m = fetch_model(
        target, copy_of({f}, {peer_of(h, "n1", holder_key)}), opts,
        [&](const fetch_progress& p) { done = p.bytes_done; }, nullptr);
  });
  while (done < (12u << 20)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const uint64_t first = [&] {
    auto s = h.server->stats().bytes;
    h.server.reset();
    return s;
  }();
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  h.start(holder_key, endpoint);
  h.allow(fetcher_key, {f.digest});
  copy.join();
  ASSERT_TRUE(m) << m.message();
  EXPECT_EQ(read_file(target.blob_path(f.digest)), bytes);
  const uint64_t second = h.server->stats().bytes;
  std::printf("resume: %llu bytes before the stop, %llu after (blob %zu)\n",
              (unsigned long long)first, (unsigned long long)second, bytes.size());
  EXPECT_LT(second, bytes.size());
  EXPECT_GT(first, 0u);
}

TEST_F(TransferFetch, TheRateCapIsHonoured) {
  holder h(holder_key);
  const std::string bytes = generated_bytes(24 << 20, 10);
  const auto f = h.add("tiny.gguf", bytes);
  h.allow(fetcher_key, {f.digest});
  auto opts = quick(fetcher_key);
  opts.rate_limit = 16 << 20;
  const auto t0 = std::chrono::steady_clock::now();
  auto m = fetch_model(target, copy_of({f}, {peer_of(h, "n1", holder_key)}), opts, {}, nullptr);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(m) << m.message();
  std::printf("rate cap 16 MiB/s: %zu bytes in %.3f s = %.1f MiB/s\n", bytes.size(), s,
              double(bytes.size()) / s / (1 << 20));
}

// The holder's answers to requests a fetcher should not make, on a raw socket.
TEST_F(TransferFetch, BadRequestsGetErrors) {
  holder h(holder_key);
  const auto f = h.add("tiny.gguf", generated_bytes(5000, 11));
  h.allow(fetcher_key, {f.digest, "sha256:" + std::string(64, 'a')});
  zmq::context_t ctx;
  auto s = net::make_socket(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::curve_serverkey, holder_key.public_key);
  s.set(zmq::sockopt::curve_publickey, fetcher_key.public_key);
  s.set(zmq::sockopt::curve_secretkey, fetcher_key.secret_key);
  s.connect(h.endpoint());
  auto ask = [&](const wire::blob_request& r) {
    net::send(s, "", r);
    zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(5000));
    auto msg = net::try_recv(s, false);
    EXPECT_TRUE(msg);
    if (!msg) return wire::error_reply{};
    const auto frames = msg->views();
    auto env = wire::open_envelope(std::span(frames.data(), 3));
    EXPECT_EQ(env.env.cmd, wire::command::error);
    auto e = wire::decode<wire::error_reply>(env.env.body);
    EXPECT_TRUE(e);
    return *e;
  };
  auto past = ask({7, k_transfer, f.digest, 5000, 10});
  EXPECT_EQ(past.request_id, 7u);
  EXPECT_EQ(past.code, wire::error_code::invalid_params);
  EXPECT_NE(past.message.find("past the end"), std::string::npos) << past.message;
  auto big = ask({8, k_transfer, f.digest, 0, wire::max_blob_chunk + 1});
  EXPECT_EQ(big.code, wire::error_code::invalid_params);
  auto unknown = ask({9, k_transfer, "sha256:" + std::string(64, 'a'), 0, 10});
  EXPECT_EQ(unknown.code, wire::error_code::not_found);
  // The last bytes: fewer than asked, no error.
  net::send(s, "", wire::blob_request{10, k_transfer, f.digest, 4990, 100});
  zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&item, 1, std::chrono::milliseconds(5000));
  auto msg = net::try_recv(s, false);
  ASSERT_TRUE(msg);
  ASSERT_EQ(msg->frames.size(), 4u);
  auto c = wire::decode<wire::blob_chunk>(msg->views()[2]);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->length, 10u);
  EXPECT_EQ(c->size, 5000u);
  EXPECT_EQ(msg->frames[3].size(), 10u);
}

TEST(TransferKind, OfFiles) {
  EXPECT_EQ(model_kind_of({{"a.gguf", "", 1}}), "gguf");
  EXPECT_EQ(model_kind_of({{"a-1.gguf", "", 1}, {"a-2.gguf", "", 1}}), "gguf-split");
  EXPECT_EQ(model_kind_of({{"config.json", "", 1}, {"m.safetensors", "", 1}}), "hf-folder");
}

}  // namespace
}  // namespace hearth::node
