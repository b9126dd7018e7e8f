// The two ends of tests/lan-copy.sh, each run in a network namespace of its own: a node's
// transfer server over a store (`serve`) and a node's fetcher copying one blob from it (`fetch`),
// each printing the CPU time it spent (getrusage) per GB moved; and a plain TCP copy of the same
// size over the same link (`tcp-send`, `tcp-recv`), the baseline the copy is compared with.
//
//   lan_copy_tool keygen DIR NAME
//   lan_copy_tool make STORE BYTES                        -> prints the blob's digest
//   lan_copy_tool serve STORE ENDPOINT KEY FETCHER_PUB DIGEST   (until SIGTERM/SIGINT)
//   lan_copy_tool fetch STORE ENDPOINT KEY SERVER_PUB DIGEST BYTES [RATE]
//   lan_copy_tool tcp-send PORT BYTES | tcp-recv ADDRESS PORT BYTES
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "node/transfer-fetch.h"
#include "node/transfer-server.h"
#include "schema/curve-cert.h"
#include "store/model-store.h"

namespace {

using namespace hearth;
using steady = std::chrono::steady_clock;

std::atomic<bool> g_stop{false};

double cpu_seconds(bool system_only = false) {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const double sys = double(u.ru_stime.tv_sec) + double(u.ru_stime.tv_usec) / 1e6;
  return system_only ? sys : sys + double(u.ru_utime.tv_sec) + double(u.ru_utime.tv_usec) / 1e6;
}

// `cpu`: the process's user + system seconds over the run, `sys` the system ones of them.
void report(const char* what, uint64_t bytes, double seconds, double cpu, double sys = 0) {
  const double gb = double(bytes) / 1e9;
  std::printf(
      "%s: %llu bytes in %.3f s = %.1f MB/s (%.1f Mbit/s); CPU %.3f s = %.3f s per GB "
      "(system %.3f s per GB)\n",
      what, (unsigned long long)bytes, seconds, double(bytes) / seconds / 1e6,
      double(bytes) * 8 / seconds / 1e6, cpu, bytes ? cpu / gb : 0.0, bytes ? sys / gb : 0.0);
  std::fflush(stdout);
}

// "-": no key (plain connections: the cost of CURVE shows beside a run with keys).
net::curve_cert load(const std::string& path, bool secret) {
  if (path == "-") return {};
  auto c = secret ? net::curve_cert_load_secret(path) : net::curve_cert_load(path);
  if (!c) throw std::runtime_error(c.message());
  return *c;
}

int keygen(const std::string& dir, const std::string& name) {
  auto c = net::curve_cert_generate(name);
  if (!c) throw std::runtime_error(c.message());
  if (auto r = net::curve_cert_save(*c, dir, name); !r) throw std::runtime_error(r.message());
  return 0;
}

// A blob of pseudo-random bytes (incompressible, as model weights are) into the store.
int make(const std::string& root, uint64_t bytes) {
  store::model_store st(root);
  const auto src = std::filesystem::path(root) / "source.bin";
  {
    FILE* f = std::fopen(src.c_str(), "wb");
    if (!f) throw std::runtime_error("cannot write " + src.string());
    std::mt19937_64 rng(54);
    std::vector<uint64_t> block(1 << 17);
    for (uint64_t done = 0; done < bytes;) {
      for (auto& w : block) w = rng();
      const size_t n = size_t(std::min<uint64_t>(bytes - done, block.size() * 8));
      std::fwrite(block.data(), 1, n, f);
      done += n;
    }
    std::fclose(f);
  }
  const auto blob = st.import_file(src);
  std::filesystem::remove(src);
  std::printf("%s\n", ("sha256:" + blob.filename().string().substr(7)).c_str());
  return 0;
}

int serve(const std::string& root, const std::string& endpoint, const std::string& key,
          const std::string& fetcher_pub, const std::string& digest) {
  store::model_store st(root);
  node::transfer_server server({endpoint, load(key, true)},
                               [&](std::string_view d) -> std::optional<std::filesystem::path> {
                                 if (!st.has_blob(d)) return std::nullopt;
                                 return st.blob_path(d);
                               });
  server.allow({1, "fetcher", load(fetcher_pub, false).public_key, {digest}, 600000});
  std::printf("serving on %s\n", endpoint.c_str());
  std::fflush(stdout);
  const double cpu0 = cpu_seconds(), sys0 = cpu_seconds(true);
  const auto t0 = steady::now();
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto s = server.stats();
  report("server", s.bytes, std::chrono::duration<double>(steady::now() - t0).count(),
         cpu_seconds() - cpu0, cpu_seconds(true) - sys0);
  return 0;
}

int fetch(const std::string& root, const std::string& endpoint, const std::string& key,
          const std::string& server_pub, const std::string& digest, uint64_t bytes, uint64_t rate) {
  store::model_store st(root);
  wire::model_fetch m;
  m.transfer_id = 1;
  m.name = "lan-copy";
  m.files = {{"lan-copy.gguf", digest, bytes}};
  m.peers = {{"server", endpoint, load(server_pub, false).public_key}};
  node::fetch_options o;
  o.key = load(key, true);
  o.rate_limit = rate;
  // Knobs for trying the fetcher's settings on a link (the defaults are the node's).
  if (const char* w = std::getenv("LAN_COPY_WINDOW")) o.window = uint32_t(std::stoul(w));
  if (const char* c = std::getenv("LAN_COPY_CHUNK_KIB"))
    o.chunk_bytes = uint32_t(std::stoul(c)) << 10;
  if (const char* f = std::getenv("LAN_COPY_FLUSH_MIB")) o.flush_bytes = std::stoull(f) << 20;
  const double cpu0 = cpu_seconds(), sys0 = cpu_seconds(true);
  const auto t0 = steady::now();
  // When the last byte arrived, and the CPU spent by then: the copy over the link, without the
  // verification (one SHA-256 pass over the blob) and commit that follow it.
  steady::time_point received{};
  double cpu_received = 0, sys_received = 0;
  auto r = node::fetch_model(
      st, m, o,
      [&](const node::fetch_progress& p) {
        if (p.bytes_from_peers == bytes && received == steady::time_point{}) {
          received = steady::now();
          cpu_received = cpu_seconds();
          sys_received = cpu_seconds(true);
        }
      },
      nullptr);
  const double s = std::chrono::duration<double>(steady::now() - t0).count();
  if (!r) {
    std::fprintf(stderr, "fetch failed: %s\n", r.message().c_str());
    return 1;
  }
  report("copy over the link (last byte in)", bytes,
         std::chrono::duration<double>(received - t0).count(), cpu_received - cpu0,
         sys_received - sys0);
  report("copy with verify and commit", bytes, s, cpu_seconds() - cpu0, cpu_seconds(true) - sys0);
  return 0;
}

int tcp_send(int port, uint64_t bytes) {
  const int l = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  if (bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(l, 1) != 0)
    throw std::runtime_error("cannot listen");
  std::printf("listening\n");
  std::fflush(stdout);
  const int c = accept(l, nullptr, nullptr);
  std::vector<char> buf(1 << 20, 'x');
  for (uint64_t done = 0; done < bytes;) {
    const ssize_t n = write(c, buf.data(), size_t(std::min<uint64_t>(bytes - done, buf.size())));
    if (n <= 0) break;
    done += uint64_t(n);
  }
  close(c);
  close(l);
  return 0;
}

int tcp_recv(const std::string& address, int port, uint64_t bytes) {
  const int c = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  inet_pton(AF_INET, address.c_str(), &a.sin_addr);
  const double cpu0 = cpu_seconds(), sys0 = cpu_seconds(true);
  const auto t0 = steady::now();
  if (connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    throw std::runtime_error("cannot connect");
  std::vector<char> buf(1 << 20);
  uint64_t done = 0;
  while (done < bytes) {
    const ssize_t n = read(c, buf.data(), buf.size());
    if (n <= 0) break;
    done += uint64_t(n);
  }
  close(c);
  report("plain TCP copy (receiver)", done,
         std::chrono::duration<double>(steady::now() - t0).count(), cpu_seconds() - cpu0,
         cpu_seconds(true) - sys0);
  return done == bytes ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGTERM, [](int) { g_stop = true; });
  std::signal(SIGINT, [](int) { g_stop = true; });
  const std::vector<std::string> a(argv + 1, argv + argc);
  try {
    if (a.size() == 3 && a[0] == "keygen") return keygen(a[1], a[2]);
    if (a.size() == 3 && a[0] == "make") return make(a[1], std::stoull(a[2]));
    if (a.size() == 6 && a[0] == "serve") return serve(a[1], a[2], a[3], a[4], a[5]);
    if ((a.size() == 7 || a.size() == 8) && a[0] == "fetch")
      return fetch(a[1], a[2], a[3], a[4], a[5], std::stoull(a[6]),
                   a.size() == 8 ? std::stoull(a[7]) : 0);
    if (a.size() == 3 && a[0] == "tcp-send") return tcp_send(std::stoi(a[1]), std::stoull(a[2]));
    if (a.size() == 4 && a[0] == "tcp-recv")
      return tcp_recv(a[1], std::stoi(a[2]), std::stoull(a[3]));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lan_copy_tool: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: see tests/lan-copy-tool.cpp\n");
  return 2;
}
