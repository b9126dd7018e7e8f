// API keys (schema/PROTOCOL.md section 13.5) against real hearth-broker and hearth-node processes:
// an admin makes keys, a client request presenting one acts as that key under the owner rules,
// revoked and unknown keys are refused, keys outlive a broker restart, and the database never
// holds a secret. Both with --auth (CURVE keys by role) and without.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "tests/cluster.h"
#include "tests/process.h"
#include "tests/testdata.h"

namespace hearth::testing {
namespace {

using namespace std::chrono_literals;

// A model the null-engine node serves, and one no node serves (jobs for it stay queued).
constexpr const char* k_model = "alpha";
constexpr const char* k_absent = "nobody-serves-this";

template <class M>
M with_key(M m, const std::string& key) {
  m.api_key = key;
  return m;
}

// The error a request got: "code: message", or "" when it succeeded.
template <class Reply, class Request>
std::string error_of(test_client& c, Request r) {
  std::string err;
  return c.request<Reply>(std::move(r), &err) ? "" : err;
}

std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

class api_keys_test : public ::testing::TestWithParam<bool> {
 protected:
  api_keys_test() : c_(GetParam()) {}

  void SetUp() override {
    ASSERT_FALSE(testing::testdata_path("models/stories260K.gguf").empty());
    c_.broker_settings({{"max_client_queued_jobs", "3"}});
    broker_ = c_.start_broker();
    node_ = c_.start_node("n", c_.models("m", {k_model}), "null", 2);
    ASSERT_TRUE(testing::nodes_online(admin(), 1));
  }

  test_client& admin() {
    if (!admin_) admin_ = c_.client("admin", "root");
    return *admin_;
  }
  test_client& client() {
    if (!client_) client_ = c_.client("client", "alice");
    return *client_;
  }

  std::string create(const std::string& name, bool admin_key = false) {
    wire::create_api_key req;
    req.name = name;
    req.admin = admin_key;
    std::string err;
    auto r = admin().request<wire::api_key_created>(req, &err);
    EXPECT_TRUE(r) << name << ": " << err;
    if (!r) return "";
    EXPECT_EQ(r->name, name);
    return r->key;
  }
  std::optional<wire::identity> whoami(test_client& t, const std::string& key,
                                       std::string* err = nullptr) {
    return t.request<wire::identity>(with_key(wire::whoami{}, key), err);
  }
  std::vector<wire::api_key_info> keys() {
    auto r = admin().request<wire::api_keys_reply>(wire::list_api_keys{});
    return r ? r->keys : std::vector<wire::api_key_info>{};
  }
  void restart_broker() {
    broker_.signal(SIGTERM);
    ASSERT_EQ(broker_.wait(), 0) << broker_.log();
    broker_ = c_.start_broker();
    ASSERT_TRUE(wait_until(
        [&] {
          return admin().request<wire::api_keys_reply>(wire::list_api_keys{}) != std::nullopt;
        },
        30s));
  }

  cluster c_;
  testing::process broker_, node_;
  std::unique_ptr<test_client> admin_, client_;
};

TEST_P(api_keys_test, a_key_acts_as_its_own_client_under_the_owner_rules) {
  const std::string ci = create("ci");
  const std::string other = create("other");
  ASSERT_FALSE(ci.empty() || other.empty());
  EXPECT_NE(ci, other);

  // A job submitted with the key belongs to the key, shown by its name.
  auto s = with_key(testing::greedy_job(k_model, "with a key", 4), ci);
  s.watch = true;
  auto acc = client().request<wire::accepted>(s);
  ASSERT_TRUE(acc);
  const auto done = client().follow(acc->job_id);
  ASSERT_TRUE(done.done);
  EXPECT_EQ(done.done->state, wire::job_state::completed);
  auto detail = admin().request<wire::job_reply>(wire::get_job{0, acc->job_id});
  ASSERT_TRUE(detail);
  EXPECT_EQ(detail->job.summary.owner, "ci");
  auto mine = client().request<wire::job_reply>(with_key(wire::get_job{0, acc->job_id}, ci));
  ASSERT_TRUE(mine);
  EXPECT_EQ(mine->job.summary.owner, "ci");

  // Another key neither sees, watches nor cancels it, and does not list it.
  EXPECT_EQ(error_of<wire::job_reply>(client(), with_key(wire::get_job{0, acc->job_id}, other)),
            "unauthorized: job " + std::to_string(acc->job_id) + " belongs to another client");
  EXPECT_NE(error_of<wire::ok>(client(), with_key(wire::watch{0, acc->job_id}, other))
                .find("unauthorized"),
            std::string::npos);
  auto queued = with_key(testing::greedy_job(k_absent, "waits", 4), ci);
  queued.wait_model = true;
  auto q = client().request<wire::accepted>(queued);
  ASSERT_TRUE(q);
  EXPECT_EQ(error_of<wire::ok>(client(), with_key(wire::cancel{0, q->job_id}, other)),
            "unauthorized: job " + std::to_string(q->job_id) + " belongs to another client");
  auto theirs = client().request<wire::jobs_reply>(with_key(wire::list_jobs{0, "", "", 50}, other));
  ASSERT_TRUE(theirs);
  EXPECT_TRUE(theirs->jobs.empty());
  auto ours = client().request<wire::jobs_reply>(with_key(wire::list_jobs{0, "", "", 50}, ci));
  ASSERT_TRUE(ours);
  EXPECT_EQ(ours->jobs.size(), 2u);
  // With auth, the peer's own client key is a third owner: it sees none of the key's jobs.
  if (c_.auth()) {
    auto own = client().request<wire::jobs_reply>(wire::list_jobs{0, "", "", 50});
    ASSERT_TRUE(own);
    EXPECT_TRUE(own->jobs.empty());
  }
  EXPECT_TRUE(client().request<wire::ok>(with_key(wire::cancel{0, q->job_id}, ci)));

  // The per-client limits count per key: three unfinished jobs each.
  for (int i = 0; i < 3; ++i) {
    auto w = with_key(testing::greedy_job(k_absent, "w", 4), ci);
    w.wait_model = true;
    ASSERT_TRUE(client().request<wire::accepted>(w)) << i;
  }
  auto fourth = with_key(testing::greedy_job(k_absent, "w", 4), ci);
  fourth.wait_model = true;
  EXPECT_NE(error_of<wire::accepted>(client(), fourth).find("limit_reached"), std::string::npos);
  fourth.api_key = other;
  EXPECT_EQ(error_of<wire::accepted>(client(), fourth), "");
}

// An admin key (hearth apikey create --admin) sees and cancels every owner's jobs, as the web
// dashboard needs. (Admin-only commands carry no api_key: they need an admin certificate.)
TEST_P(api_keys_test, an_admin_key_sees_and_cancels_every_job) {
  const std::string boss = create("boss", true);
  const std::string ci = create("ci");
  auto who = whoami(client(), boss);
  ASSERT_TRUE(who);
  EXPECT_EQ(who->role, "admin");
  EXPECT_EQ(who->name, "boss");
  bool listed = false;
  for (const auto& k : keys()) listed |= k.name == "boss" && k.admin;
  EXPECT_TRUE(listed);

  auto theirs = with_key(testing::greedy_job(k_absent, "ci's job", 4), ci);
  theirs.wait_model = true;
  auto q = client().request<wire::accepted>(theirs);
  ASSERT_TRUE(q);
  auto seen = client().request<wire::job_reply>(with_key(wire::get_job{0, q->job_id}, boss));
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->job.summary.owner, "ci");
  auto all = client().request<wire::jobs_reply>(with_key(wire::list_jobs{0, "", "", 50}, boss));
  ASSERT_TRUE(all);
  EXPECT_EQ(all->jobs.size(), 1u);
  EXPECT_TRUE(client().request<wire::ok>(with_key(wire::cancel{0, q->job_id}, boss)));
  // The role outlives a broker restart (it is in the database).
  restart_broker();
  auto again = whoami(client(), boss);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->role, "admin");
}

TEST_P(api_keys_test, whoami_names_the_peer_or_the_key) {
  const std::string ci = create("ci");
  auto me = whoami(client(), "");
  ASSERT_TRUE(me);
  auto key = whoami(client(), ci);
  ASSERT_TRUE(key);
  EXPECT_EQ(key->name, "ci");
  EXPECT_EQ(key->role, "client");
  ASSERT_TRUE(key->owner.starts_with("api:")) << key->owner;
  EXPECT_EQ(key->owner.size(), 4u + 12u) << key->owner;
  if (c_.auth()) {
    const auto alice = net::curve_cert_load(c_.key("client", "alice"));
    ASSERT_TRUE(alice);
    EXPECT_EQ(me->owner, alice->public_key);
    EXPECT_EQ(me->name, "alice");
    EXPECT_EQ(me->role, "client");
    auto root = whoami(admin(), "");
    ASSERT_TRUE(root);
    EXPECT_EQ(root->role, "admin");
    EXPECT_EQ(root->name, "root");
  } else {
    // Without auth every peer is an admin with no key.
    EXPECT_EQ(me->owner, "");
    EXPECT_EQ(me->name, "");
    EXPECT_EQ(me->role, "admin");
  }
  // The same key from an admin connection is still the key.
  auto via_admin = whoami(admin(), ci);
  ASSERT_TRUE(via_admin);
  EXPECT_EQ(via_admin->owner, key->owner);

  std::string err;
  EXPECT_FALSE(whoami(client(), "hk_not-a-key", &err));
  EXPECT_EQ(err, "unauthorized: unknown or revoked API key");
  EXPECT_FALSE(whoami(client(), std::string(300, 'k'), &err));  // longer than any key
  EXPECT_EQ(err, "unauthorized: unknown or revoked API key");
  EXPECT_FALSE(client().request<wire::nodes_reply>(with_key(wire::list_nodes{}, "hk_x"), &err));
  EXPECT_EQ(err, "unauthorized: unknown or revoked API key");
  EXPECT_FALSE(
      client().request<wire::accepted>(with_key(testing::greedy_job(k_model, "x", 2), "x"), &err));
  EXPECT_EQ(err, "unauthorized: unknown or revoked API key");
}

TEST_P(api_keys_test, only_admins_manage_keys_and_names_are_checked) {
  const std::string ci = create("ci");
  std::string err;
  if (c_.auth()) {
    // A client key may not create, list or revoke keys.
    EXPECT_FALSE(client().request<wire::api_key_created>(wire::create_api_key{0, "mine"}, &err));
    EXPECT_NE(err.find("unauthorized: create_api_key needs an admin key"), std::string::npos)
        << err;
    EXPECT_FALSE(client().request<wire::api_keys_reply>(wire::list_api_keys{}, &err));
    EXPECT_NE(err.find("unauthorized: list_api_keys needs an admin key"), std::string::npos) << err;
    EXPECT_FALSE(client().request<wire::ok>(wire::revoke_api_key{0, "ci"}, &err));
    EXPECT_NE(err.find("unauthorized: revoke_api_key needs an admin key"), std::string::npos)
        << err;
    // A node key may not present an API key (nor send any client request).
    auto as_node = c_.client("node", "fake");
    EXPECT_FALSE(whoami(*as_node, ci, &err));
    EXPECT_NE(err.find("unauthorized"), std::string::npos) << err;
    ASSERT_EQ(keys().size(), 1u);
  }
  const std::string rule =
      "an API key name is 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'";
  for (const std::string& bad :
       std::vector<std::string>{"", "a b", "ünï", "semi;colon", std::string(65, 'x')}) {
    EXPECT_FALSE(admin().request<wire::api_key_created>(wire::create_api_key{0, bad}, &err)) << bad;
    EXPECT_TRUE(err.starts_with("invalid_params: " + rule)) << err;
  }
  EXPECT_FALSE(admin().request<wire::api_key_created>(wire::create_api_key{0, "ci"}, &err));
  EXPECT_EQ(err,
            "invalid_params: an API key named 'ci' is in force already (a name is unique among "
            "the keys in force); revoke it first or choose another name");
  EXPECT_TRUE(admin().request<wire::ok>(wire::revoke_api_key{0, "ci"}));
  EXPECT_FALSE(admin().request<wire::ok>(wire::revoke_api_key{0, "ci"}, &err));
  EXPECT_EQ(err, "not_found: no API key named 'ci' is in force");
  EXPECT_FALSE(admin().request<wire::ok>(wire::revoke_api_key{0, "never-made"}, &err));
  EXPECT_EQ(err, "not_found: no API key named 'never-made' is in force");
  // Revoked: refused from the next request on; the name may be used again.
  EXPECT_FALSE(whoami(client(), ci, &err));
  EXPECT_EQ(err, "unauthorized: unknown or revoked API key");
  const std::string ci2 = create("ci");
  EXPECT_TRUE(whoami(client(), ci2));
  auto listed = keys();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].name, "ci");
  EXPECT_EQ(listed[0].revoked_ms, 0);
  EXPECT_EQ(listed[0].prefix, ci2.substr(0, 8));
  EXPECT_GT(listed[0].last_used_ms, 0);  // whoami used it
  EXPECT_NE(listed[1].revoked_ms, 0);
  EXPECT_EQ(listed[1].prefix, ci.substr(0, 8));
}

TEST_P(api_keys_test, keys_survive_a_restart_and_no_secret_is_stored) {
  const std::string kept = create("kept");
  const std::string gone = create("gone");
  auto s = with_key(testing::greedy_job(k_model, "before the restart", 4), kept);
  auto acc = client().request<wire::accepted>(s);
  ASSERT_TRUE(acc);
  ASSERT_TRUE(admin().wait_final(acc->job_id));
  ASSERT_TRUE(admin().request<wire::ok>(wire::revoke_api_key{0, "gone"}));

  restart_broker();
  auto me = whoami(client(), kept);
  ASSERT_TRUE(me);
  EXPECT_EQ(me->name, "kept");
  std::string err;
  EXPECT_FALSE(whoami(client(), gone, &err));
  EXPECT_EQ(err, "unauthorized: unknown or revoked API key");
  // The key still owns its job, by name, after the restart.
  auto detail = client().request<wire::job_reply>(with_key(wire::get_job{0, acc->job_id}, kept));
  ASSERT_TRUE(detail);
  EXPECT_EQ(detail->job.summary.owner, "kept");
  ASSERT_EQ(keys().size(), 2u);

  // Neither secret is in the database, its WAL or the broker's log; their hashes are.
  broker_.signal(SIGTERM);
  ASSERT_EQ(broker_.wait(), 0);
  std::string stored;
  for (const auto& f : std::filesystem::directory_iterator(c_.dir().path())) {
    if (f.path().filename().string().starts_with("hearth.db")) stored += file_bytes(f.path());
  }
  ASSERT_FALSE(stored.empty());
  for (const std::string& secret : {kept, gone}) {
    EXPECT_EQ(stored.find(secret), std::string::npos) << secret;
    EXPECT_EQ(stored.find(secret.substr(8)), std::string::npos) << "the part after the prefix";
    EXPECT_EQ(broker_.log().find(secret), std::string::npos) << secret;
  }
}

// The broker's files on a size limit (RLIMIT_FSIZE through prlimit(2), as tests/durability_test.cpp
// does; here 1 byte, so that no write of the broker succeeds): a key created in a turn whose commit
// fails is not kept, in the database nor in the broker's memory, keys made before still work, and
// creating keys works again once the limit is lifted.
TEST_P(api_keys_test, a_key_whose_turn_fails_to_commit_is_not_kept) {
  const std::string before = create("before");
  auto limit = [&](rlim_t bytes) {
    rlimit r{};
    if (prlimit(broker_.pid(), RLIMIT_FSIZE, nullptr, &r) != 0) return false;
    r.rlim_cur = bytes;
    return prlimit(broker_.pid(), RLIMIT_FSIZE, &r, nullptr) == 0;
  };
  ASSERT_TRUE(limit(1));
  // Once the backoff of any earlier failure is over, the create's own turn fails to commit.
  std::string err;
  ASSERT_TRUE(wait_until(
      [&] {
        admin().request<wire::api_key_created>(wire::create_api_key{0, "during"}, &err);
        return err.starts_with("storage_unavailable: the job database could not be written (");
      },
      30s))
      << err;
  for (const auto& k : keys()) EXPECT_NE(k.name, "during");
  EXPECT_TRUE(whoami(client(), before));  // reads go on
  ASSERT_TRUE(limit(RLIM_INFINITY));
  std::optional<wire::api_key_created> made;
  ASSERT_TRUE(wait_until(
      [&] {
        made = admin().request<wire::api_key_created>(wire::create_api_key{0, "during"}, &err);
        return made != std::nullopt;
      },
      30s))
      << err;
  auto me = whoami(client(), made->key);
  ASSERT_TRUE(me);
  EXPECT_EQ(me->name, "during");
}

TEST_P(api_keys_test, the_cli_creates_lists_and_revokes_keys) {
  auto hearth = [&](const std::string& args) {
    std::string cmd = std::string(HEARTH_BIN) + " " + args + " --broker " + c_.endpoint();
    for (const auto& a : c_.key_args("admin", "root")) cmd += " " + testing::shell_quote(a);
    return testing::run_command(cmd);
  };
  auto made = hearth("apikey create laptop");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::string secret = made.out.substr(0, made.out.find('\n'));
  EXPECT_EQ(made.out, secret + "\n");  // the secret alone on stdout
  EXPECT_TRUE(secret.starts_with("hk_")) << secret;
  EXPECT_EQ(secret.size(), 46u);
  EXPECT_NE(made.err.find("Authorization: Bearer " + secret), std::string::npos) << made.err;
  auto me = whoami(client(), secret);
  ASSERT_TRUE(me);
  EXPECT_EQ(me->name, "laptop");

  auto table = hearth("apikey list");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("NAME"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("laptop"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(secret.substr(0, 8) + "..."), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find(secret), std::string::npos) << "the list never shows a secret";
  auto json = hearth("apikey list --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto j = nlohmann::json::parse(json.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["name"], "laptop");
  EXPECT_EQ(j[0]["prefix"], secret.substr(0, 8));
  EXPECT_EQ(j[0]["revoked_ms"], 0);

  auto dup = hearth("apikey create laptop");
  EXPECT_EQ(dup.exit_code, 1);
  EXPECT_NE(dup.err.find("is in force already"), std::string::npos) << dup.err;
  auto bad = hearth("apikey create 'no spaces'");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("an API key name is 1 to 64 characters"), std::string::npos) << bad.err;

  auto revoked = hearth("apikey revoke laptop");
  ASSERT_EQ(revoked.exit_code, 0) << revoked.err;
  EXPECT_EQ(revoked.out, "API key 'laptop' revoked\n");
  EXPECT_FALSE(whoami(client(), secret));
  auto again = hearth("apikey revoke laptop");
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("no API key named 'laptop' is in force"), std::string::npos)
      << again.err;
  if (c_.auth()) {
    // A client key is told it needs an admin key.
    std::string cmd = std::string(HEARTH_BIN) + " apikey list --broker " + c_.endpoint();
    for (const auto& a : c_.key_args("client", "alice")) cmd += " " + testing::shell_quote(a);
    auto refused = testing::run_command(cmd);
    EXPECT_EQ(refused.exit_code, 1);
    EXPECT_NE(refused.err.find("list_api_keys needs an admin key"), std::string::npos)
        << refused.err;
  }
}

INSTANTIATE_TEST_SUITE_P(auth, api_keys_test, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "with_auth" : "without_auth";
                         });

}  // namespace
}  // namespace hearth::testing
