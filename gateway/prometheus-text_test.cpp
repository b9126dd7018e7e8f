#include "gateway/prometheus-text.h"

#include <gtest/gtest.h>

#include <cmath>

namespace hearth::gateway {
namespace {

wire::metric_family counter(std::string name, std::vector<std::string> labels) {
  return {std::move(name), "Help.", "counter", std::move(labels), {}, {}};
}

TEST(prometheus_text, counters_and_gauges_with_escaped_labels_and_help) {
  auto c = counter("hearth_jobs_submitted_total", {"model"});
  c.help = "Jobs \\ accepted\nby model.";
  c.samples.push_back({{"llama \"3\"\\8b\nq4"}, 42, {}, 0, 0});
  c.samples.push_back({{"tiny"}, 0.5, {}, 0, 0});
  wire::metric_family g{"hearth_broker_peers", "Peers.", "gauge", {}, {}, {}};
  g.samples.push_back({{}, std::nan(""), {}, 0, 0});
  wire::metric_family inf{"hearth_x", "X.", "gauge", {}, {}, {}};
  inf.samples.push_back({{}, -INFINITY, {}, 0, 0});
  const auto p = prometheus_text({c, g, inf});
  EXPECT_EQ(p.skipped, 0u);
  EXPECT_EQ(p.text,
            "# HELP hearth_jobs_submitted_total Jobs \\\\ accepted\\nby model.\n"
            "# TYPE hearth_jobs_submitted_total counter\n"
            "hearth_jobs_submitted_total{model=\"llama \\\"3\\\"\\\\8b\\nq4\"} 42\n"
            "hearth_jobs_submitted_total{model=\"tiny\"} 0.5\n"
            "# HELP hearth_broker_peers Peers.\n"
            "# TYPE hearth_broker_peers gauge\n"
            "hearth_broker_peers NaN\n"
            "# HELP hearth_x X.\n"
            "# TYPE hearth_x gauge\n"
            "hearth_x -Inf\n");
}

TEST(prometheus_text, histograms_have_cumulative_buckets_ending_at_inf) {
  wire::metric_family h{
      "hearth_job_queue_wait_seconds", "Wait.", "histogram", {"model"}, {0.1, 1, 2.5}, {}};
  h.samples.push_back({{"m"}, 0, {1, 3, 3}, 7.25, 4});
  const auto p = prometheus_text({h});
  EXPECT_EQ(p.text,
            "# HELP hearth_job_queue_wait_seconds Wait.\n"
            "# TYPE hearth_job_queue_wait_seconds histogram\n"
            "hearth_job_queue_wait_seconds_bucket{model=\"m\",le=\"0.1\"} 1\n"
            "hearth_job_queue_wait_seconds_bucket{model=\"m\",le=\"1\"} 3\n"
            "hearth_job_queue_wait_seconds_bucket{model=\"m\",le=\"2.5\"} 3\n"
            "hearth_job_queue_wait_seconds_bucket{model=\"m\",le=\"+Inf\"} 4\n"
            "hearth_job_queue_wait_seconds_sum{model=\"m\"} 7.25\n"
            "hearth_job_queue_wait_seconds_count{model=\"m\"} 4\n");
}

// Whatever the families say, the page stays valid: what would break it is left out and counted.
TEST(prometheus_text, what_would_break_the_format_is_left_out) {
  std::vector<wire::metric_family> bad;
  bad.push_back(counter("0starts_with_a_digit", {}));
  bad.push_back(counter("has space", {}));
  bad.push_back(counter("hearth_ok_total", {"__reserved"}));
  bad.push_back(counter("hearth_ok_total", {"a-b"}));
  bad.push_back(counter("hearth_ok_total", {"dup", "dup"}));
  bad.push_back({"hearth_t", "T.", "summary", {}, {}, {}});
  bad.push_back({"hearth_h", "H.", "histogram", {"le"}, {1}, {}});
  bad.push_back({"hearth_h", "H.", "histogram", {}, {2, 1}, {}});
  bad.push_back({"hearth_h", "H.", "histogram", {}, {1, NAN}, {}});
  auto p = prometheus_text(bad);
  EXPECT_EQ(p.text, "");
  EXPECT_EQ(p.skipped, bad.size());

  auto c = counter("hearth_c_total", {"model"});
  c.samples.push_back({{"a", "extra"}, 1, {}, 0, 0});  // more values than names
  c.samples.push_back({{}, 1, {}, 0, 0});              // fewer
  c.samples.push_back({{"a"}, 1, {}, 0, 0});
  c.samples.push_back({{"a"}, 2, {}, 0, 0});  // the same series twice
  wire::metric_family h{"hearth_h_seconds", "H.", "histogram", {}, {1, 2}, {}};
  h.samples.push_back({{}, 0, {1}, 0, 1});     // a bucket missing
  h.samples.push_back({{}, 0, {2, 1}, 0, 2});  // not cumulative
  auto twice = c;                              // the same family name again
  p = prometheus_text({c, h, twice});
  EXPECT_EQ(p.skipped, 6u);
  EXPECT_EQ(p.text,
            "# HELP hearth_c_total Help.\n# TYPE hearth_c_total counter\n"
            "hearth_c_total{model=\"a\"} 1\n"
            "# HELP hearth_h_seconds H.\n# TYPE hearth_h_seconds histogram\n");
}

}  // namespace
}  // namespace hearth::gateway
