// hearth's own history over HTTP (the dashboard reads these): GET /v1/hearth/jobs (list_jobs),
// GET /v1/hearth/jobs/{id} (get_job, every page of the prompt and the output up to a bound),
// POST /v1/hearth/jobs/{id}/cancel (cancel) and GET /v1/hearth/nodes (list_nodes), as JSON with
// the wire's field names (schema/wire-json.h), each asked as the caller (its API key), so a key
// sees and cancels only its own jobs.
#include <charconv>
#include <memory>
#include <string>

#include "gateway/openai-json.h"
#include "gateway/openai-routes.h"
#include "schema/wire-json.h"

namespace hearth::gateway {
namespace {

// The most of a job's output one GET returns (the rest is announced, not sent).
constexpr uint64_t k_max_job_output_bytes = 64ull << 20;
// A running job whose output starts over (a new attempt) while it is read is read again, so
// often at most.
constexpr int k_max_job_reads = 5;
constexpr uint32_t k_max_list_limit = 10000;

http_response json_response(const ojson& j) {
  http_response r;
  r.body = json_text(j);
  return r;
}

http_response bad_query(const std::string& param, const std::string& message) {
  return error_response(400, message, "invalid_request_error", param);
}

// A decimal number, or nullopt.
std::optional<uint64_t> parse_u64(std::string_view s) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

void list_jobs_route(gateway_services& s, std::shared_ptr<exchange> ex) {
  wire::list_jobs q;
  q.api_key = ex->who.api_key;
  q.state = ex->request.query_param("state");
  q.model = ex->request.query_param("model");
  if (!q.state.empty() && !wire::job_state_from_name(q.state)) {
    return ex->out->reply(bad_query("state",
                                    "state must be queued, running, completed, failed or "
                                    "cancelled, got '" +
                                        q.state + "'"));
  }
  if (const std::string limit = ex->request.query_param("limit"); !limit.empty()) {
    auto n = parse_u64(limit);
    if (!n || *n < 1 || *n > k_max_list_limit) {
      return ex->out->reply(bad_query("limit", "limit must be an integer in [1, " +
                                                   std::to_string(k_max_list_limit) + "], got '" +
                                                   limit + "'"));
    }
    q.limit = uint32_t(*n);
  }
  s.broker().request<wire::jobs_reply>(q, [ex](link_result<wire::jobs_reply> r) {
    if (auto* f = std::get_if<link_failure>(&r)) return ex->out->reply(openai_link_error(*f));
    ojson j;
    j["object"] = "list";
    j["data"] = wire_json(std::get<wire::jobs_reply>(r).jobs);
    ex->out->reply(json_response(j));
  });
}

// One GET /v1/hearth/jobs/{id}: the job's record, read page by page.
struct job_read : std::enable_shared_from_this<job_read> {
  gateway_services& services;
  std::shared_ptr<exchange> ex;
  uint64_t job_id = 0;
  int reads = 0;
  std::optional<wire::job_detail> job;  // the first page's record
  uint32_t attempts = 0;
  uint64_t output_total = 0, prompt_total = 0;

  job_read(gateway_services& s, std::shared_ptr<exchange> e, uint64_t id)
      : services(s), ex(std::move(e)), job_id(id) {}

  void start() {
    if (++reads > k_max_job_reads) {
      return ex->out->reply(error_response(
          503, "job " + std::to_string(job_id) + " kept restarting while its output was read",
          "server_error", {}, "retry"));
    }
    job.reset();
    next_page();
  }

  void next_page() {
    wire::get_job g;
    g.job_id = job_id;
    g.api_key = ex->who.api_key;
    g.max_output_bytes = wire::job_page_bytes_max;
    g.max_prompt_bytes = wire::job_page_bytes_max;
    if (job) {
      g.output_offset = job->output.size();
      g.prompt_offset = job->prompt.size();
    }
    services.broker().request<wire::job_reply>(
        g, [self = shared_from_this(), g](link_result<wire::job_reply> r) {
          if (auto* f = std::get_if<link_failure>(&r)) {
            return self->ex->out->reply(job_link_error(*f, self->job_id));
          }
          self->page(g, std::get<wire::job_reply>(r));
        });
  }

  void page(const wire::get_job& asked, wire::job_reply& r) {
    if (!job) {
      job = std::move(r.job);
      attempts = job->summary.attempts;
    } else {
      // A new attempt started its output over: what was read belongs to the old one.
      const bool page_lost = (r.job.output.empty() && asked.output_offset < r.output_total_bytes &&
                              asked.output_offset < k_max_job_output_bytes) ||
                             (r.job.prompt.empty() && asked.prompt_offset < r.prompt_total_bytes);
      if (r.job.summary.attempts != attempts || r.output_offset != asked.output_offset ||
          r.prompt_offset != asked.prompt_offset || page_lost) {
        return start();
      }
      job->output += r.job.output;
      job->prompt += r.job.prompt;
      job->summary = r.job.summary;
      job->events = std::move(r.job.events);
    }
    output_total = r.output_total_bytes;
    prompt_total = r.prompt_total_bytes;
    const bool prompt_whole = job->prompt.size() >= prompt_total;
    const bool output_done =
        job->output.size() >= output_total || job->output.size() >= k_max_job_output_bytes;
    if (!prompt_whole || !output_done) return next_page();
    reply();
  }

  void reply() {
    const bool truncated = job->output.size() < output_total;
    ojson j = wire_json(*job);
    j["output_bytes"] = output_total;
    j["output_truncated"] = truncated;
    ex->out->reply(json_response(j));
  }
};

void get_job_route(gateway_services& s, std::shared_ptr<exchange> ex) {
  const std::string id = ex->params["id"];
  auto job_id = parse_job_id(id);
  if (!job_id) return ex->out->reply(bad_job_id(id));
  std::make_shared<job_read>(s, std::move(ex), *job_id)->start();
}

// Cancels a queued or running job as the caller: no such job, or not the caller's, is a 404,
// not_cancellable (it has finished) a 409.
void cancel_job_route(gateway_services& s, std::shared_ptr<exchange> ex) {
  const std::string id = ex->params["id"];
  auto job_id = parse_job_id(id);
  if (!job_id) return ex->out->reply(bad_job_id(id));
  wire::cancel c;
  c.job_id = *job_id;
  c.api_key = ex->who.api_key;
  s.broker().request<wire::ok>(c, [ex, job_id = *job_id](link_result<wire::ok> r) {
    if (auto* f = std::get_if<link_failure>(&r)) return ex->out->reply(job_link_error(*f, job_id));
    ojson j;
    j["job_id"] = job_id;
    j["object"] = "hearth.job.cancel";
    j["cancelled"] = true;
    ex->out->reply(json_response(j));
  });
}

void list_nodes_route(gateway_services& s, std::shared_ptr<exchange> ex) {
  wire::list_nodes q;
  q.api_key = ex->who.api_key;
  s.broker().request<wire::nodes_reply>(q, [ex](link_result<wire::nodes_reply> r) {
    if (auto* f = std::get_if<link_failure>(&r)) return ex->out->reply(openai_link_error(*f));
    const auto& n = std::get<wire::nodes_reply>(r);
    ojson j;
    j["object"] = "list";
    j["data"] = wire_json(n.nodes);
    j["total"] = std::max<uint64_t>(n.total, n.nodes.size());
    j["truncated"] = n.truncated;
    ex->out->reply(json_response(j));
  });
}

}  // namespace

std::optional<uint64_t> parse_job_id(std::string_view s) {
  for (std::string_view prefix : {"chatcmpl-", "cmpl-"}) {
    if (s.starts_with(prefix)) s.remove_prefix(prefix.size());
  }
  auto id = parse_u64(s);
  if (id && *id == 0) return std::nullopt;
  return id;
}

http_response bad_job_id(const std::string& id) {
  return error_response(
      400, "the job id must be a positive integer (or chatcmpl-N / cmpl-N), got '" + id + "'",
      "invalid_request_error", "id");
}

http_response job_link_error(const link_failure& f, uint64_t job_id) {
  if (!f.no_reply && f.code == wire::error_code::unauthorized) {
    return error_response(404, "no job " + std::to_string(job_id), "not_found_error", {},
                          "not_found");
  }
  return openai_link_error(f);
}

void add_history_routes(router& r, gateway_services& s) {
  r.add("GET", "/v1/hearth/jobs", [&s](std::shared_ptr<exchange> ex) { list_jobs_route(s, ex); });
  r.add("GET", "/v1/hearth/jobs/{id}",
        [&s](std::shared_ptr<exchange> ex) { get_job_route(s, std::move(ex)); });
  r.add(
      "POST", "/v1/hearth/jobs/{id}/cancel",
      [&s](std::shared_ptr<exchange> ex) { cancel_job_route(s, std::move(ex)); },
      route_options{.max_body_bytes = 4096});
  r.add("GET", "/v1/hearth/nodes", [&s](std::shared_ptr<exchange> ex) { list_nodes_route(s, ex); });
}

}  // namespace hearth::gateway
