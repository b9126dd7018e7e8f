// A job's output events (schema/output-events.h: tool calls, reasoning, several choices) as a
// user reads them in a terminal, for `hearth submit` while it streams and `hearth job`:
//
//   choice 0's answer text, as it comes
//   tool call: get_weather({"city": "Oslo"})        one line per call, on a line of its own
//   <think>reasoning</think>                        only when asked for (--show-thinking)
//   --- choice 1 ---                                each further choice after the job ended,
//   its answer text ...                             as it would have been printed alone
//
// Log-probabilities are left to --json (the events themselves). No sockets: tested alone.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "common/result.h"
#include "schema/output-events.h"
#include "tools/stream-view.h"

namespace hearth::cli {

class events_printer {
 public:
  using write_fn = std::function<void(std::string_view)>;
  struct options {
    bool reasoning = false;  // print reasoning between <think> and </think>
  };

  // `out` gets the rendered text; `err` one notice when the stream is not output events (it is
  // then printed as it is from there on, so that nothing the job wrote is hidden).
  events_printer(write_fn out, write_fn err, options o);

  // The next bytes of the stream, cut anywhere (a line is printed once it is whole).
  void feed(std::string_view bytes);
  // The stream starts again from its first byte (a restarted attempt printed anew): the text so
  // far is left on screen and a new line begun.
  void restart();
  // The job ended: the choices after the first, and the end of an open reasoning block.
  void finish();
  // What was printed to `out` last ended a line (or nothing was printed).
  bool at_line_start() const { return at_line_start_; }

 private:
  // One choice's rendered text, its state between events.
  struct choice {
    std::string text;  // choices after the first: kept until finish()
    bool in_reasoning = false;
    bool at_line_start = true;
  };
  void render(const wire::output_event& e);
  void emit(uint32_t i, std::string_view text);
  void start_line(uint32_t i);

  write_fn out_;
  write_fn err_;
  options options_;
  wire::output_event_reader reader_;
  std::map<uint32_t, choice> choices_;
  bool raw_ = false;  // the stream was not output events: bytes pass through
  bool at_line_start_ = true;
};

// What puts `printer` between a stream_view and the screen (hearth submit and watch): the view
// writes the job's bytes to printer.feed, and these hooks tell the printer of a restart printed
// anew and of the job's end (then `out`, the screen, gets the newline that ends the text).
stream_view::renderer_hooks events_printer_hooks(events_printer& printer,
                                                 events_printer::write_fn out);

}  // namespace hearth::cli
