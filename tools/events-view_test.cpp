// events_printer: output events rendered as hearth submit and hearth job print them, fed whole
// and cut at every byte.
#include "tools/events-view.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/output-event-lines.h"

namespace hearth::cli {
namespace {

using wire::output_event;
using wire::output_event_kind;

using testing::event_text_line;

std::string call_line(uint32_t i, std::string name, std::string args) {
  return testing::event_call_line(i, "call_" + name, std::move(name), std::move(args));
}

std::string logprobs_line(uint32_t i) {
  output_event e;
  e.choice = i;
  e.kind = output_event_kind::logprobs;
  e.probs = {{{"Hel", {72, 101, 108}, -0.5f}, {}}};
  return wire::output_event_line(e);
}

struct printed {
  std::string out, err;
};

// Feeds `stream` in pieces of `step` bytes (0: whole), then finish().
printed print(const std::string& stream, events_printer::options o, size_t step = 0) {
  printed p;
  events_printer e([&](std::string_view t) { p.out += t; }, [&](std::string_view t) { p.err += t; },
                   o);
  if (step == 0) step = stream.size() + 1;
  for (size_t at = 0; at < stream.size(); at += step)
    e.feed(std::string_view(stream).substr(at, step));
  e.finish();
  return p;
}

const std::string tool_job =
    event_text_line(0, output_event_kind::reasoning, "The user wants ") +
    event_text_line(0, output_event_kind::reasoning, "the weather.") + logprobs_line(0) +
    event_text_line(0, output_event_kind::content, "Let me look.") +
    call_line(0, "get_weather", R"({"city": "Oslo"})") + call_line(0, "get_time", "{}") +
    event_text_line(0, output_event_kind::finish, "tool_calls");

TEST(EventsView, ContentAsTextToolCallsAsLinesReasoningOnlyWhenAsked) {
  EXPECT_EQ(print(tool_job, {}).out,
            "Let me look.\n"
            "tool call: get_weather({\"city\": \"Oslo\"})\n"
            "tool call: get_time({})\n");
  EXPECT_EQ(print(tool_job, {.reasoning = true}).out,
            "<think>The user wants the weather.</think>\n"
            "Let me look.\n"
            "tool call: get_weather({\"city\": \"Oslo\"})\n"
            "tool call: get_time({})\n");
  EXPECT_EQ(print(tool_job, {}).err, "");
}

TEST(EventsView, PiecesCutAnywherePrintTheSame) {
  const std::string whole = print(tool_job, {.reasoning = true}).out;
  for (size_t step = 1; step < 40; ++step) {
    EXPECT_EQ(print(tool_job, {.reasoning = true}, step).out, whole) << step;
  }
}

TEST(EventsView, FurtherChoicesFollowTheFirstOnceTheJobEnds) {
  const std::string stream = event_text_line(0, output_event_kind::content, "Hel") +
                             event_text_line(1, output_event_kind::content, "Goo") +
                             event_text_line(2, output_event_kind::reasoning, "hmm") +
                             event_text_line(0, output_event_kind::content, "lo") +
                             event_text_line(1, output_event_kind::content, "d day\n") +
                             event_text_line(1, output_event_kind::finish, "stop") +
                             call_line(2, "f", "[1]") +
                             event_text_line(0, output_event_kind::finish, "length");
  printed p;
  events_printer e([&](std::string_view t) { p.out += t; }, [&](std::string_view t) { p.err += t; },
                   {.reasoning = true});
  e.feed(stream);
  EXPECT_EQ(p.out, "Hello");  // choice 0 live, the others kept
  e.finish();
  EXPECT_EQ(p.out,
            "Hello\n"
            "--- choice 1 ---\nGood day\n"
            "--- choice 2 ---\n<think>hmm</think>\ntool call: f([1])\n");
  EXPECT_TRUE(e.at_line_start());
}

TEST(EventsView, ARestartBeginsANewLineAndRendersTheNewAttempt) {
  printed p;
  events_printer e([&](std::string_view t) { p.out += t; }, [&](std::string_view t) { p.err += t; },
                   {});
  const std::string first = event_text_line(0, output_event_kind::content, "Once upon");
  e.feed(first.substr(0, first.size() - 5));  // cut inside the line: nothing printed yet
  e.feed(first.substr(first.size() - 5) + event_text_line(0, output_event_kind::content, " a ti"));
  EXPECT_EQ(p.out, "Once upon a ti");
  EXPECT_FALSE(e.at_line_start());
  e.feed("{\"content\":\"half a li");  // the old attempt's partial line is dropped
  e.restart();
  e.feed(event_text_line(0, output_event_kind::content, "Once upon a time"));
  e.finish();
  EXPECT_EQ(p.out, "Once upon a ti\nOnce upon a time");
  EXPECT_EQ(p.err, "");
}

TEST(EventsView, AStreamThatIsNotEventsIsPrintedAsItIsAfterANotice) {
  printed p;
  events_printer e([&](std::string_view t) { p.out += t; }, [&](std::string_view t) { p.err += t; },
                   {});
  e.feed(event_text_line(0, output_event_kind::content, "ok "));
  e.feed("plain text\nmore");  // the piece with the bad line, and all after it, as they are
  e.feed(" and more");
  e.finish();
  EXPECT_EQ(p.out, "ok plain text\nmore and more");
  EXPECT_NE(p.err.find("not output events"), std::string::npos) << p.err;
}

// As hearth submit wires them: a stream_view writing the job's bytes into the printer.
struct followed {
  std::string out, err;
  events_printer printer{
      [this](std::string_view t) { out += t; }, [this](std::string_view t) { err += t; }, {}};
  stream_view view{7, [this](std::string_view t) { printer.feed(t); },
                   [this](std::string_view t) { err += t; }, false};
  followed() {
    view.set_renderer(events_printer_hooks(printer, [this](std::string_view t) { out += t; }));
  }
  void tokens(uint32_t attempt, uint64_t seq, std::string text) {
    view.on_tokens({7, attempt, seq, 1, std::move(text)});
  }
  void done(uint32_t attempt) {
    wire::job_done d;
    d.job_id = 7;
    d.attempt = attempt;
    d.state = wire::job_state::completed;
    view.on_done(d);
  }
};

TEST(EventsView, ARestartThatReproducesTheTextPrintsOnlyWhatIsNew) {
  followed f;
  f.tokens(1, 0, event_text_line(0, output_event_kind::content, "Once upon"));
  f.view.on_restarted({7, 2, "node lost"});
  f.tokens(2, 0, event_text_line(0, output_event_kind::content, "Once upon"));
  f.tokens(2, 1,
           event_text_line(0, output_event_kind::content, " a time") + call_line(0, "f", "{}"));
  f.done(2);
  EXPECT_EQ(f.out, "Once upon a time\ntool call: f({})\n");
}

TEST(EventsView, ARestartThatDiffersIsPrintedAnewOnALineOfItsOwn) {
  followed f;
  f.tokens(1, 0, event_text_line(0, output_event_kind::content, "Once upon"));
  f.view.on_restarted({7, 2, "node lost"});
  f.tokens(2, 0, event_text_line(0, output_event_kind::content, "Twice"));
  f.done(2);
  EXPECT_EQ(f.out, "Once upon\nTwice\n");  // the job's end ends the line, as for plain text
  EXPECT_NE(f.err.find("restarted on another node"), std::string::npos) << f.err;
  EXPECT_EQ(f.err.find("not output events"), std::string::npos) << f.err;
}

}  // namespace
}  // namespace hearth::cli
