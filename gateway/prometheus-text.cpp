#include "gateway/prometheus-text.h"

#include <charconv>
#include <cmath>
#include <set>

namespace hearth::gateway {
namespace {

bool metric_name_ok(std::string_view n) {
  if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0]))) return false;
  for (char c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != ':') return false;
  }
  return true;
}

// Label names: no ':' and none starting with "__" (reserved to Prometheus).
bool label_name_ok(std::string_view n) {
  return metric_name_ok(n) && n.find(':') == std::string_view::npos && !n.starts_with("__");
}

// The shortest text that reads back as `v`; Prometheus's spellings of the special values.
std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : "NaN";
}

// HELP texts escape '\' and newlines; label values also '"'.
std::string escaped(std::string_view s, bool quote) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

// {a="x",b="y"} with `extra` (le="...") last; "" without labels.
std::string label_set(const std::vector<std::string>& names, const std::vector<std::string>& values,
                      const std::string& extra = {}) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += out.empty() ? "{" : ",";
    out += names[i] + "=\"" + escaped(values[i], true) + "\"";
  }
  if (!extra.empty()) out += (out.empty() ? "{" : ",") + extra;
  return out.empty() ? out : out + "}";
}

bool family_ok(const wire::metric_family& f) {
  if (!metric_name_ok(f.name)) return false;
  if (f.type != "counter" && f.type != "gauge" && f.type != "histogram") return false;
  std::set<std::string> seen;
  for (const auto& l : f.label_names) {
    if (!label_name_ok(l) || !seen.insert(l).second) return false;
    if (f.type == "histogram" && l == "le") return false;
  }
  if (f.type == "histogram") {
    for (size_t i = 0; i < f.bounds.size(); ++i) {
      if (!std::isfinite(f.bounds[i]) || (i > 0 && f.bounds[i] <= f.bounds[i - 1])) return false;
    }
  }
  return true;
}

}  // namespace

prometheus_page prometheus_text(const std::vector<wire::metric_family>& families) {
  prometheus_page page;
  std::set<std::string> names;
  for (const auto& f : families) {
    if (!family_ok(f) || !names.insert(f.name).second) {
      ++page.skipped;
      continue;
    }
    std::string& t = page.text;
    t += "# HELP " + f.name + " " + escaped(f.help, false) + "\n";
    t += "# TYPE " + f.name + " " + f.type + "\n";
    std::set<std::vector<std::string>> series;
    for (const auto& s : f.samples) {
      if (s.labels.size() != f.label_names.size() || !series.insert(s.labels).second) {
        ++page.skipped;
        continue;
      }
      if (f.type != "histogram") {
        t += f.name + label_set(f.label_names, s.labels) + " " + number(s.value) + "\n";
        continue;
      }
      bool monotonic = s.buckets.size() == f.bounds.size();
      for (size_t i = 0; monotonic && i < s.buckets.size(); ++i) {
        monotonic = s.buckets[i] <= (i + 1 < s.buckets.size() ? s.buckets[i + 1] : s.count);
      }
      if (!monotonic) {
        ++page.skipped;
        continue;
      }
      for (size_t i = 0; i < f.bounds.size(); ++i) {
        t += f.name + "_bucket" +
             label_set(f.label_names, s.labels, "le=\"" + number(f.bounds[i]) + "\"") + " " +
             std::to_string(s.buckets[i]) + "\n";
      }
      t += f.name + "_bucket" + label_set(f.label_names, s.labels, "le=\"+Inf\"") + " " +
           std::to_string(s.count) + "\n";
      t += f.name + "_sum" + label_set(f.label_names, s.labels) + " " + number(s.sum) + "\n";
      t += f.name + "_count" + label_set(f.label_names, s.labels) + " " + std::to_string(s.count) +
           "\n";
    }
  }
  return page;
}

}  // namespace hearth::gateway
