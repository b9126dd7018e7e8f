// Issue 52: a generation cut by its token limit inside a UTF-8 character (byte-fallback
// vocabularies write an emoji or a CJK character as several byte tokens). It ends with one U+FFFD
// that comes with its last token, as llama-server and Ollama end it, on every path: `hearth run
// --json`; a job through the broker and a real CPU node (`hearth submit` streamed, `hearth job`,
// `hearth watch`); the gateway's completions and chat completions, streamed and not; the Batch
// API. Before, the node sent the held-back byte as a chunk without tokens, and the broker
// requeued the job three times, failed it and quarantined the node.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cluster.h"
#include "tests/process.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

using json = nlohmann::json;
using testing::cluster;
using testing::process;
using testing::shell_quote;

const std::string k_replacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr int k_max_tokens = 8;
// The gateway's defaults for what OpenAI's API does not name (gateway/README.md), so that the
// CLI's runs and the HTTP requests sample alike.
const std::string k_sampling = " --temp 1 --top-k 0 --top-p 1 --min-p 0 --repeat-penalty 1";

// What `hearth run --json` printed for one seed: each token line, and the summary.
struct run_lines {
  std::vector<json> tokens;
  json summary;
  std::string text;
};

// The text `hearth run` prints for one seed, as it is (a byte no character can hold stays that
// byte; --json writes such bytes as U+FFFD).
std::string run_text(const std::string& model, uint64_t seed, const std::string& extra) {
  auto r = testing::run_command(std::string(HEARTH_BIN) + " run -m " + shell_quote(model) + " -n " +
                                std::to_string(k_max_tokens) + " --seed " + std::to_string(seed) +
                                k_sampling + extra);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.ends_with("\n"));
  return r.out.substr(0, r.out.size() - 1);
}

run_lines run_json(const std::string& model, uint64_t seed, const std::string& extra) {
  auto r = testing::run_command(std::string(HEARTH_BIN) + " run -m " + shell_quote(model) + " -n " +
                                std::to_string(k_max_tokens) + " --seed " + std::to_string(seed) +
                                k_sampling + extra + " --json");
  run_lines out;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line, nullptr, false);
    if (j.contains("done")) {
      out.summary = j;
    } else {
      out.tokens.push_back(j);
      if (j.contains("text")) out.text += j["text"].get<std::string>();
    }
  }
  return out;
}

class generation_end_utf8 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ =
        new std::string(testing::testdata_path("models/synthetic/synthetic-llama-a.q8_0.gguf"));
    if (model_->empty()) return;
    // Seeds whose 8 tokens end inside a character, the plain prompt's and the chat's.
    seeds_ = new std::vector<uint64_t>;
    chat_seeds_ = new std::vector<uint64_t>;
    texts_ = new std::vector<std::string>;
    chat_texts_ = new std::vector<std::string>;
    for (uint64_t seed = 1; seed <= 40 && (seeds_->size() < 3 || chat_seeds_->size() < 2); ++seed) {
      if (seeds_->size() < 3) {
        if (run_json(*model_, seed, " 'hi'").text.ends_with(k_replacement)) {
          seeds_->push_back(seed);
          texts_->push_back(run_text(*model_, seed, " 'hi'"));
        }
      }
      if (chat_seeds_->size() < 2) {
        const std::string chat = " --chat 'hi' --template chatml";
        if (run_json(*model_, seed, chat).text.ends_with(k_replacement)) {
          chat_seeds_->push_back(seed);
          chat_texts_->push_back(run_text(*model_, seed, chat));
        }
      }
    }
  }
  static void TearDownTestSuite() {
    delete model_;
    delete seeds_;
    delete chat_seeds_;
    delete texts_;
    delete chat_texts_;
  }
  void SetUp() override {
    ASSERT_FALSE(model_->empty()) << "synthetic-llama-a test data missing";
    ASSERT_GE(seeds_->size(), 2u) << "too few seeds of 40 end inside a character";
    ASSERT_GE(chat_seeds_->size(), 1u) << "no chat seed of 40 ends inside a character";
  }

  static inline std::string* model_ = nullptr;
  static inline std::vector<uint64_t>* seeds_ = nullptr;
  static inline std::vector<uint64_t>* chat_seeds_ = nullptr;
  static inline std::vector<std::string>* texts_ = nullptr;
  static inline std::vector<std::string>* chat_texts_ = nullptr;
};

TEST_F(generation_end_utf8, hearth_run_json_puts_u_fffd_on_the_last_token) {
  for (uint64_t seed : *seeds_) {
    auto r = run_json(*model_, seed, " 'hi'");
    ASSERT_EQ(r.tokens.size(), size_t(k_max_tokens)) << "seed " << seed;
    for (const auto& t : r.tokens) EXPECT_TRUE(t.contains("token")) << "seed " << seed << ": " << t;
    const std::string last = r.tokens.back()["text"];
    EXPECT_TRUE(last.ends_with(k_replacement)) << "seed " << seed;
    EXPECT_EQ(r.summary["n_generated"], k_max_tokens);
    EXPECT_EQ(r.summary["stop_reason"], "max_tokens");
  }
}

// A broker, a real CPU node serving the synthetic model and the gateway.
class generation_end_utf8_cluster : public generation_end_utf8 {
 protected:
  void SetUp() override {
    generation_end_utf8::SetUp();
    if (HasFatalFailure()) return;
    broker_ = c_.start_broker();
    const std::string models = c_.dir().file("models");
    testing::link_model(models, "synthetic", *model_);
    node_ = c_.start_node("cpu", models, "cpu", 2);
    admin_ = c_.client("admin", "utf8-test");
    ASSERT_TRUE(testing::nodes_online(*admin_, 1)) << logs();
    broker_arg_ = c_.endpoint();
    for (const auto& a : c_.key_args("client", "default")) broker_arg_ += " " + a;
  }
  std::string logs() {
    return testing::logs_of(
        {{"gateway", gateway_ ? &*gateway_ : nullptr}, {"broker", &broker_}, {"node", &node_}});
  }
  testing::process_result cli(const std::string& args) {
    return testing::run_command(std::string(HEARTH_BIN) + " " + args + " --broker " + broker_arg_);
  }

  cluster c_;
  process broker_, node_;
  std::optional<process> gateway_;
  std::unique_ptr<testing::test_client> admin_;
  std::string broker_arg_;
};

TEST_F(generation_end_utf8_cluster, jobs_through_the_broker_complete_with_u_fffd) {
  for (size_t i = 0; i < seeds_->size(); ++i) {
    const std::string seed = std::to_string((*seeds_)[i]);
    auto r = cli("submit --stream -m synthetic -n " + std::to_string(k_max_tokens) + " --seed " +
                 seed + k_sampling + " 'hi'");
    ASSERT_EQ(r.exit_code, 0) << "seed " << seed << ": " << r.err << logs();
    EXPECT_EQ(r.out, (*texts_)[i] + "\n") << "seed " << seed;
  }
  auto jobs = cli("jobs --json");
  ASSERT_EQ(jobs.exit_code, 0) << jobs.err;
  const json list = json::parse(jobs.out);
  ASSERT_EQ(list.size(), seeds_->size());
  for (const auto& j : list) {
    const std::string id = std::to_string(j["job_id"].get<uint64_t>());
    auto d = cli("job " + id + " --json");
    ASSERT_EQ(d.exit_code, 0) << d.err;
    const json detail = json::parse(d.out);
    EXPECT_EQ(detail["summary"]["state"], "completed") << detail.dump();
    EXPECT_EQ(detail["summary"]["attempts"], 1) << "requeued: " << detail.dump();
    EXPECT_EQ(detail["summary"]["n_gen"], k_max_tokens);
    EXPECT_TRUE(detail["output"].get<std::string>().ends_with(k_replacement));
    auto w = cli("watch " + id + " --json");
    ASSERT_EQ(w.exit_code, 0) << w.err;
    EXPECT_NE(w.out.find("\"completed\""), std::string::npos) << w.out;
  }
  EXPECT_EQ(node_.log().find("quarantine"), std::string::npos) << node_.log();
  EXPECT_EQ(broker_.log().find("without tokens"), std::string::npos) << broker_.log();
}

// `text` as a JSON string carries it: each byte no character holds becomes U+FFFD.
std::string json_text(const std::string& text) {
  return json::parse(json(text).dump(-1, ' ', false, json::error_handler_t::replace))
      .get<std::string>();
}

// The gateway's answer to a POST of `body` (curl): the HTTP status and the body.
struct http_answer {
  int status = 0;
  std::string body;
};

TEST_F(generation_end_utf8_cluster, the_gateway_answers_streamed_and_not_and_in_batches) {
#ifndef HEARTH_GATEWAY_BIN
  GTEST_SKIP() << "built without the gateway";
#else
  const int port = testing::free_port();
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  gateway_.emplace(c_.start_gateway(HEARTH_GATEWAY_BIN, "127.0.0.1:" + std::to_string(port)));
  int n_curl = 0;
  auto curl = [&](const std::string& args) {
    const std::string out = c_.dir().file("curl-" + std::to_string(n_curl++) + ".out");
    auto r = testing::run_command("curl -sS -N --max-time 120 -o " + shell_quote(out) +
                                  " -w '%{http_code}' " + args);
    http_answer a;
    a.status = std::atoi(r.out.c_str());
    if (std::ifstream in(out, std::ios::binary); in)
      a.body.assign(std::istreambuf_iterator<char>(in), {});
    return a;
  };
  auto post = [&](const std::string& path, const json& body) {
    const std::string file = c_.dir().file("body-" + std::to_string(n_curl) + ".json");
    std::ofstream(file) << body.dump();
    return curl("-X POST -H 'Content-Type: application/json' --data-binary @" + shell_quote(file) +
                " " + shell_quote(url + path));
  };
  ASSERT_TRUE(testing::wait_until([&] { return curl(shell_quote(url + "/health")).status == 200; },
                                  std::chrono::seconds(30)))
      << logs();

  // The text of an SSE stream's chunks, and whether it ended with [DONE].
  auto sse_text = [](const std::string& body, bool chat, bool& done) {
    std::string text;
    done = false;
    std::istringstream in(body);
    for (std::string line; std::getline(in, line);) {
      if (!line.starts_with("data: ")) continue;
      if (line == "data: [DONE]") {
        done = true;
        continue;
      }
      const json j = json::parse(line.substr(6), nullptr, false);
      if (!j.contains("choices") || j["choices"].empty()) continue;
      // A const json's operator[] must only be given keys it has (a chat stream's last delta has
      // no content): look them up with value().
      const json& c = j["choices"][0];
      const json t = chat ? c.value("delta", json::object()).value("content", json())
                          : c.value("text", json());
      if (t.is_string()) text += t.get<std::string>();
    }
    return text;
  };

  // The request answered whole and streamed: both the text `want` (as JSON carries it), all
  // tokens counted.
  auto check = [&](const std::string& path, json body, const std::string& want) {
    const bool chat = body.contains("messages");
    const std::string seed = std::to_string(body["seed"].get<uint64_t>());
    auto a = post(path, body);
    ASSERT_EQ(a.status, 200) << path << " seed " << seed << ": " << a.body << logs();
    const json j = json::parse(a.body);
    const json& choice = j["choices"][0];
    EXPECT_EQ(chat ? choice["message"]["content"] : choice["text"], json_text(want))
        << path << " seed " << seed;
    EXPECT_EQ(choice["finish_reason"], "length");
    EXPECT_EQ(j["usage"]["completion_tokens"], k_max_tokens);

    body["stream"] = true;
    a = post(path, body);
    ASSERT_EQ(a.status, 200) << path << " seed " << seed << ": " << a.body;
    bool done = false;
    EXPECT_EQ(sse_text(a.body, chat, done), json_text(want)) << path << " seed " << seed;
    EXPECT_TRUE(done) << a.body;
  };
  for (size_t i = 0; i < seeds_->size(); ++i) {
    check("/v1/completions",
          {{"model", "synthetic"},
           {"prompt", "hi"},
           {"max_tokens", k_max_tokens},
           {"seed", (*seeds_)[i]}},
          (*texts_)[i]);
  }
  for (size_t i = 0; i < chat_seeds_->size(); ++i) {
    check("/v1/chat/completions",
          {{"model", "synthetic"},
           {"messages", {{{"role", "user"}, {"content", "hi"}}}},
           {"chat_template", "chatml"},
           {"max_tokens", k_max_tokens},
           {"seed", (*chat_seeds_)[i]}},
          (*chat_texts_)[i]);
  }

  // The Batch API: every line a job, each completed with its text.
  std::string lines;
  for (size_t i = 0; i < seeds_->size(); ++i) {
    const json b = {{"model", "synthetic"},
                    {"prompt", "hi"},
                    {"max_tokens", k_max_tokens},
                    {"seed", (*seeds_)[i]}};
    lines += json{{"custom_id", "req-" + std::to_string(i)},
                  {"method", "POST"},
                  {"url", "/v1/completions"},
                  {"body", b}}
                 .dump() +
             "\n";
  }
  const std::string input = c_.dir().file("batch.jsonl");
  std::ofstream(input, std::ios::binary) << lines;
  auto f = curl("-F purpose=batch -F " + shell_quote("file=@" + input) + " " +
                shell_quote(url + "/v1/files"));
  ASSERT_EQ(f.status, 200) << f.body;
  auto b = post("/v1/batches", {{"input_file_id", json::parse(f.body)["id"]},
                                {"endpoint", "/v1/completions"},
                                {"completion_window", "24h"}});
  ASSERT_EQ(b.status, 200) << b.body;
  const std::string batch_id = json::parse(b.body)["id"];
  json batch;
  ASSERT_TRUE(testing::wait_until(
      [&] {
        auto r = curl(shell_quote(url + "/v1/batches/" + batch_id));
        batch = json::parse(r.body, nullptr, false);
        return r.status == 200 && (batch["status"] == "completed" || batch["status"] == "failed");
      },
      std::chrono::seconds(120)))
      << batch.dump() << logs();
  ASSERT_EQ(batch["status"], "completed") << batch.dump();
  EXPECT_EQ(batch["request_counts"]["completed"], seeds_->size()) << batch.dump();
  EXPECT_EQ(batch["request_counts"]["failed"], 0) << batch.dump();
  auto out = curl(
      shell_quote(url + "/v1/files/" + batch["output_file_id"].get<std::string>() + "/content"));
  ASSERT_EQ(out.status, 200) << out.body;
  std::istringstream in(out.body);
  size_t n = 0;
  for (std::string l; std::getline(in, l); ++n) {
    const json j = json::parse(l);
    const size_t i = std::stoul(j["custom_id"].get<std::string>().substr(4));
    ASSERT_LT(i, texts_->size());
    EXPECT_EQ(j["response"]["status_code"], 200) << l;
    EXPECT_EQ(j["response"]["body"]["choices"][0]["text"], json_text((*texts_)[i])) << l;
  }
  EXPECT_EQ(n, seeds_->size());
#endif
}

}  // namespace
}  // namespace hearth
