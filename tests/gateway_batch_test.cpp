// OpenAI's Batch API end to end: hearth-broker and hearth-node (the null engine: fast, and its
// text a pure function of prompt and seed) as processes on loopback with keys, the gateway in
// this process on a real socket, and curl as the HTTP client. A batch is uploaded, created,
// polled to its end and its output file read; it is cancelled; the broker is killed (-9) and
// restarted under it; the gateway is stopped and started again under it; another API key sees
// none of it.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "gateway/batch-service.h"
#include "gateway/gateway.h"
#include "gateway/routes.h"
#include "tests/cluster.h"
#include "tests/gateway-thread.h"
#include "tests/http-answer.h"
#include "tests/process.h"
#include "tests/testdata.h"

namespace hearth::testing {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

class gateway_batch_test : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = c_.start_broker();
    admin_ = c_.client("admin");
  }

  // A null-engine node serving "alpha", `rate` tokens per second per job.
  void start_node(int slots, int rate) {
    node_ = c_.start_node("null-node", c_.chat_models("m", {"alpha"}), "null", slots,
                          {"--null-tokens-per-s", std::to_string(rate)});
    ASSERT_TRUE(nodes_online(*admin_, 1)) << broker_.log() << node_.log();
  }

  void start_gateway(uint64_t max_upload_bytes = 256ull << 20,
                     uint64_t max_batch_output_bytes = gateway::max_file_bytes) {
    gateway::gateway_options o;
    o.max_upload_bytes = max_upload_bytes;
    o.max_batch_output_bytes = max_batch_output_bytes;
    o.listen = "127.0.0.1:0";
    o.broker = c_.endpoint();
    o.broker_key = c_.broker_public();
    o.key = c_.key("client", "gateway");
    o.db = c_.dir().file("gateway.db");
    gw_ = std::make_unique<gateway_thread>(o);
    ASSERT_TRUE(wait_until([&] { return gw_->bound(); }, 10s));
  }

  // An API key made by the admin (what `hearth apikey create NAME` does).
  std::string api_key(const std::string& name) {
    wire::create_api_key m;
    m.name = name;
    std::string why;
    auto r = admin_->request<wire::api_key_created>(m, &why);
    EXPECT_TRUE(r) << why;
    return r ? r->key : "";
  }

  // curl with `args` (already shell words) against the gateway, as `key`.
  http_answer curl(const std::string& key, const std::string& args) {
    const std::string out = c_.dir().file("curl-" + std::to_string(n_curl_++) + ".out");
    std::string cmd =
        "curl -sS --max-time 60 -o " + testing::shell_quote(out) + " -w '%{http_code}' " + args;
    if (!key.empty()) cmd += " -H " + testing::shell_quote("Authorization: Bearer " + key);
    auto r = testing::run_command(cmd);
    http_answer a;
    if (r.exit_code != 0) {
      ADD_FAILURE() << cmd << ": exit " << r.exit_code << " " << r.err;
      return a;
    }
    a.status = std::atoi(r.out.c_str());
    a.body = testing::read_file_text(out);
    return a;
  }
  http_answer get(const std::string& key, const std::string& path) {
    return curl(key, testing::shell_quote(gw_->url() + path));
  }
  http_answer post_json(const std::string& key, const std::string& path, const json& body) {
    const std::string file = c_.dir().file("body-" + std::to_string(n_curl_) + ".json");
    std::ofstream(file) << body.dump();
    return curl(key, "-X POST -H 'Content-Type: application/json' --data-binary @" +
                         testing::shell_quote(file) + " " +
                         testing::shell_quote(gw_->url() + path));
  }
  // POST /v1/files as curl -F does it.
  http_answer upload(const std::string& key, const std::string& content,
                     const std::string& purpose = "batch") {
    const std::string file = c_.dir().file("in-" + std::to_string(n_curl_) + ".jsonl");
    std::ofstream(file, std::ios::binary) << content;
    return curl(key, "-F " + testing::shell_quote("purpose=" + purpose) + " -F " +
                         testing::shell_quote("file=@" + file) + " " +
                         testing::shell_quote(gw_->url() + "/v1/files"));
  }

  // A JSONL of `n` chat requests for "alpha", custom_ids "req-<i>", each with its own seed.
  static std::string lines(int n, int max_tokens) {
    std::string s;
    for (int i = 0; i < n; ++i) {
      json body = {{"model", "alpha"},
                   {"messages", {{{"role", "user"}, {"content", "story " + std::to_string(i)}}}},
                   {"max_tokens", max_tokens},
                   {"seed", 1000 + i}};
      s += json{{"custom_id", "req-" + std::to_string(i)},
                {"method", "POST"},
                {"url", "/v1/chat/completions"},
                {"body", body}}
               .dump() +
           "\n";
    }
    return s;
  }

  // Uploads `content` and makes a batch of it; returns the batch object.
  json create_batch(const std::string& key, const std::string& content) {
    auto f = upload(key, content);
    EXPECT_EQ(f.status, 200) << f.body;
    auto b = post_json(key, "/v1/batches",
                       {{"input_file_id", f.json()["id"]},
                        {"endpoint", "/v1/chat/completions"},
                        {"completion_window", "24h"},
                        {"metadata", {{"run", "test"}}}});
    EXPECT_EQ(b.status, 200) << b.body;
    return b.json();
  }

  // Polls the batch until its status is `status` (or the timeout); returns the last object.
  json wait_status(const std::string& key, const std::string& id, const std::string& status,
                   std::chrono::seconds timeout = 60s) {
    json last;
    wait_until(
        [&] {
          auto r = get(key, "/v1/batches/" + id);
          last = r.json();
          return r.status == 200 && last["status"] == status;
        },
        timeout);
    return last;
  }

  // The lines of a file's content as JSON objects.
  std::vector<json> file_lines(const std::string& key, const std::string& file_id) {
    auto r = get(key, "/v1/files/" + file_id + "/content");
    EXPECT_EQ(r.status, 200) << r.body;
    std::vector<json> out;
    std::istringstream in(r.body);
    for (std::string l; std::getline(in, l);) out.push_back(json::parse(l, nullptr, false));
    return out;
  }

  // Every job the broker has at the batch priority, by id.
  std::map<uint64_t, wire::job_summary> batch_jobs() {
    wire::list_jobs m;
    m.limit = 1000;
    auto r = admin_->request<wire::jobs_reply>(m);
    std::map<uint64_t, wire::job_summary> out;
    if (!r) return out;
    for (auto& j : r->jobs) {
      if (j.priority == gateway::batch_job_priority) out[j.job_id] = j;
    }
    return out;
  }

  // Makes a batch of `n` lines and waits until `completed` of them have; returns its id.
  std::string batch_under_way(const std::string& key, int n, int max_tokens, int completed) {
    const std::string id = create_batch(key, lines(n, max_tokens))["id"];
    EXPECT_TRUE(wait_until(
        [&] {
          return get(key, "/v1/batches/" + id).json()["request_counts"]["completed"] >= completed;
        },
        30s))
        << "fewer than " << completed << " lines completed";
    return id;
  }

  // Waits for a batch of 50 lines to complete; checks its counts, its output and that the broker
  // has exactly one job per line.
  void expect_fifty_completed(const std::string& key, const std::string& id) {
    json done = wait_status(key, id, "completed", 90s);
    ASSERT_EQ(done["status"], "completed") << done.dump() << jobs_by_state() << broker_.log();
    EXPECT_EQ(done["request_counts"], json({{"total", 50}, {"completed", 50}, {"failed", 0}}));
    expect_output(key, done, 50);
    EXPECT_EQ(batch_jobs().size(), 50u) << "a retried submit reuses its job (request_key)";
  }

  // "state: count" of the batch's jobs at the broker, for failure messages.
  std::string jobs_by_state() {
    std::map<std::string, int> n;
    for (auto& [id, j] : batch_jobs()) ++n[std::string(wire::job_state_name(j.state))];
    std::string s = "broker jobs:";
    for (auto& [state, count] : n) s += " " + state + "=" + std::to_string(count);
    return s + "\n";
  }

  // Checks an output file of a batch whose `n` lines all completed: each custom_id once, each
  // body the text the broker recorded for the line's job.
  void expect_output(const std::string& key, const json& batch, int n) {
    ASSERT_TRUE(batch["output_file_id"].is_string()) << batch.dump();
    auto out = file_lines(key, batch["output_file_id"]);
    ASSERT_EQ(out.size(), size_t(n));
    std::set<std::string> ids;
    for (const json& l : out) {
      ASSERT_TRUE(l.is_object());
      ids.insert(l["custom_id"].get<std::string>());
      EXPECT_TRUE(l["error"].is_null());
      const json& resp = l["response"];
      EXPECT_EQ(resp["status_code"], 200);
      const std::string request_id = resp["request_id"];
      ASSERT_EQ(request_id.rfind("req_", 0), 0u) << request_id;
      uint64_t job_id = std::stoull(request_id.substr(4));
      wire::get_job g;
      g.job_id = job_id;
      auto detail = admin_->request<wire::job_reply>(g);
      ASSERT_TRUE(detail) << job_id;
      EXPECT_EQ(detail->job.summary.priority, gateway::batch_job_priority);
      EXPECT_EQ(resp["body"]["object"], "chat.completion");
      EXPECT_EQ(resp["body"]["choices"][0]["message"]["content"], detail->job.output)
          << l["custom_id"];
      EXPECT_EQ(detail->job.messages.at(0).content,
                "story " + l["custom_id"].get<std::string>().substr(4));
    }
    for (int i = 0; i < n; ++i) EXPECT_TRUE(ids.count("req-" + std::to_string(i))) << i;
  }

  cluster c_;
  testing::process broker_, node_;
  std::unique_ptr<testing::test_client> admin_;
  std::unique_ptr<gateway_thread> gw_;
  int n_curl_ = 0;
};

TEST_F(gateway_batch_test, fifty_lines_complete_and_their_output_file_reads_back) {
  start_node(4, 2000);
  start_gateway();
  const std::string key = api_key("alice");
  json b = create_batch(key, lines(50, 8));
  ASSERT_EQ(b["object"], "batch") << b.dump();
  EXPECT_EQ(b["status"], "validating");
  EXPECT_EQ(b["endpoint"], "/v1/chat/completions");
  EXPECT_EQ(b["completion_window"], "24h");
  EXPECT_EQ(b["metadata"]["run"], "test");
  EXPECT_EQ(b["request_counts"]["total"], 50);

  json done = wait_status(key, b["id"], "completed");
  ASSERT_EQ(done["status"], "completed") << done.dump() << jobs_by_state() << broker_.log();
  EXPECT_EQ(done["request_counts"], json({{"total", 50}, {"completed", 50}, {"failed", 0}}));
  EXPECT_TRUE(done["in_progress_at"].is_number());
  EXPECT_TRUE(done["finalizing_at"].is_number());
  EXPECT_TRUE(done["completed_at"].is_number());
  EXPECT_TRUE(done["error_file_id"].is_null()) << "no line failed";
  expect_output(key, done, 50);
  EXPECT_EQ(batch_jobs().size(), 50u) << "one job per line";

  auto file = get(key, "/v1/files/" + done["output_file_id"].get<std::string>());
  EXPECT_EQ(file.json()["purpose"], "batch_output");
  auto list = get(key, "/v1/batches?limit=10");
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(list.json()["data"][0]["id"], b["id"]);
  EXPECT_EQ(list.json()["has_more"], false);
}

TEST_F(gateway_batch_test, another_api_key_sees_nothing_of_it) {
  start_node(4, 2000);
  start_gateway();
  const std::string alice = api_key("alice");
  const std::string bob = api_key("bob");
  json b = create_batch(alice, lines(3, 4));
  const std::string id = b["id"];
  const std::string input = b["input_file_id"];
  for (const std::string& path :
       {"/v1/batches/" + id, "/v1/files/" + input, "/v1/files/" + input + "/content"}) {
    auto r = get(bob, path);
    EXPECT_EQ(r.status, 404) << path << " " << r.body;
    EXPECT_EQ(r.json()["error"]["type"], "invalid_request_error") << r.body;
  }
  EXPECT_EQ(post_json(bob, "/v1/batches/" + id + "/cancel", json::object()).status, 404);
  EXPECT_EQ(
      curl(bob, "-X DELETE " + testing::shell_quote(gw_->url() + "/v1/files/" + input)).status,
      404);
  EXPECT_TRUE(get(bob, "/v1/batches").json()["data"].empty());
  EXPECT_TRUE(get(bob, "/v1/files").json()["data"].empty());
  // Bob cannot make a batch of Alice's file either.
  auto theft = post_json(bob, "/v1/batches",
                         {{"input_file_id", input},
                          {"endpoint", "/v1/chat/completions"},
                          {"completion_window", "24h"}});
  EXPECT_EQ(theft.status, 404) << theft.body;
  json done = wait_status(alice, id, "completed");
  EXPECT_EQ(done["request_counts"]["completed"], 3) << done.dump();
  EXPECT_EQ(get(bob, "/v1/files/" + done["output_file_id"].get<std::string>() + "/content").status,
            404);
}

TEST_F(gateway_batch_test, cancelling_keeps_finished_lines_and_stops_the_rest) {
  start_node(1, 50);  // 40 tokens: 0.8 s per line, one at a time
  start_gateway();
  const std::string key = api_key("alice");
  // The first line finished, then the batch is cancelled.
  const std::string id = batch_under_way(key, 20, 40, 1);
  auto c = post_json(key, "/v1/batches/" + id + "/cancel", json::object());
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_TRUE(c.json()["status"] == "cancelling" || c.json()["status"] == "cancelled") << c.body;
  json done = wait_status(key, id, "cancelled", 30s);
  ASSERT_EQ(done["status"], "cancelled") << done.dump();
  EXPECT_TRUE(done["cancelling_at"].is_number());
  EXPECT_TRUE(done["cancelled_at"].is_number());
  const int completed = done["request_counts"]["completed"];
  const int failed = done["request_counts"]["failed"];
  EXPECT_GE(completed, 1);
  EXPECT_LT(completed, 20) << "0.8 s a line: the batch cannot have finished";
  EXPECT_EQ(completed + failed, 20);
  auto out = file_lines(key, done["output_file_id"]);
  EXPECT_EQ(out.size(), size_t(completed));
  auto errors = file_lines(key, done["error_file_id"]);
  ASSERT_EQ(errors.size(), size_t(failed));
  for (const json& e : errors) {
    EXPECT_TRUE(e["response"].is_null()) << e.dump();
    EXPECT_EQ(e["error"]["code"], "batch_cancelled") << e.dump();
  }
  // No job of the batch is left queued or running at the broker.
  for (auto& [job_id, j] : batch_jobs()) {
    EXPECT_TRUE(wire::job_state_is_final(j.state))
        << job_id << " " << wire::job_state_name(j.state);
  }
  // A cancelled batch stays cancelled; a second cancel answers the same.
  EXPECT_EQ(post_json(key, "/v1/batches/" + id + "/cancel", json::object()).json()["status"],
            "cancelled");
}

TEST_F(gateway_batch_test, a_broker_killed_mid_batch_loses_and_duplicates_nothing) {
  start_node(2, 100);  // 10 tokens: 0.1 s per line, two at a time
  start_gateway();
  const std::string key = api_key("alice");
  const std::string id = batch_under_way(key, 50, 10, 5);
  broker_ = {};  // SIGKILL
  std::this_thread::sleep_for(500ms);
  broker_ = c_.start_broker();
  expect_fifty_completed(key, id);
}

TEST_F(gateway_batch_test, a_restarted_gateway_resumes_the_batch) {
  start_node(2, 100);
  start_gateway();
  const std::string key = api_key("alice");
  const std::string id = batch_under_way(key, 50, 10, 5);
  gw_.reset();
  start_gateway();  // the same database
  expect_fifty_completed(key, id);
}

TEST_F(gateway_batch_test, a_full_output_file_sends_the_rest_to_the_error_file_naming_jobs) {
  start_node(1, 50);  // 10 tokens: 0.2 s per line, one at a time
  start_gateway();
  const std::string key = api_key("alice");
  // The size of one line's response in an output file, to set the limit by.
  json one = wait_status(key, create_batch(key, lines(1, 10))["id"], "completed");
  ASSERT_EQ(one["status"], "completed") << one.dump();
  const size_t line_bytes =
      get(key, "/v1/files/" + one["output_file_id"].get<std::string>() + "/content").body.size();
  ASSERT_GT(line_bytes, 100u);
  const uint64_t limit = 8 * line_bytes + line_bytes / 2;  // room for about 8 of 20
  gw_.reset();
  start_gateway(256ull << 20, limit);

  // Restarted after 3 lines: what the output file already holds is counted from the database.
  const std::string id = batch_under_way(key, 20, 10, 3);
  gw_.reset();
  start_gateway(256ull << 20, limit);
  json done = wait_status(key, id, "completed");
  ASSERT_EQ(done["status"], "completed") << done.dump();
  const int completed = done["request_counts"]["completed"];
  const int failed = done["request_counts"]["failed"];
  EXPECT_EQ(completed + failed, 20);
  EXPECT_GE(completed, 7);
  EXPECT_LE(completed, 9);

  auto output = get(key, "/v1/files/" + done["output_file_id"].get<std::string>() + "/content");
  EXPECT_LE(output.body.size(), limit);
  EXPECT_GT(output.body.size() + line_bytes, limit) << "filled, not stopped early";
  EXPECT_EQ(file_lines(key, done["output_file_id"]).size(), size_t(completed));
  auto errors = file_lines(key, done["error_file_id"]);
  ASSERT_EQ(errors.size(), size_t(failed));
  for (const json& e : errors) {
    EXPECT_TRUE(e["response"].is_null()) << e.dump();
    EXPECT_EQ(e["error"]["code"], "batch_output_full") << e.dump();
    // The message names the job; the broker has its whole output.
    const std::string message = e["error"]["message"];
    const auto at = message.find("Job ");
    ASSERT_NE(at, std::string::npos) << message;
    wire::get_job g;
    g.job_id = std::stoull(message.substr(at + 4));
    EXPECT_NE(message.find("(hearth job " + std::to_string(g.job_id) + ")"), std::string::npos)
        << message;
    auto detail = admin_->request<wire::job_reply>(g);
    ASSERT_TRUE(detail) << message;
    EXPECT_EQ(detail->job.summary.state, wire::job_state::completed);
    EXPECT_FALSE(detail->job.output.empty());
    EXPECT_EQ(detail->job.messages.at(0).content,
              "story " + e["custom_id"].get<std::string>().substr(4));
  }
}

TEST_F(gateway_batch_test, a_bad_input_file_fails_validation_with_openais_errors) {
  start_node(1, 2000);
  start_gateway();
  const std::string key = api_key("alice");
  std::string content = lines(2, 4);
  content += "{not json\n";
  content += json{{"custom_id", "req-0"},
                  {"method", "POST"},
                  {"url", "/v1/chat/completions"},
                  {"body", {{"model", "alpha"}, {"messages", json::array()}}}}
                 .dump() +
             "\n";
  json b = create_batch(key, content);
  ASSERT_EQ(b["status"], "failed") << b.dump();
  EXPECT_TRUE(b["failed_at"].is_number());
  const json& errors = b["errors"]["data"];
  ASSERT_GE(errors.size(), 2u) << b.dump();
  EXPECT_EQ(errors[0]["code"], "invalid_json_line");
  EXPECT_EQ(errors[0]["line"], 3);
  EXPECT_EQ(errors[1]["code"], "duplicate_custom_id");
  EXPECT_EQ(errors[1]["line"], 4);
  EXPECT_TRUE(batch_jobs().empty()) << "no line of a refused batch runs";
}

TEST_F(gateway_batch_test, hostile_requests_get_clear_errors) {
  start_node(1, 2000);
  start_gateway();
  const std::string key = api_key("alice");
  // Not multipart.
  auto r = post_json(key, "/v1/files", {{"purpose", "batch"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("multipart/form-data"),
            std::string::npos)
      << r.body;
  r = upload(key, lines(1, 4), "fine-tune");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["param"], "purpose") << r.body;
  auto f = upload(key, lines(1, 4));
  ASSERT_EQ(f.status, 200) << f.body;
  struct bad {
    json body;
    std::string param;
  };
  std::vector<bad> cases = {
      {{{"endpoint", "/v1/chat/completions"}, {"completion_window", "24h"}}, "input_file_id"},
      {{{"input_file_id", f.json()["id"]},
        {"endpoint", "/v1/embeddings"},
        {"completion_window", "24h"}},
       "endpoint"},
      {{{"input_file_id", f.json()["id"]},
        {"endpoint", "/v1/chat/completions"},
        {"completion_window", "1h"}},
       "completion_window"},
      {{{"input_file_id", f.json()["id"]},
        {"endpoint", "/v1/chat/completions"},
        {"completion_window", "24h"},
        {"metadata", {{"k", 1}}}},
       "metadata"},
  };
  for (const bad& c : cases) {
    r = post_json(key, "/v1/batches", c.body);
    EXPECT_EQ(r.status, 400) << c.body.dump() << " " << r.body;
    EXPECT_EQ(r.json()["error"]["param"], c.param) << r.body;
  }
  r = get(key, "/v1/batches?limit=0");
  EXPECT_EQ(r.status, 400) << r.body;
  r = get(key, "/v1/batches/batch_nope");
  EXPECT_EQ(r.status, 404) << r.body;
}

TEST_F(gateway_batch_test, a_line_the_broker_refuses_fails_alone_into_the_error_file) {
  start_node(2, 2000);
  start_gateway();
  const std::string key = api_key("alice");
  std::string content = lines(2, 4);
  json unknown = json::parse(lines(1, 4));
  unknown["custom_id"] = "unknown-model";
  unknown["body"]["model"] = "no-such-model";
  content += unknown.dump() + "\n";
  const std::string id = create_batch(key, content)["id"];
  json done = wait_status(key, id, "completed");
  ASSERT_EQ(done["status"], "completed") << done.dump();
  EXPECT_EQ(done["request_counts"], json({{"total", 3}, {"completed", 2}, {"failed", 1}}));
  EXPECT_EQ(file_lines(key, done["output_file_id"]).size(), 2u);
  auto errors = file_lines(key, done["error_file_id"]);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0]["custom_id"], "unknown-model");
  EXPECT_TRUE(errors[0]["error"].is_null());
  EXPECT_EQ(errors[0]["response"]["status_code"], 404) << errors[0].dump();
  EXPECT_NE(errors[0]["response"]["body"]["error"]["message"].get<std::string>().find("alpha"),
            std::string::npos)
      << "the 404 names the models there are: " << errors[0].dump();
}

TEST_F(gateway_batch_test, fifty_thousand_lines_reach_the_broker_sixty_four_at_a_time) {
  start_node(1, 5);  // 100 tokens: 20 s a line, so the window stays full
  start_gateway();
  const std::string key = api_key("alice");
  const auto t0 = std::chrono::steady_clock::now();
  json b = create_batch(key, lines(50000, 100));
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  std::printf("upload and create of a 50,000-line batch: %lld ms\n", static_cast<long long>(ms));
  ASSERT_EQ(b["status"], "validating") << b.dump().substr(0, 2000);
  EXPECT_EQ(b["request_counts"]["total"], 50000);
  ASSERT_TRUE(wait_until([&] { return batch_jobs().size() >= 64; }, 30s)) << jobs_by_state();
  std::this_thread::sleep_for(1s);  // more would have come by now
  EXPECT_EQ(batch_jobs().size(), 64u) << "the window: 64 lines in flight";
  ASSERT_EQ(post_json(key, "/v1/batches/" + b["id"].get<std::string>() + "/cancel", json::object())
                .status,
            200);
  json done = wait_status(key, b["id"], "cancelled", 60s);
  ASSERT_EQ(done["status"], "cancelled") << done.dump();
  EXPECT_EQ(
      done["request_counts"]["failed"].get<int>() + done["request_counts"]["completed"].get<int>(),
      50000);
  EXPECT_EQ(file_lines(key, done["error_file_id"]).size(),
            size_t(done["request_counts"]["failed"].get<int>()));
}

TEST_F(gateway_batch_test, bounds_per_owner_and_per_upload) {
  start_node(1, 5);  // 100 tokens: 20 s a line, so batches stay unfinished
  start_gateway(64 << 10);
  const std::string alice = api_key("alice");
  const std::string bob = api_key("bob");
  auto big = upload(alice, std::string(100 << 10, '\n'));
  EXPECT_EQ(big.status, 413) << big.body;

  std::vector<std::string> ids;
  for (int i = 0; i < 16; ++i) ids.push_back(create_batch(alice, lines(1, 100))["id"]);
  auto f = upload(alice, lines(1, 100));
  ASSERT_EQ(f.status, 200) << f.body;
  auto over = post_json(alice, "/v1/batches",
                        {{"input_file_id", f.json()["id"]},
                         {"endpoint", "/v1/chat/completions"},
                         {"completion_window", "24h"}});
  EXPECT_EQ(over.status, 429) << over.body;
  EXPECT_EQ(over.json()["error"]["message"], "this key has 16 batches in progress, at most 16");
  // Another owner's count is its own.
  json bobs = create_batch(bob, lines(1, 100));
  EXPECT_EQ(bobs["status"], "validating") << bobs.dump();
  // A cancelled batch no longer counts.
  ASSERT_EQ(post_json(alice, "/v1/batches/" + ids[0] + "/cancel", json::object()).status, 200);
  ASSERT_EQ(wait_status(alice, ids[0], "cancelled", 30s)["status"], "cancelled");
  auto again = post_json(alice, "/v1/batches",
                         {{"input_file_id", f.json()["id"]},
                          {"endpoint", "/v1/chat/completions"},
                          {"completion_window", "24h"}});
  EXPECT_EQ(again.status, 200) << again.body;
}

}  // namespace
}  // namespace hearth::testing
