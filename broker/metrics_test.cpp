#include "broker/metrics.h"

#include <gtest/gtest.h>

namespace hearth::broker {
namespace {

const wire::metric_family& family(const std::vector<wire::metric_family>& all,
                                  const std::string& name) {
  for (const auto& f : all) {
    if (f.name == name) return f;
  }
  throw std::runtime_error("no family " + name);
}

TEST(broker_metrics, counters_add_per_label_set) {
  broker_metrics m;
  m.add(metric::jobs_submitted, {"a"});
  m.add(metric::jobs_submitted, {"a"}, 2);
  m.add(metric::jobs_submitted, {"b"});
  EXPECT_EQ(m.value(metric::jobs_submitted, {"a"}), 3);
  EXPECT_EQ(m.value(metric::jobs_submitted, {"b"}), 1);
  EXPECT_EQ(m.value(metric::jobs_submitted, {"c"}), 0);
  std::vector<wire::metric_family> out;
  m.append_to(out);
  const auto& f = family(out, "hearth_jobs_submitted_total");
  EXPECT_EQ(f.type, "counter");
  EXPECT_EQ(f.label_names, std::vector<std::string>{"model"});
  ASSERT_EQ(f.samples.size(), 2u);
  EXPECT_EQ(f.samples[0].labels, std::vector<std::string>{"a"});
  EXPECT_EQ(f.samples[0].value, 3);
}

TEST(broker_metrics, histograms_report_cumulative_buckets) {
  broker_metrics m;
  for (double s : {0.0001, 0.002, 0.002, 0.3, 9000.0}) m.observe(metric::job_queue_wait, {"m"}, s);
  std::vector<wire::metric_family> out;
  m.append_to(out);
  const auto& f = family(out, "hearth_job_queue_wait_seconds");
  ASSERT_EQ(f.samples.size(), 1u);
  const auto& s = f.samples[0];
  ASSERT_EQ(s.buckets.size(), f.bounds.size());
  EXPECT_EQ(s.count, 5u);
  EXPECT_DOUBLE_EQ(s.sum, 0.0001 + 0.002 + 0.002 + 0.3 + 9000.0);
  EXPECT_EQ(s.buckets.front(), 3u);  // <= 0.01
  EXPECT_EQ(s.buckets.back(), 4u);   // 9000 s is past the last bound: only in +Inf (count)
  for (size_t i = 1; i < s.buckets.size(); ++i) EXPECT_LE(s.buckets[i - 1], s.buckets[i]);
  // A value equal to a bound belongs to its bucket (le = less or equal).
  broker_metrics edge;
  edge.observe(metric::job_queue_wait, {"m"}, 0.01);
  out.clear();
  edge.append_to(out);
  EXPECT_EQ(family(out, "hearth_job_queue_wait_seconds").samples[0].buckets.front(), 1u);
}

// A peer that invents names (models, nodes) cannot grow the broker's memory: past the cap, new
// label sets are counted together.
TEST(broker_metrics, label_sets_are_capped) {
  broker_metrics m;
  for (size_t i = 0; i < broker_metrics::k_max_series + 50; ++i) {
    m.add(metric::tokens_generated, {"model-" + std::to_string(i), "node"}, 1);
  }
  std::vector<wire::metric_family> out;
  m.append_to(out);
  const auto& f = family(out, "hearth_tokens_generated_total");
  EXPECT_EQ(f.samples.size(), broker_metrics::k_max_series + 1);
  EXPECT_EQ(m.value(metric::tokens_generated, {"_other", "_other"}), 50);
  EXPECT_EQ(m.value(metric::tokens_generated, {"model-0", "node"}), 1);
}

// What a turn counts is kept only when the turn commits.
TEST(broker_metrics, a_turn_counts_only_once_committed) {
  broker_metrics m;
  metrics_turn t;
  t.add(metric::jobs_submitted, {"a"});
  t.observe(metric::job_duration, {"a", "completed"}, 1.5);
  EXPECT_EQ(m.value(metric::jobs_submitted, {"a"}), 0);
  t.discard();
  t.commit(m);
  EXPECT_EQ(m.value(metric::jobs_submitted, {"a"}), 0);
  t.add(metric::jobs_submitted, {"a"});
  t.commit(m);
  t.commit(m);  // nothing twice
  EXPECT_EQ(m.value(metric::jobs_submitted, {"a"}), 1);
}

// Every family the broker declares is one Prometheus accepts: a valid name, a counter ending in
// _total, a histogram's name ending in its unit.
TEST(broker_metrics, families_follow_prometheus_naming) {
  broker_metrics m;
  std::vector<wire::metric_family> out;
  m.append_to(out);
  EXPECT_EQ(out.size(), size_t(metric::count_));
  for (const auto& f : out) {
    EXPECT_TRUE(f.name.starts_with("hearth_")) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
    if (f.type == "counter") {
      EXPECT_TRUE(f.name.ends_with("_total")) << f.name;
    }
    if (f.type == "histogram") {
      EXPECT_TRUE(f.name.ends_with("_seconds")) << f.name;
      EXPECT_FALSE(f.bounds.empty()) << f.name;
    }
  }
}

}  // namespace
}  // namespace hearth::broker
