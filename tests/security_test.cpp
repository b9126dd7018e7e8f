// Issue 15's attacks, each now failing for the attacker: real hearth-broker and hearth-node
// processes on loopback with --auth (CURVE and a folder of keys), peers holding keys of the wrong
// role, of no role, or none at all.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/cluster-fixture.h"
#include "tests/cluster.h"
#include "tests/fake-node.h"
#include "tests/testdata.h"

namespace hearth::testing {
namespace {

using namespace std::chrono_literals;

constexpr auto job = testing::greedy_job;

class security_test : public testing::stories_cluster_test {
 protected:
  // The nodes the broker lists (as an admin sees them).
  std::vector<wire::node_summary> nodes() {
    auto r = admin().request<wire::nodes_reply>(wire::list_nodes{});
    return r ? r->nodes : std::vector<wire::node_summary>{};
  }
  bool node_online(const std::string& name) {
    return wait_until([&] {
      for (const auto& n : nodes()) {
        if (n.name == name && n.online) return true;
      }
      return false;
    });
  }
  test_client& admin() {
    if (!admin_) admin_ = c_.client("admin", "root");
    return *admin_;
  }
  // A request that must get no answer at all: the peer never got past the handshake.
  static bool unanswered(test_client& t, const wire::list_nodes& req) {
    return t.request_raw(wire::command::list_nodes, wire::encode(req), req.request_id, 1500ms)
        .body.empty();
  }

  std::unique_ptr<test_client> admin_;
};

TEST_F(security_test, a_peer_without_an_allowed_key_gets_nothing) {
  auto broker = c_.start_broker();
  auto node = c_.start_node("n", models("m", {"alpha"}), "null", 1);
  ASSERT_TRUE(node_online("n"));

  // A key the broker does not know, and no key at all (plain ZMTP).
  test_client stranger(c_.endpoint(), c_.client_keys("client", "mallory", /*allowed=*/false));
  test_client plain(c_.endpoint());
  EXPECT_TRUE(unanswered(stranger, wire::list_nodes{7}));
  EXPECT_TRUE(unanswered(plain, wire::list_nodes{8}));
  // Nor can they submit or register: nothing they send reaches the broker.
  auto s = job("alpha", "steal", 4);
  s.request_id = 9;
  EXPECT_TRUE(stranger.request_raw(wire::command::submit, wire::encode(s), 9, 1000ms).body.empty());
  wire::node_hello h;
  h.name = "evil";
  h.hostname = "evil";
  h.slots = 100;
  net::send(stranger.socket(), "", h);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(nodes().size(), 1u);
  auto jobs = admin().request<wire::jobs_reply>(wire::list_jobs{0, "", "", 50});
  ASSERT_TRUE(jobs);
  EXPECT_TRUE(jobs->jobs.empty());
  // The broker says whom it refused, naming the key and the address.
  const auto mallory = net::curve_cert_load(c_.key("client", "mallory", false));
  ASSERT_TRUE(mallory);
  EXPECT_NE(broker.log().find("refused a peer from 127.0.0.1 with key " + mallory->public_key),
            std::string::npos)
      << broker.log();
}

TEST_F(security_test, roles_decide_what_a_key_may_send) {
  auto broker = c_.start_broker();
  auto node = c_.start_node("n", models("m", {"alpha"}), "null", 1);
  ASSERT_TRUE(node_online("n"));
  std::string err;

  // A node key cannot submit or read history.
  auto as_node = c_.client("node", "fake");
  EXPECT_FALSE(as_node->request<wire::accepted>(job("alpha", "x", 4), &err));
  EXPECT_NE(err.find("unauthorized"), std::string::npos) << err;
  EXPECT_FALSE(as_node->request<wire::nodes_reply>(wire::list_nodes{}, &err));
  EXPECT_NE(err.find("unauthorized"), std::string::npos) << err;

  // A client key cannot register as a node, whatever it claims.
  auto as_client = c_.client("client", "alice");
  wire::node_hello h;
  h.name = "gpu-monster";
  h.hostname = "gpu-monster";
  h.slots = 1000;
  h.models = {{"alpha", "llama", "Q4_K_M", 1, 2048, true}};
  auto rep = as_client->request_raw(wire::command::node_hello, wire::encode(h), 0, 2000ms);
  ASSERT_EQ(rep.cmd, wire::command::error);
  auto e = wire::decode<wire::error_reply>(rep.body);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, wire::error_code::unauthorized);
  EXPECT_NE(e->message.find("node key"), std::string::npos) << e->message;
  EXPECT_EQ(nodes().size(), 1u);

  // Only an admin forgets nodes.
  EXPECT_FALSE(as_client->request<wire::ok>(wire::forget_node{0, "n"}, &err));
  EXPECT_NE(err.find("unauthorized"), std::string::npos) << err;
  // ... and only offline ones.
  EXPECT_FALSE(admin().request<wire::ok>(wire::forget_node{0, "n"}, &err));
  EXPECT_NE(err.find("online"), std::string::npos) << err;
  node.signal(SIGTERM);
  ASSERT_EQ(node.wait(), 0);
  ASSERT_TRUE(wait_until([&] { return !nodes().empty() && !nodes()[0].online; }));
  ASSERT_TRUE(admin().request<wire::ok>(wire::forget_node{0, "n"}, &err)) << err;
  EXPECT_TRUE(nodes().empty());
  // Its model is no longer known: a submit for it is refused as unknown.
  EXPECT_FALSE(as_client->request<wire::accepted>(job("alpha", "x", 4), &err));
  EXPECT_NE(err.find("unknown_model"), std::string::npos) << err;
}

TEST_F(security_test, a_client_sees_watches_and_cancels_only_its_own_jobs) {
  auto broker = c_.start_broker();
  auto node = c_.start_node("n", models("m", {"alpha"}), "null", 1, {"--null-tokens-per-s", "20"});
  ASSERT_TRUE(node_online("n"));
  auto alice = c_.client("client", "alice");
  auto bob = c_.client("client", "bob");
  auto a = alice->request<wire::accepted>(job("alpha", "alice's secret", 200));
  ASSERT_TRUE(a);
  auto b = bob->request<wire::accepted>(job("alpha", "bob's", 2));
  ASSERT_TRUE(b);
  std::string err;

  EXPECT_FALSE(bob->request<wire::job_reply>(wire::get_job{0, a->job_id}, &err));
  EXPECT_NE(err.find("unauthorized"), std::string::npos) << err;
  EXPECT_EQ(err.find("secret"), std::string::npos) << err;
  EXPECT_FALSE(bob->request<wire::ok>(wire::watch{0, a->job_id}, &err));
  EXPECT_NE(err.find("unauthorized"), std::string::npos) << err;
  EXPECT_FALSE(bob->request<wire::ok>(wire::cancel{0, a->job_id}, &err));
  EXPECT_NE(err.find("unauthorized"), std::string::npos) << err;
  auto bobs = bob->request<wire::jobs_reply>(wire::list_jobs{0, "", "", 50});
  ASSERT_TRUE(bobs);
  ASSERT_EQ(bobs->jobs.size(), 1u);
  EXPECT_EQ(bobs->jobs[0].job_id, b->job_id);
  EXPECT_EQ(bobs->jobs[0].owner, "bob");

  // Alice's own job is hers to read; an admin sees everything, with owners.
  auto mine = alice->request<wire::job_reply>(wire::get_job{0, a->job_id});
  ASSERT_TRUE(mine);
  EXPECT_EQ(mine->job.prompt, "alice's secret");
  EXPECT_EQ(mine->job.summary.owner, "alice");
  auto all = admin().request<wire::jobs_reply>(wire::list_jobs{0, "", "", 50});
  ASSERT_TRUE(all);
  ASSERT_EQ(all->jobs.size(), 2u);
  EXPECT_EQ(all->jobs[1].owner, "alice");
  ASSERT_TRUE(admin().request<wire::ok>(wire::cancel{0, a->job_id}, &err)) << err;
  auto done = alice->wait_final(a->job_id);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->summary.state, wire::job_state::cancelled);
}

TEST_F(security_test, a_node_name_belongs_to_its_key) {
  auto broker = c_.start_broker();
  const auto dir = models("m", {"alpha"});
  auto first = c_.start_node("twin", dir, "null", 1, {"--null-tokens-per-s", "40"});
  ASSERT_TRUE(node_online("twin"));
  auto client = c_.client();
  auto a = client->request<wire::accepted>(job("alpha", "hello", 40));
  ASSERT_TRUE(a);

  // Another machine with another key says it is "twin" too: it is refused and exits non-zero,
  // saying why; the first keeps its job.
  auto second =
      c_.start_node("twin", dir, "null", 1,
                    {"--broker-key", c_.broker_public(), "--key", c_.key("node", "other-twin")});
  EXPECT_EQ(second.wait(10s), 1);
  EXPECT_NE(second.log().find("the name twin is in use by another node key; choose --name"),
            std::string::npos)
      << second.log();
  auto done = client->wait_final(a->job_id);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->summary.state, wire::job_state::completed);
  EXPECT_EQ(done->summary.attempts, 1u);
  EXPECT_TRUE(first.running());

  // A fake node with a node key of its own cannot report on twin's attempts: the broker knows
  // its connection as another node (or none), so the tokens are dropped.
  auto fake = c_.client("node", "fake");
  wire::job_final f;
  f.job_id = a->job_id;
  f.attempt = 1;
  f.state = wire::job_state::failed;
  f.error = "injected";
  net::send(fake->socket(), "", f);
  std::this_thread::sleep_for(300ms);
  auto after = client->request<wire::job_reply>(wire::get_job{0, a->job_id});
  ASSERT_TRUE(after);
  EXPECT_EQ(after->job.summary.state, wire::job_state::completed);
  EXPECT_TRUE(after->job.summary.error.empty());
}

TEST_F(security_test, a_removed_key_stops_working_without_a_restart) {
  auto broker = c_.start_broker();
  auto client = c_.client("client", "leaver");
  ASSERT_TRUE(client->request<wire::nodes_reply>(wire::list_nodes{}));
  std::filesystem::remove(c_.auth_dir() + "/clients/leaver.pub");
  EXPECT_TRUE(wait_until([&] { return unanswered(*client, wire::list_nodes{42}); }, 10s));
  // A key added while the broker runs works at once.
  auto newcomer = c_.client("client", "newcomer");
  EXPECT_TRUE(newcomer->request<wire::nodes_reply>(wire::list_nodes{}));
}

TEST_F(security_test, a_removed_key_is_sent_nothing_more) {
  // Issue 52 (11): a removed key's messages were dropped, but the broker went on sending to its
  // connections: a watch streamed on (5 s measured) and a removed node kept being assigned jobs
  // (12 job_assigns in 3.1 s) until it was declared dead. Nodes here live 30 s without a word,
  // so that only the removal can stop them within the test's windows.
  c_.broker_settings({{"heartbeat_ms", "1000"}, {"liveness", "30"}});
  auto broker = c_.start_broker();
  auto streamer =
      c_.start_node("streamer", models("m", {"alpha"}), "null", 1, {"--null-tokens-per-s", "40"});
  ASSERT_TRUE(node_online("streamer"));
  testing::fake_node leaver(c_, "leaver");
  leaver.hello(4, {"beta"});
  ASSERT_TRUE(leaver.welcomed());
  leaver.send(wire::node_pull{4});

  // A watcher of a slow stream, and a job running on the node that will lose its key.
  auto follower = c_.client("client", "follower");
  auto streamed = job("alpha", "a long story", 4000);
  streamed.watch = true;
  ASSERT_TRUE(follower->request<wire::accepted>(streamed));
  auto first = admin().request<wire::accepted>(job("beta", "first", 4));
  ASSERT_TRUE(first);
  ASSERT_EQ(leaver.listen(5s, [](auto& h) { return !h.assigns.empty(); }).assigns.size(), 1u);
  ASSERT_TRUE(wait_until([&] {
    auto ev = follower->next_event(100ms);
    return ev && ev->cmd == wire::command::job_tokens;
  })) << "the stream runs";

  std::filesystem::remove(c_.auth_dir() + "/clients/follower.pub");
  std::filesystem::remove(c_.auth_dir() + "/nodes/leaver.pub");
  // What was on its way when the keys went (given a generous second and a half) is read; then
  // nothing more comes.
  std::this_thread::sleep_for(1500ms);
  const auto drained = std::chrono::steady_clock::now() + 300ms;
  while (std::chrono::steady_clock::now() < drained) (void)follower->next_event(20ms);
  (void)leaver.listen(100ms);
  int tokens_after = 0;
  const auto quiet_until = std::chrono::steady_clock::now() + 2s;
  while (std::chrono::steady_clock::now() < quiet_until) {
    auto ev = follower->next_event(50ms);
    tokens_after += ev && ev->cmd == wire::command::job_tokens;
  }
  EXPECT_EQ(tokens_after, 0) << "job_tokens to a watcher whose key was removed";

  // The node is gone: its attempt is queued again and a new job is not assigned to it.
  auto second = admin().request<wire::accepted>(job("beta", "second", 4));
  ASSERT_TRUE(second);
  EXPECT_TRUE(leaver.listen(2s).assigns.empty()) << "job_assign to a node whose key was removed";
  for (uint64_t id : {first->job_id, second->job_id}) {
    auto d = admin().request<wire::job_reply>(wire::get_job{0, id});
    ASSERT_TRUE(d);
    EXPECT_EQ(d->job.summary.state, wire::job_state::queued) << "job " << id;
  }
  bool leaver_online = true;
  for (const auto& n : nodes()) {
    if (n.name == "leaver") leaver_online = n.online;
  }
  EXPECT_FALSE(leaver_online);
  // Both go to the next node of the model.
  testing::fake_node arrival(c_, "arrival");
  arrival.hello(4, {"beta"});
  ASSERT_TRUE(arrival.welcomed());
  arrival.send(wire::node_pull{4});
  EXPECT_EQ(arrival.listen(5s, [](auto& h) { return h.assigns.size() >= 2; }).assigns.size(), 2u);
}

// Open file descriptors of a process.
size_t open_fds(pid_t pid) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    ++n;
  }
  return n;
}

TEST_F(security_test, idle_connections_are_closed_after_the_handshake_timeout) {
  auto broker = c_.start_broker();
  auto client = c_.client();
  ASSERT_TRUE(client->request<wire::nodes_reply>(wire::list_nodes{}));
  const size_t before = open_fds(broker.pid());
  // Raw TCP connections that never say a word (the test process's own limit allows ~1000).
  const int port = std::stoi(c_.endpoint().substr(c_.endpoint().rfind(':') + 1));
  std::vector<int> idle;
  for (int i = 0; i < 800; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) break;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(uint16_t(port));
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      close(fd);
      break;
    }
    idle.push_back(fd);
  }
  ASSERT_GE(idle.size(), 500u);
  EXPECT_TRUE(wait_until([&] { return open_fds(broker.pid()) > before + 400; }, 3s))
      << "the broker accepted them";
  EXPECT_TRUE(client->request<wire::nodes_reply>(wire::list_nodes{}));
  // The broker closes every one that did not complete a handshake within 5 s.
  EXPECT_TRUE(wait_until([&] { return open_fds(broker.pid()) <= before + 5; }, 15s))
      << open_fds(broker.pid()) << " descriptors open, " << before << " before";
  for (int fd : idle) close(fd);
  EXPECT_TRUE(client->request<wire::nodes_reply>(wire::list_nodes{}));
}

TEST_F(security_test, connections_from_one_address_are_capped_but_admins_get_in) {
  std::ofstream(c_.dir().file("broker.yaml"))
      << "heartbeat_ms: 200\nliveness: 5\nlog_level: debug\nmax_connections_per_address: 3\n";
  auto broker = c_.start_broker();
  std::vector<std::unique_ptr<test_client>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(c_.client("client", "c" + std::to_string(i)));
    ASSERT_TRUE(clients.back()->request<wire::nodes_reply>(wire::list_nodes{})) << i;
  }
  auto fourth = c_.client("client", "c3");
  EXPECT_TRUE(unanswered(*fourth, wire::list_nodes{5}));
  EXPECT_TRUE(admin().request<wire::nodes_reply>(wire::list_nodes{}));
  // Connections that end make room again.
  clients.clear();
  admin_.reset();
  EXPECT_TRUE(wait_until(
      [&] {
        auto next = c_.client("client", "c4");
        return next->request_raw(wire::command::list_nodes, wire::encode(wire::list_nodes{6}), 6,
                                 500ms)
                   .cmd == wire::command::nodes_reply;
      },
      15s));
}

TEST_F(security_test, raw_connections_from_an_address_do_not_lock_its_keys_out) {
  // Issue 52 (9): the cap counted connections that had not finished a handshake, so 300 raw TCP
  // connections from one host (here 20, over a cap of 3) locked every client key of that host
  // out, the gateway and the CLI beside the broker included.
  std::ofstream(c_.dir().file("broker.yaml"))
      << "heartbeat_ms: 200\nliveness: 5\nlog_level: debug\nmax_connections_per_address: 3\n";
  auto broker = c_.start_broker();
  ASSERT_TRUE(admin().request<wire::nodes_reply>(wire::list_nodes{}));
  // Keys the broker does not know, from the same address: refused, and not counted either.
  for (int i = 0; i < 3; ++i) {
    test_client stranger(c_.endpoint(), c_.client_keys("client", "s" + std::to_string(i), false));
    EXPECT_TRUE(unanswered(stranger, wire::list_nodes{4}));
  }
  const size_t before = open_fds(broker.pid());
  const int port = std::stoi(c_.endpoint().substr(c_.endpoint().rfind(':') + 1));
  // The raw connections, then at once the keys (the broker closes the raw ones after 5 s).
  std::vector<int> raw;
  for (int i = 0; i < 20; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(uint16_t(port));
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    // A few say something that is not ZMTP (a failed handshake, not a silent one).
    if (i % 5 == 0) {
      ASSERT_EQ(write(fd, "GET / HTTP/1.0\r\n\r\n", 18), 18);
    }
    raw.push_back(fd);
  }
  ASSERT_TRUE(wait_until([&] { return open_fds(broker.pid()) >= before + 16; }, 5s))
      << "the broker accepted them";
  std::vector<std::unique_ptr<test_client>> clients;
  for (int i = 0; i < 2; ++i) {
    clients.push_back(c_.client("client", "c" + std::to_string(i)));
    ASSERT_TRUE(clients.back()->request<wire::nodes_reply>(wire::list_nodes{})) << i << "\n"
                                                                                << broker.log();
  }
  // The cap still counts the keys let in: with the admin, three, so a fourth is refused.
  auto fourth = c_.client("client", "c2");
  EXPECT_TRUE(unanswered(*fourth, wire::list_nodes{5}));
  // The raw ones closed (after the 5 s) and the refused ones are not left counting: one client
  // leaving makes room for exactly one.
  EXPECT_TRUE(wait_until([&] { return open_fds(broker.pid()) <= before + 6; }, 15s));
  for (int fd : raw) close(fd);
  clients.pop_back();
  std::unique_ptr<test_client> next;
  EXPECT_TRUE(wait_until(
      [&] {
        next = c_.client("client", "c3");
        return next->request_raw(wire::command::list_nodes, wire::encode(wire::list_nodes{6}), 6,
                                 500ms)
                   .cmd == wire::command::nodes_reply;
      },
      15s));
  auto fifth = c_.client("client", "c4");
  EXPECT_TRUE(unanswered(*fifth, wire::list_nodes{7}));
}

TEST_F(security_test, hearth_up_on_the_lan_makes_its_keys_and_lets_only_allowed_clients_in) {
  const std::string dir = c_.dir().file("up-auth");
  const std::string port = std::to_string(testing::free_port());
  // Without --auth, a LAN bind is refused before anything starts.
  auto open =
      testing::spawn({HEARTH_BIN, "up", "--bind", "tcp://0.0.0.0:" + port, "--models",
                      models("m", {"alpha"}), "--engine", "null", "--db", c_.dir().file("open.db")},
                     c_.dir().file("up-open.log"));
  EXPECT_NE(open.wait(10s), 0);
  EXPECT_NE(open.log().find("without authentication"), std::string::npos) << open.log();

  auto up = testing::spawn(
      {HEARTH_BIN, "up", "--bind", "tcp://0.0.0.0:" + port, "--auth", dir, "--models",
       c_.dir().file("m"), "--engine", "null", "--name", "box", "--db", c_.dir().file("up.db")},
      c_.dir().file("up.log"));
  ASSERT_TRUE(wait_until([&] { return up.log().find("Ctrl-C stops") != std::string::npos; }))
      << up.log();
  // A client the folder allows gets in and is served by the node inside `hearth up`; a stranger
  // gets nothing.
  const std::string endpoint = "tcp://127.0.0.1:" + port;
  auto cert = net::curve_cert_generate("alice");
  ASSERT_TRUE(cert);
  ASSERT_TRUE(net::curve_cert_save(*cert, c_.dir().file("alice-keys"), "alice"));
  test_client stranger(endpoint, *net::curve_client_keys_load(
                                     dir + "/broker.pub", c_.dir().file("alice-keys/alice.key")));
  EXPECT_TRUE(unanswered(stranger, wire::list_nodes{3}));
  std::filesystem::copy_file(c_.dir().file("alice-keys/alice.pub"), dir + "/clients/alice.pub");
  test_client alice(endpoint, *net::curve_client_keys_load(dir + "/broker.pub",
                                                           c_.dir().file("alice-keys/alice.key")));
  std::optional<wire::job_detail> done;
  ASSERT_NO_FATAL_FAILURE(testing::expect_completes(
      alice, job("alpha", "hello", 4), [&] { return up.log(); }, &done));
  EXPECT_EQ(done->summary.node, "box");
  EXPECT_EQ(done->summary.owner, "alice");
  up.signal(SIGINT);
  EXPECT_EQ(up.wait(20s), 0) << up.log();
}

TEST_F(security_test, a_broker_on_the_lan_refuses_to_start_without_auth) {
  cluster open(/*with_auth=*/false);
  const std::string lan = "tcp://0.0.0.0:" + std::to_string(testing::free_port());
  auto b = testing::spawn({HEARTH_BROKER_BIN, "--bind", lan, "--db", open.dir().file("x.db")},
                          open.dir().file("refused.log"));
  EXPECT_EQ(b.wait(10s), 2);
  EXPECT_NE(b.log().find("refusing to serve " + lan + " without authentication"), std::string::npos)
      << b.log();
  // Said explicitly, it runs (and warns).
  auto ok = testing::spawn(
      {HEARTH_BROKER_BIN, "--bind", lan, "--db", open.dir().file("y.db"), "--insecure"},
      open.dir().file("insecure.log"));
  EXPECT_TRUE(wait_until([&] { return ok.log().find("authentication off") != std::string::npos; }));
  EXPECT_TRUE(ok.running());
  // Loopback needs no setup.
  auto local = open.start_broker();
  auto client = open.client();
  EXPECT_TRUE(client->request<wire::nodes_reply>(wire::list_nodes{}));
}

}  // namespace
}  // namespace hearth::testing
