// hearth submit's options of issue 56 (--tools, --tool-choice, --json-schema, --grammar,
// --logprobs, --choices, --logit-bias) against a real broker and a fake node that answers with
// output events (schema/output-events.h): the job carries the api params the options say, the CLI
// prints the answer, tool calls as lines and (--show-thinking) the reasoning, further choices
// after the first; hearth job shows them too. Bad options are refused before anything is sent, in
// one line naming the parameter. The node's side of the same (a real model) is tested in node/.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "schema/output-events.h"
#include "tests/cluster.h"
#include "tests/fake-node.h"
#include "tests/hearth-cli.h"
#include "tests/output-event-lines.h"

namespace hearth::testing {
namespace {

using wire::output_event;
using wire::output_event_kind;

std::string call_line(std::string name, std::string args) {
  return event_call_line(0, "call_1", std::move(name), std::move(args));
}

class cli_api : public ::testing::Test {
 protected:
  // A broker and a fake node of two slots serving model alpha, which answers every job with
  // `output` (whole event lines) in one chunk of `n_tokens` tokens; the jobs it got are in
  // assigns_.
  void start(const std::string& output, uint32_t n_tokens) {
    broker_ = c_.start_broker();
    node_.emplace(c_, "fake");
    serving_ = std::jthread([this, output, n_tokens](std::stop_token stop) {
      node_->serve(2, {"alpha"}, stop, [&](const wire::job_assign& a) {
        {
          std::lock_guard lock(mutex_);
          assigns_.push_back(a);
        }
        node_->send(wire::job_started{a.job_id, a.attempt, 3});
        node_->send(wire::job_tokens{a.job_id, a.attempt, 0, n_tokens, output});
        node_->send(wire::job_final{.job_id = a.job_id,
                                    .attempt = a.attempt,
                                    .stop_reason = "end_of_generation",
                                    .n_prompt = 3,
                                    .n_gen = n_tokens});
        node_->send(wire::node_pull{1});
      });
    });
    client_ = c_.client();
    ASSERT_TRUE(testing::nodes_online(*client_, 1)) << broker_.log();
  }
  std::string broker_args() {
    std::string a = " --broker " + c_.endpoint();
    for (const auto& k : c_.key_args("client", "default")) a += " " + quote(k);
    return a;
  }
  process_result run_cli(const std::string& args) { return hearth(args + broker_args()); }
  std::string write_file(const std::string& name, const std::string& text) {
    const std::string path = c_.dir().file(name);
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  std::vector<wire::job_assign> assigns() {
    std::lock_guard lock(mutex_);
    return assigns_;
  }

  testing::cluster c_;
  testing::process broker_;
  std::unique_ptr<testing::test_client> client_;
  std::optional<testing::fake_node> node_;
  std::mutex mutex_;
  std::vector<wire::job_assign> assigns_;
  std::jthread serving_;  // last: stopped and joined before what it uses goes
};

// A line of hearth job's fields, as it prints them.
std::string field(const std::string& name, const std::string& value) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "  %-15s %s\n", name.c_str(), value.c_str());
  return buf;
}

const std::string tools_json =
    R"([{"type":"function","function":{"name":"get_weather","description":"A city's weather",)"
    R"("parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}])";

TEST_F(cli_api, submit_sends_tools_and_prints_the_calls_and_job_shows_them) {
  const std::string output = event_text_line(0, output_event_kind::reasoning, "A tool knows.") +
                             event_text_line(0, output_event_kind::content, "Let me look.") +
                             call_line("get_weather", R"({"city": "Oslo"})") +
                             event_text_line(0, output_event_kind::finish, "tool_calls");
  ASSERT_NO_FATAL_FAILURE(start(output, 9));
  const std::string tools = write_file("tools.json", tools_json);
  auto r = run_cli("submit -m alpha --template chatml --chat 'Weather in Oslo?' --tools " +
                   quote(tools) + " --tool-choice get_weather");
  ASSERT_EQ(r.exit_code, 0) << r.err << broker_.log();
  EXPECT_EQ(r.out, "Let me look.\ntool call: get_weather({\"city\": \"Oslo\"})\n");
  auto got = assigns();
  ASSERT_EQ(got.size(), 1u);
  const wire::api_params& api = got[0].params.api;
  EXPECT_EQ(api.tools, tools_json);
  EXPECT_EQ(api.tool_choice, "function:get_weather");
  EXPECT_TRUE(api.events);
  EXPECT_EQ(got[0].messages.size(), 1u);

  // --show-thinking prints the reasoning before the answer.
  r = run_cli("submit -m alpha --template chatml --chat 'Weather?' --tools " + quote(tools) +
              " --show-thinking");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "<think>A tool knows.</think>\nLet me look.\n"
            "tool call: get_weather({\"city\": \"Oslo\"})\n");
  EXPECT_EQ(assigns().back().params.api.tool_choice, "");

  // hearth job: the params, and the output rendered with its reasoning.
  const std::string id = std::to_string(got[0].job_id);
  auto job = run_cli("job " + id);
  ASSERT_EQ(job.exit_code, 0) << job.err;
  EXPECT_NE(job.out.find(field("tools", "get_weather (1 tool)")), std::string::npos) << job.out;
  EXPECT_NE(job.out.find(field("tool_choice", "function:get_weather")), std::string::npos)
      << job.out;
  EXPECT_NE(job.out.find("  <think>A tool knows.</think>\n  Let me look.\n  tool call: "
                         "get_weather({\"city\": \"Oslo\"})\n"),
            std::string::npos)
      << job.out;
  // --json: the record as stored, the events as the output.
  job = run_cli("job " + id + " --json");
  ASSERT_EQ(job.exit_code, 0) << job.err;
  const auto j = nlohmann::json::parse(job.out);
  EXPECT_EQ(j["params"]["api"]["tools"], tools_json);
  EXPECT_EQ(j["params"]["api"]["tool_choice"], "function:get_weather");
  EXPECT_EQ(j["output"], output);
}

TEST_F(cli_api, further_choices_follow_the_first_and_json_prints_the_events) {
  const std::string output = event_text_line(0, output_event_kind::content, "Hel") +
                             event_text_line(1, output_event_kind::content, "Good") +
                             event_text_line(0, output_event_kind::content, "lo") +
                             event_text_line(1, output_event_kind::finish, "stop") +
                             event_text_line(0, output_event_kind::finish, "length");
  ASSERT_NO_FATAL_FAILURE(start(output, 6));
  auto r = run_cli(
      "submit -m alpha --choices 2 -n 3 --logprobs 2 --logit-bias 13:-100 "
      "--logit-bias 7:2.5 'Once'");
  ASSERT_EQ(r.exit_code, 0) << r.err << broker_.log();
  EXPECT_EQ(r.out, "Hello\n--- choice 1 ---\nGood\n");
  auto got = assigns();
  ASSERT_EQ(got.size(), 1u);
  const wire::api_params& api = got[0].params.api;
  EXPECT_EQ(api.n, 2);
  EXPECT_TRUE(api.logprobs);
  EXPECT_EQ(api.top_logprobs, 2);
  ASSERT_EQ(api.logit_bias.size(), 2u);
  EXPECT_EQ(api.logit_bias[0].token, 13);
  EXPECT_EQ(api.logit_bias[0].bias, -100.0f);
  EXPECT_EQ(api.logit_bias[1].bias, 2.5f);
  EXPECT_TRUE(api.events);
  // Constraints alone need no events: the output stays plain text.
  const std::string schema = write_file("schema.json", R"({"type":"object"})");
  r = run_cli("submit -m alpha --id-only --json-schema " + quote(schema) + " 'Once'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // --id-only returns once the job is accepted: its assignment may still be on its way.
  ASSERT_TRUE(testing::wait_until([&] { return assigns().size() == 2; }));
  EXPECT_EQ(assigns().back().params.api.json_schema, R"({"type":"object"})");
  EXPECT_FALSE(assigns().back().params.api.events);

  // --json: the broker's events, the output events inside their "tokens".
  r = run_cli("submit -m alpha --choices 2 --json 'Once'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string text;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    auto e = nlohmann::json::parse(line);
    if (e["event"] == "tokens") text += e["text"].get<std::string>();
  }
  EXPECT_EQ(text, output);

  // Choices run on one node's slots: more than the largest node serving the model has is refused.
  r = run_cli("submit -m alpha --choices 3 'Once'");
  expect_error(r,
               "n must be at most 2 (the most slots of an online node serving model 'alpha'), "
               "got 3");
}

TEST_F(cli_api, bad_options_are_refused_in_one_line_naming_the_parameter) {
  const std::string tools = write_file("tools.json", tools_json);
  const std::string not_json = write_file("bad.json", R"([{"type": }])");
  const std::string grammar = write_file("g.gbnf", "root ::= \"x\"");
  const std::string schema = write_file("schema.json", R"({"type":"object"})");
  const std::string chat = "submit -m alpha --template chatml --chat hi ";
  expect_error(hearth(chat + "--tools " + quote(not_json)),
               "tools must be JSON, got expected a value at byte 10");
  expect_error(hearth(chat + "--tools " + quote(c_.dir().file("none.json"))),
               "--tools " + c_.dir().file("none.json") + ": No such file or directory");
  expect_error(hearth(chat + "--tools " + quote(c_.dir().file(""))), "a directory, not a file");
  expect_error(hearth("submit -m alpha --tools " + quote(tools) + " 'Once'"),
               "--tools and --template-kwargs need --chat");
  expect_error(hearth(chat + "--tool-choice required"),
               "tool_choice must be auto or none without tools, got 'required'");
  expect_error(hearth(chat + "--tools " + quote(tools) + " --tool-choice 'get weather'"),
               "tool_choice's function name must be 1 to 64 of a-z, A-Z, 0-9, '_', '-'");
  expect_error(hearth("submit -m alpha --choices 9 'Once'"), "n must be in [1, 8], got 9");
  expect_error(hearth("submit -m alpha --logprobs 21 'Once'"),
               "top_logprobs must be in [0, 20], got 21");
  expect_error(hearth("submit -m alpha --logit-bias 13 'Once'"),
               "--logit-bias 13: expected TOKEN:BIAS");
  expect_error(hearth("submit -m alpha --logit-bias 13:-101 'Once'"),
               "the logit_bias of token 13 must be in [-100, 100], got -101");
  expect_error(hearth("submit -m alpha --json-schema " + quote(schema) + " --grammar " +
                      quote(grammar) + " 'Once'"),
               "grammar must be empty when json_schema is given");
  expect_error(hearth(chat + "--template-kwargs '[1]'"),
               "template_kwargs must be an object, got an array");
}

}  // namespace
}  // namespace hearth::testing
