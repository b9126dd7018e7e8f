// libFuzzer target for output_event_reader (schema/output-events.cpp): a job's output events, which
// the gateway and the CLI read from whatever a node wrote. The first byte says where to cut the
// rest in two (a reader is handed a stream cut anywhere). Every input gives events or an error;
// fed whole or in two pieces it gives the same events; each event written back by
// output_event_line reads back as the same event, on one line.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz-check.h"
#include "schema/output-events.h"

namespace {

using namespace hearth::wire;

// Text read from JSON is valid UTF-8, so it is written back as it is; a float is exact.
bool same(const token_logprob& a, const token_logprob& b) {
  return a.token == b.token && a.bytes == b.bytes && a.logprob == b.logprob;
}

bool same(const output_event& a, const output_event& b) {
  if (a.choice != b.choice || a.kind != b.kind || a.text != b.text || a.call.id != b.call.id ||
      a.call.name != b.call.name || a.call.arguments != b.call.arguments ||
      a.probs.size() != b.probs.size())
    return false;
  for (size_t i = 0; i < a.probs.size(); ++i) {
    if (!same(a.probs[i].sampled, b.probs[i].sampled) ||
        a.probs[i].top.size() != b.probs[i].top.size())
      return false;
    for (size_t j = 0; j < a.probs[i].top.size(); ++j)
      if (!same(a.probs[i].top[j], b.probs[i].top[j])) return false;
  }
  return true;
}

// Everything read from one pass over `stream` fed as `pieces`; false when it is malformed.
bool read_all(const std::vector<std::string_view>& pieces, std::vector<output_event>& out) {
  output_event_reader r;
  for (std::string_view p : pieces) {
    auto events = r.feed(p);
    if (!events) {
      FUZZ_CHECK(!events.message().empty());
      FUZZ_CHECK(!r.feed("{}\n").ok());  // a spent reader stays spent
      return false;
    }
    FUZZ_CHECK(r.pending() <= output_event_reader::max_line_bytes);
    for (auto& e : *events) out.push_back(std::move(e));
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t cut = stream.empty() ? 0 : data[0] % (stream.size() + 1);
  std::vector<output_event> whole, halves;
  const bool ok = read_all({stream}, whole);
  const bool ok2 = read_all({stream.substr(0, cut), stream.substr(cut)}, halves);
  FUZZ_CHECK(ok == ok2);
  if (!ok) return 0;
  FUZZ_CHECK(whole.size() == halves.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    FUZZ_CHECK(same(whole[i], halves[i]));
    // A logprob read is finite (one too large for a float reads as -9999, PROTOCOL.md 10.8), so
    // that it can be written back as JSON.
    for (const auto& p : whole[i].probs) {
      FUZZ_CHECK(std::isfinite(p.sampled.logprob));
      for (const auto& t : p.top) FUZZ_CHECK(std::isfinite(t.logprob));
    }
    const std::string line = output_event_line(whole[i]);
    FUZZ_CHECK(line.find('\n') == line.size() - 1);
    auto again = output_events_parse(line);
    FUZZ_CHECK(again.ok() && again->size() == 1);
    FUZZ_CHECK(same((*again)[0], whole[i]));
  }
  auto parsed = output_events_parse(stream);
  FUZZ_CHECK(parsed.ok() == (stream.empty() || stream.back() == '\n'));
  return 0;
}
