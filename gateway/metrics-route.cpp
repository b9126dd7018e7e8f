// GET /metrics: Prometheus's scrape of the homelab. The broker's families (get_metrics, asked as
// the caller: scrapers send an API key as `authorization: Bearer` like any client) and the
// gateway's own, in the text format (prometheus-text.h). When the broker does not answer, the
// gateway's families are still served, with hearth_gateway_broker_up 0, so an alert can tell "the
// broker is down" from "the gateway is down".
#include "gateway/metrics-route.h"

#include "gateway/openai-request.h"
#include "gateway/prometheus-text.h"

namespace hearth::gateway {
namespace {

wire::metric_family gauge(std::string name, std::string help, double v) {
  wire::metric_family f{std::move(name), std::move(help), "gauge", {}, {}, {}};
  f.samples.push_back({{}, v, {}, 0, 0});
  return f;
}

std::vector<wire::metric_family> gateway_families(gateway_services& s, bool broker_up,
                                                  bool truncated) {
  std::vector<wire::metric_family> out;
  wire::metric_family responses{"hearth_gateway_http_responses_total",
                                "HTTP answers the gateway sent, by status code (an event stream "
                                "counts as a 200 when it starts).",
                                "counter",
                                {"code"},
                                {},
                                {}};
  for (const auto& [code, n] : s.http_responses()) {
    responses.samples.push_back({{std::to_string(code)}, double(n), {}, 0, 0});
  }
  out.push_back(std::move(responses));
  out.push_back(gauge("hearth_gateway_http_connections", "HTTP connections open now.",
                      double(s.http_connections())));
  out.push_back(gauge("hearth_gateway_broker_up",
                      "Whether the broker answered this scrape (1) or not (0).", broker_up));
  out.push_back(gauge("hearth_gateway_metrics_truncated",
                      "Whether the broker left series out of this scrape to fit one message.",
                      truncated));
  return out;
}

void metrics_route(gateway_services& s, std::shared_ptr<exchange> ex) {
  wire::get_metrics q;
  q.api_key = ex->who.api_key;
  s.broker().request<wire::metrics_reply>(q, [&s, ex](link_result<wire::metrics_reply> r) {
    std::vector<wire::metric_family> families;
    bool up = false, truncated = false;
    if (auto* m = std::get_if<wire::metrics_reply>(&r)) {
      up = true;
      truncated = m->truncated;
      families = std::move(m->families);
    } else if (auto& f = std::get<link_failure>(r); !f.no_reply) {
      // The broker refused (an API key it does not know): that is the caller's error, not an
      // outage.
      return ex->out->reply(openai_link_error(f));
    }
    for (auto& f : gateway_families(s, up, truncated)) families.push_back(std::move(f));
    http_response out;
    out.content_type = k_prometheus_content_type;
    out.body = prometheus_text(families).text;
    ex->out->reply(std::move(out));
  });
}

}  // namespace

void add_metrics_route(router& r, gateway_services& s) {
  r.add("GET", "/metrics", [&s](std::shared_ptr<exchange> ex) { metrics_route(s, std::move(ex)); });
}

}  // namespace hearth::gateway
