// Metric families (schema/messages.h's metric_family, as the broker reports them and the gateway
// adds its own) in Prometheus's text exposition format, version 0.0.4: # HELP and # TYPE lines,
// one line per series, histograms as _bucket{le=...} (cumulative, ending at +Inf), _sum and
// _count. Label values and help texts are escaped; a family or series that would break the
// format (a bad metric or label name, labels that do not match the family's, a histogram whose
// buckets do not match its bounds, a name seen before) is left out and counted, never written.
#pragma once

#include <string>
#include <vector>

#include "schema/messages.h"

namespace hearth::gateway {

inline constexpr const char* k_prometheus_content_type = "text/plain; version=0.0.4; charset=utf-8";

struct prometheus_page {
  std::string text;
  size_t skipped = 0;  // families and series left out as malformed
};

prometheus_page prometheus_text(const std::vector<wire::metric_family>& families);

}  // namespace hearth::gateway
