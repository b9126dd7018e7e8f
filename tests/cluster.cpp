#include "tests/cluster.h"
#include "client/connection.h"
#include "client/protocol.h"
#include "client/stream-order.h"
#include "tests/model-variant.h"
#include "tests/testdata.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <utility>

extern char** environ;

namespace hearth::testing {
namespace {

// Every test program that starts processes, and all they start, has a config folder of its own:
// `hearth up --auth` writes an admin key where the CLI looks for keys by default
// ($XDG_CONFIG_HOME/hearth), which must never be the user's, and a CLI under test must not pick
// up the user's keys.
std::string isolated_config_home;
[[maybe_unused]] const bool config_home_isolated = [] {
  std::string dir = (std::filesystem::temp_directory_path() / "hearth-test-config-XXXXXX").string();
  if (!mkdtemp(dir.data())) return false;
  isolated_config_home = dir;
  setenv("XDG_CONFIG_HOME", dir.c_str(), 1);
  std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(isolated_config_home, ec);
  });
  return true;
}();

}  // namespace

process::process(process&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)), log_(std::move(o.log_)), status_(o.status_) {}

process& process::operator=(process&& o) noexcept {
  if (this != &o) {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    pid_ = std::exchange(o.pid_, -1);
    log_ = std::move(o.log_);
    status_ = o.status_;
  }
  return *this;
}

process::~process() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::string process::log() const {
  std::ifstream f(log_);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string logs_of(std::initializer_list<std::pair<const char*, const process*>> processes) {
  std::string all;
  for (const auto& [name, p] : processes) {
    if (p) all += std::string("--- ") + name + " ---\n" + p->log() + "\n";
  }
  return all;
}

void process::signal(int sig) const {
  if (pid_ > 0) ::kill(pid_, sig);
}

int process::wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return status_;
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      return status_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

bool process::running() {
  if (pid_ <= 0) return false;
  int st = 0;
  if (waitpid(pid_, &st, WNOHANG) == pid_) {
    pid_ = -1;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return false;
  }
  return true;
}

process spawn(const std::vector<std::string>& argv, const std::string& log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    ADD_FAILURE() << "cannot start " << argv[0] << ": " << strerror(rc);
    return {};
  }
  return process(pid, log);
}

temp_dir::temp_dir() {
  std::string tmpl = ::testing::TempDir() + "hearth-XXXXXX";
  if (!mkdtemp(tmpl.data())) ADD_FAILURE() << "mkdtemp failed";
  path_ = tmpl;
}

temp_dir::~temp_dir() {
  std::error_code ec;
  if (!getenv("HEARTH_KEEP_TEST_DIRS")) std::filesystem::remove_all(path_, ec);
}

namespace {

// Whether `port` can be bound on every address now (0.0.0.0: the dashboard test's gateway binds
// there, and a port free on 0.0.0.0 is free on 127.0.0.1).
bool port_bindable(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(uint16_t(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

// The kernel's range of ephemeral ports (the source ports of outgoing connections).
std::pair<int, int> ephemeral_ports() {
  int lo = 32768, hi = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> lo >> hi;
  return {lo, hi};
}

}  // namespace

int free_port() {
  // Below the ephemeral range: a port the kernel handed out (bind to port 0) is soon handed out
  // again as the source port of some test's outgoing connection, and the flood tests make
  // thousands of those, so a server started a moment later found its port taken ("Address already
  // in use"). A random port below the range is taken only by another test that chose the same one.
  const auto [lo, hi] = ephemeral_ports();
  const int top = std::min(lo, 65536) - 1, bottom = 10000;
  if (top > bottom) {
    static std::mt19937 pick{std::random_device{}()};
    std::uniform_int_distribution<int> in(bottom, top);
    for (int i = 0; i < 200; ++i) {
      const int port = in(pick);
      if (port_bindable(port)) return port;
    }
  }
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

void link_model(const std::string& dir, const std::string& name, const std::string& target) {
  std::filesystem::create_directories(dir);
  std::filesystem::create_symlink(target, dir + "/" + name + ".gguf");
}

cluster::cluster(bool with_auth) : auth_(with_auth) {
  endpoint_ = "tcp://127.0.0.1:" + std::to_string(free_port());
  if (!auth_) return;
  for (const char* sub : {"nodes", "clients", "admins"}) {
    std::filesystem::create_directories(auth_dir() + "/" + sub);
  }
  auto broker = net::curve_cert_generate("broker");
  if (!broker) {
    ADD_FAILURE() << broker.message();
    return;
  }
  if (auto r = net::curve_cert_save(*broker, auth_dir(), "broker"); !r)
    ADD_FAILURE() << r.message();
}

std::string cluster::models(const std::string& dir_name,
                            const std::vector<std::string>& names) const {
  const std::string dir = dir_.file(dir_name);
  const std::string stories = testdata_path("models/stories260K.gguf");
  for (const auto& n : names) link_model(dir, n, stories);
  return dir;
}

std::string cluster::chat_models(const std::string& dir_name,
                                 const std::vector<std::string>& names) const {
  const std::string dir = dir_.file(dir_name);
  // Written under a name of this process, then moved into the cluster's folder.
  const std::string written = write_stories_variant(
      "cluster_chatml_" + std::to_string(getpid()), {.metadata = [](gguf_writer& w) {
        w.set_string("tokenizer.chat_template", testing::k_chatml_template);
      }});
  const std::string chatml = dir_.file("stories260K-chatml.gguf");
  std::filesystem::rename(written, chatml);
  for (const auto& n : names) link_model(dir, n, chatml);
  return dir;
}

std::string cluster::key(const std::string& role, const std::string& name, bool allowed) {
  const std::string keys = dir_.file("keys");
  const std::string stem = role + "-" + name + (allowed ? "" : "-stranger");
  const std::string secret = keys + "/" + stem + ".key";
  if (std::filesystem::exists(secret)) return secret;
  auto c = net::curve_cert_generate(name);
  if (!c) {
    ADD_FAILURE() << c.message();
    return secret;
  }
  if (auto r = net::curve_cert_save(*c, keys, stem); !r) ADD_FAILURE() << r.message();
  if (allowed) {
    // The broker picks it up at once: an unknown key makes it rescan its folders.
    std::filesystem::copy_file(keys + "/" + stem + ".pub",
                               auth_dir() + "/" + role + "s/" + name + ".pub");
  }
  return secret;
}

net::curve_client_keys cluster::client_keys(const std::string& role, const std::string& name,
                                            bool allowed) {
  if (!auth_) return {};
  auto k = net::curve_client_keys_load(broker_public(), key(role, name, allowed));
  if (!k) {
    ADD_FAILURE() << k.message();
    return {};
  }
  return std::move(k.value());
}

std::vector<std::string> cluster::key_args(const std::string& role, const std::string& name) {
  if (!auth_) return {};
  return {"--broker-key", broker_public(), "--key", key(role, name)};
}

std::unique_ptr<test_client> cluster::client(const std::string& role, const std::string& name) {
  return std::make_unique<test_client>(endpoint_, client_keys(role, name));
}

void cluster::broker_settings(const std::vector<std::pair<std::string, std::string>>& settings) {
  std::vector<std::pair<std::string, std::string>> all = {
      {"heartbeat_ms", "200"},     {"liveness", "5"},      {"output_flush_ms", "50"},
      {"queue_position_ms", "50"}, {"log_level", "debug"},
  };
  for (const auto& [name, value] : settings) {
    auto it = std::find_if(all.begin(), all.end(), [&](const auto& s) { return s.first == name; });
    if (it != all.end()) {
      it->second = value;
    } else {
      all.emplace_back(name, value);
    }
  }
  std::ofstream f(broker_config());
  for (const auto& [name, value] : all) f << name << ": " << value << "\n";
}

std::vector<std::string> cluster::broker_argv(const std::string& bind,
                                              const std::vector<std::string>& extra) {
  if (!std::filesystem::exists(broker_config())) broker_settings({});
  std::vector<std::string> argv = {HEARTH_BROKER_BIN, "--bind",       bind, "--db", db(),
                                   "--config",        broker_config()};
  if (auth_) argv.insert(argv.end(), {"--auth", auth_dir()});
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

process cluster::start_broker(const std::vector<std::string>& extra,
                              const std::vector<std::string>& wrapper) {
  std::vector<std::string> argv = wrapper;
  const auto broker = broker_argv(endpoint_, extra);
  argv.insert(argv.end(), broker.begin(), broker.end());
  return spawn(argv, dir_.file("broker-" + std::to_string(n_logs_++) + ".log"));
}

process cluster::start_node(const std::string& name, const std::string& models_dir,
                            const std::string& engine, int slots,
                            const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {HEARTH_NODE_BIN,
                                   "--broker",
                                   endpoint_,
                                   "--name",
                                   name,
                                   "--models",
                                   models_dir,
                                   "--engine",
                                   engine,
                                   "--slots",
                                   std::to_string(slots),
                                   "--log-level",
                                   "debug"};
  // A test that gives its own --key (a second node under another key) gets no default one.
  if (std::find(extra.begin(), extra.end(), "--key") == extra.end()) {
    const auto keys = key_args("node", name);
    argv.insert(argv.end(), keys.begin(), keys.end());
  }
  if (std::find(extra.begin(), extra.end(), "--store") == extra.end())
    argv.insert(argv.end(), {"--store", node_store(name)});
  argv.insert(argv.end(), extra.begin(), extra.end());
  return spawn(argv, dir_.file("node-" + name + "-" + std::to_string(n_logs_++) + ".log"));
}

process cluster::start_gateway(const std::string& bin, const std::string& listen,
                               const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {
      bin, "--listen", listen, "--broker", endpoint_, "--db", dir_.file("gateway.db")};
  const auto keys = key_args("client", "gateway");
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), extra.begin(), extra.end());
  return spawn(argv, dir_.file("gateway-" + std::to_string(n_logs_++) + ".log"));
}

test_client::test_client(const std::string& endpoint, const net::curve_client_keys& keys)
    : sock_(client::dealer_open(ctx_, keys)) {
  // A DEALER whose handshake was refused has no connection to queue into, and a blocking send
  // would wait for ever; the tests of refused keys need the send to give up.
  sock_.set(zmq::sockopt::sndtimeo, 1000);
  client::dealer_connect(sock_, endpoint);
}

test_client::reply test_client::request_raw(wire::command cmd, const std::string& body,
                                            uint64_t request_id,
                                            std::chrono::milliseconds timeout) {
  client::request_send(sock_, cmd, body);
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    zmq::pollitem_t items[] = {{sock_.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, std::chrono::milliseconds(50));
    while (auto msg = net::try_recv(sock_, false)) {
      const auto frames = msg->views();
      auto env = wire::open_envelope(frames);
      if (!env.ok) continue;
      if (env.env.cmd == wire::command::heartbeat) {
        ++heartbeats_;
        continue;
      }
      reply r{env.env.cmd, std::string(env.env.body)};
      // Replies carry request_id (client/protocol.h); events do not.
      auto id = client::reply_request_id(r.body);
      const bool is_reply = id && *id == request_id;
      if (is_reply) return r;
      events_.push_back(std::move(r));
    }
  }
  return {wire::command::error, {}};
}

bool test_client::send_request(wire::command cmd, const std::string& body) {
  return client::request_send(sock_, cmd, body);
}

std::optional<test_client::reply> test_client::next_event(std::chrono::milliseconds timeout) {
  if (!events_.empty()) {
    reply r = std::move(events_.front());
    events_.erase(events_.begin());
    return r;
  }
  // The broker's heartbeats are not events (PROTOCOL.md section 9.4): skipped.
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    zmq::pollitem_t items[] = {{sock_.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, std::max(left, std::chrono::milliseconds(0)));
    auto msg = net::try_recv(sock_, false);
    if (!msg) return std::nullopt;
    const auto frames = msg->views();
    auto env = wire::open_envelope(frames);
    if (!env.ok) return std::nullopt;
    if (env.env.cmd != wire::command::heartbeat)
      return reply{env.env.cmd, std::string(env.env.body)};
    ++heartbeats_;
  }
}

test_client::outcome test_client::follow(uint64_t job_id, std::chrono::milliseconds timeout) {
  outcome o;
  // Duplicates and older attempts dropped as every client of the library drops them.
  client::stream_order order;
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    auto ev = next_event(std::chrono::milliseconds(100));
    if (!ev) continue;
    if (ev->cmd == wire::command::job_tokens) {
      auto t = wire::decode<wire::job_tokens>(ev->body);
      if (!t || t->job_id != job_id) continue;
      const uint32_t attempt = order.attempt();
      const client::chunk_place p = order.accept(*t);
      if (!p.kept()) continue;
      if (order.attempt() != attempt) o.text.clear();  // a new attempt's text starts over
      o.text += t->text.substr(p.fresh);  // what a restatement adds beyond what we have
    } else if (ev->cmd == wire::command::job_restarted) {
      auto r = wire::decode<wire::job_restarted>(ev->body);
      if (r && r->job_id == job_id) ++o.restarts;
    } else if (ev->cmd == wire::command::job_done) {
      auto d = wire::decode<wire::job_done>(ev->body);
      if (d && d->job_id == job_id) {
        o.done = *d;
        return o;
      }
    }
  }
  return o;
}

std::optional<wire::job_detail> test_client::wait_final(uint64_t job_id,
                                                        std::chrono::milliseconds timeout) {
  std::optional<wire::job_detail> last;
  wait_until(
      [&] {
        auto r = request<wire::job_reply>(wire::get_job{0, job_id});
        if (r) last = r->job;
        return r && wire::job_state_is_final(r->job.summary.state);
      },
      timeout);
  return last;
}

wire::submit greedy_job(const std::string& model, const std::string& prompt, int32_t max_tokens) {
  wire::submit s;
  s.model = model;
  s.prompt = prompt;
  s.params.max_tokens = max_tokens;
  s.params.temperature = 0;
  return s;
}

void expect_greedy_text(test_client& client, const std::string& model, const std::string& prompt,
                        const std::string& greedy_text, const std::function<std::string()>& log,
                        greedy_run* run) {
  wire::submit s = greedy_job(model, prompt, 64);
  s.watch = true;
  auto acc = client.request<wire::accepted>(s);
  ASSERT_TRUE(acc);
  auto out = client.follow(acc->job_id);
  ASSERT_TRUE(out.done) << log();
  EXPECT_EQ(out.done->state, wire::job_state::completed) << out.done->error;
  EXPECT_EQ(out.text, greedy_text);
  if (run) *run = {acc->job_id, std::move(out)};
}

void expect_completes(test_client& client, const wire::submit& s,
                      const std::function<std::string()>& log,
                      std::optional<wire::job_detail>* detail, std::chrono::milliseconds timeout) {
  auto acc = client.request<wire::accepted>(s);
  ASSERT_TRUE(acc) << log();
  auto d = client.wait_final(acc->job_id, timeout);
  ASSERT_TRUE(d) << log();
  EXPECT_EQ(d->summary.state, wire::job_state::completed);
  if (detail) *detail = std::move(d);
}

bool wait_until(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

bool nodes_online(test_client& c, size_t n) {
  return wait_until([&] {
    auto r = c.request<wire::nodes_reply>(wire::list_nodes{});
    if (!r) return false;
    size_t online = 0;
    for (const auto& node : r->nodes) online += node.online;
    return online >= n;
  });
}

}  // namespace hearth::testing
