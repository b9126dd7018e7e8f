// Output event lines (schema/output-events.h) written by hand: a job's output as a fake node
// answers it, for the tests of what reads such output (hearth submit and job, the gateway,
// tools/events-view).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "schema/output-events.h"

namespace hearth::testing {

// The line of one text event of choice `choice`: content, reasoning, or finish (`text` its reason).
inline std::string event_text_line(uint32_t choice, wire::output_event_kind kind,
                                   std::string text) {
  wire::output_event e;
  e.choice = choice;
  e.kind = kind;
  e.text = std::move(text);
  return wire::output_event_line(e);
}

// The line of one tool call of choice `choice` (`args` the arguments as JSON text).
inline std::string event_call_line(uint32_t choice, std::string id, std::string name,
                                   std::string args) {
  wire::output_event e;
  e.choice = choice;
  e.kind = wire::output_event_kind::tool_call;
  e.call = {std::move(id), std::move(name), std::move(args)};
  return wire::output_event_line(e);
}

}  // namespace hearth::testing
