#include "tools/events-view.h"

#include <utility>

namespace hearth::cli {

events_printer::events_printer(write_fn out, write_fn err, options o)
    : out_(std::move(out)), err_(std::move(err)), options_(o) {}

void events_printer::feed(std::string_view bytes) {
  if (raw_) {
    out_(bytes);
    at_line_start_ = bytes.empty() ? at_line_start_ : bytes.back() == '\n';
    return;
  }
  auto events = reader_.feed(bytes);
  if (!events) {
    // Not events after all (an older node, a bug): say so once, and hide nothing from here on.
    err_("hearth: the job's output is not output events (" + events.message() +
         "); the rest is printed as it is\n");
    raw_ = true;
    feed(bytes);
    return;
  }
  for (const auto& e : *events) render(e);
}

void events_printer::restart() {
  reader_ = wire::output_event_reader{};
  choices_.clear();
  raw_ = false;
  if (!at_line_start_) out_("\n");
  at_line_start_ = true;
}

void events_printer::render(const wire::output_event& e) {
  using kind = wire::output_event_kind;
  choice& c = choices_[e.choice];
  if (c.in_reasoning && e.kind != kind::reasoning && e.kind != kind::logprobs) {
    c.in_reasoning = false;
    emit(e.choice, "</think>\n");
  }
  switch (e.kind) {
    case kind::content:
      emit(e.choice, e.text);
      break;
    case kind::reasoning:
      if (!options_.reasoning) break;
      if (!c.in_reasoning) {
        start_line(e.choice);
        emit(e.choice, "<think>");
        c.in_reasoning = true;
      }
      emit(e.choice, e.text);
      break;
    case kind::tool_call:
      start_line(e.choice);
      emit(e.choice, "tool call: " + e.call.name + "(" + e.call.arguments + ")\n");
      break;
    case kind::logprobs:  // for --json
    case kind::finish:
      break;
  }
}

void events_printer::start_line(uint32_t i) {
  if (!choices_[i].at_line_start) emit(i, "\n");
}

void events_printer::emit(uint32_t i, std::string_view text) {
  if (text.empty()) return;
  choice& c = choices_[i];
  c.at_line_start = text.back() == '\n';
  if (i != 0) {
    c.text += text;
    return;
  }
  out_(text);
  at_line_start_ = c.at_line_start;
}

void events_printer::finish() {
  if (raw_) return;
  for (auto& [i, c] : choices_) {
    if (c.in_reasoning) {
      c.in_reasoning = false;
      emit(i, "</think>\n");
    }
    if (i == 0) continue;
    std::string block = at_line_start_ ? "" : "\n";
    block += "--- choice " + std::to_string(i) + " ---\n" + c.text;
    if (!c.at_line_start) block += "\n";
    out_(block);
    at_line_start_ = true;
  }
}

stream_view::renderer_hooks events_printer_hooks(events_printer& printer,
                                                 events_printer::write_fn out) {
  return {.restart = [&printer] { printer.restart(); },
          .finish =
              [&printer, out = std::move(out)] {
                printer.finish();
                if (!printer.at_line_start()) out("\n");
              },
          .at_line_start = [&printer] { return printer.at_line_start(); }};
}

}  // namespace hearth::cli
