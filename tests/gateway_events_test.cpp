// The gateway's answers from output events (issue 56) as the official OpenAI client reads them,
// whatever the model: a broker, a fake node that answers every job with fixed output events
// (schema/output-events.h) cut into token messages at odd places, and hearth-gateway in front.
// tests/openai/events-fake-node.cjs (node --test) checks with the `openai` npm client what a real
// model cannot be made to say exactly: tool calls as the client assembles them, whole and streamed
// (its stream helper), reasoning only when asked for, n choices by index, both logprobs shapes.
// What the fake node got (the api params) is checked here.
#include <gtest/gtest.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "schema/output-events.h"
#include "tests/cluster.h"
#include "tests/fake-node.h"
#include "tests/output-event-lines.h"
#include "tests/process.h"

namespace hearth {
namespace {

using testing::shell_quote;
using wire::output_event;
using wire::output_event_kind;

using testing::event_text_line;

std::string call_line(std::string id, std::string name, std::string args) {
  return testing::event_call_line(0, std::move(id), std::move(name), std::move(args));
}

// A sampled token with its log-probability and `top` alternatives (the token itself first).
wire::sampled_logprob sampled(const std::string& token, float logprob,
                              const std::vector<std::pair<std::string, float>>& others) {
  auto of = [](const std::string& t, float lp) {
    return wire::token_logprob{t, std::vector<uint8_t>(t.begin(), t.end()), lp};
  };
  wire::sampled_logprob s{of(token, logprob), {of(token, logprob)}};
  for (const auto& [t, lp] : others) s.top.push_back(of(t, lp));
  return s;
}

// What the fake node answers a job with, by what the job asks for (the script's expectations
// are these texts).
std::string output_for(const wire::job_params& p) {
  if (!p.api.tools.empty()) {
    return event_text_line(0, output_event_kind::reasoning, "Two lookups.") +
           event_text_line(0, output_event_kind::content, "Let me look.") +
           call_line("call_w", "get_weather", R"({"city":"Oslo","days":3})") +
           call_line("call_t", "get_time", R"({"zone":"UTC"})") +
           event_text_line(0, output_event_kind::finish, "tool_calls");
  }
  if (p.api.n == 2) {
    return event_text_line(0, output_event_kind::content, "Hel") +
           event_text_line(1, output_event_kind::content, "Good") +
           event_text_line(0, output_event_kind::content, "lo") +
           event_text_line(1, output_event_kind::content, " day") +
           event_text_line(1, output_event_kind::finish, "length");
  }
  if (p.api.logprobs) {
    output_event lp;
    lp.kind = output_event_kind::logprobs;
    lp.probs = {sampled("Hi", -0.25f, {{"Yo", -1.5f}}), sampled("!", -0.5f, {{"?", -1.0f}})};
    return event_text_line(0, output_event_kind::content, "Hi!") + wire::output_event_line(lp);
  }
  return "plain text";
}

class gateway_events : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = c_.start_broker();
    node_.emplace(c_, "fake");
    serving_ = std::jthread([this](std::stop_token stop) {
      node_->serve(2, {"alpha"}, stop, [&](const wire::job_assign& a) {
        {
          std::lock_guard lock(mutex_);
          assigns_.push_back(a);
        }
        const std::string out = output_for(a.params);
        node_->send(wire::job_started{a.job_id, a.attempt, 3});
        // Cut every 5 bytes: inside lines, escapes and UTF-8 alike.
        uint64_t seq = 0;
        for (size_t at = 0; at < out.size(); at += 5) {
          node_->send(wire::job_tokens{a.job_id, a.attempt, seq++, 1, out.substr(at, 5)});
        }
        node_->send(wire::job_final{.job_id = a.job_id,
                                    .attempt = a.attempt,
                                    .stop_reason = "end_of_generation",
                                    .n_prompt = 3,
                                    .n_gen = uint32_t(seq)});
        node_->send(wire::node_pull{1});
      });
    });
    port_ = testing::free_port();
    gateway_ = c_.start_gateway(HEARTH_GATEWAY_BIN, "127.0.0.1:" + std::to_string(port_));
    ASSERT_TRUE(testing::wait_until([&] {
      return testing::run_command("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:" +
                                  std::to_string(port_) + "/health")
                 .out == "200";
    })) << gateway_.log();
  }

  std::vector<wire::job_assign> assigns() {
    std::lock_guard lock(mutex_);
    return assigns_;
  }

  testing::cluster c_;
  testing::process broker_;
  testing::process gateway_;
  int port_ = 0;
  std::optional<testing::fake_node> node_;
  std::mutex mutex_;
  std::vector<wire::job_assign> assigns_;
  std::jthread serving_;  // last: stopped and joined before what it uses goes
};

TEST_F(gateway_events, the_official_client_reads_tool_calls_choices_and_logprobs) {
  const std::string script = std::string(HEARTH_SOURCE_DIR) + "/tests/openai/events-fake-node.cjs";
  std::string cmd =
      "env NODE_PATH=" + shell_quote(std::string(HEARTH_OPENAI_NODE) + "/node_modules") +
      " HEARTH_GATEWAY_URL=" + shell_quote("http://127.0.0.1:" + std::to_string(port_)) +
      " HEARTH_MODEL=alpha node --test " + shell_quote(script) + " 2>&1";
  auto r = testing::run_command(cmd);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err << "\ngateway:\n" << gateway_.log();
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("# ")) std::printf("%s\n", line.c_str());
  }
  // The jobs carried what the requests asked for.
  bool saw_tools = false, saw_n = false, saw_logprobs = false;
  for (const auto& a : assigns()) {
    const wire::api_params& api = a.params.api;
    if (!api.tools.empty()) {
      saw_tools = true;
      EXPECT_TRUE(api.events);
      EXPECT_EQ(nlohmann::json::parse(api.tools).size(), 2u);
    }
    if (api.n == 2) saw_n = api.events;
    if (api.logprobs) saw_logprobs = api.events && api.top_logprobs >= 1;
  }
  EXPECT_TRUE(saw_tools && saw_n && saw_logprobs);
  // The second request of the tool round trip carried the call and its result back.
  bool round_trip = false;
  for (const auto& a : assigns()) {
    for (const auto& m : a.messages) {
      if (m.role == "tool" && m.tool_call_id == "call_w") round_trip = true;
    }
  }
  EXPECT_TRUE(round_trip);
}

}  // namespace
}  // namespace hearth
