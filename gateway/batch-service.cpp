// The Batch API's routes: files and batches as OpenAI's objects, each under its caller's owner
// (another owner gets 404, as for an id that does not exist). The batches themselves run in
// batch_run (batch-run.*); their state lives in batch_store (batch-store.*).
//
// Per owner, at most (documented in gateway/README.md):
//   max_files_per_owner files, max_bytes_per_owner bytes of files (uploads and outputs), and
//   max_unfinished_batches_per_owner batches not yet in a final state.
#include "gateway/batch-service.h"

#include <spdlog/spdlog.h>

#include <map>
#include <nlohmann/json.hpp>

#include "gateway/batch-input.h"
#include "gateway/batch-run.h"
#include "gateway/batch-store.h"
#include "gateway/multipart.h"
#include "gateway/openai-request.h"

namespace hearth::gateway {
namespace {

using json = nlohmann::json;

constexpr uint32_t max_files_per_owner = 1000;
constexpr uint64_t max_bytes_per_owner = 2ull << 30;
constexpr uint32_t max_unfinished_batches_per_owner = 16;
// OpenAI's bounds on a batch's metadata.
constexpr size_t max_metadata_pairs = 16;
constexpr size_t max_metadata_key_bytes = 64;
constexpr size_t max_metadata_value_bytes = 512;
constexpr uint32_t max_list_limit = 100;
constexpr int64_t completion_window_seconds = 24 * 3600;

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

http_response json_response(const json& j) {
  http_response r;
  r.body = dump(j);
  return r;
}

http_response bad_request(std::string_view message, std::string_view param = {},
                          std::string_view code = {}) {
  return error_response(400, message, "invalid_request_error", param, code);
}

http_response not_found(std::string_view what, std::string_view id) {
  return error_response(404, "No " + std::string(what) + " with id '" + std::string(id) + "'",
                        "invalid_request_error", {}, "not_found");
}

json time_or_null(int64_t t) {
  return t ? json(t) : json(nullptr);
}

json id_or_null(const std::string& id) {
  return id.empty() ? json(nullptr) : json(id);
}

json file_object(const file_row& f) {
  return {{"id", f.id},
          {"object", "file"},
          {"bytes", f.bytes},
          {"created_at", f.created_at},
          {"expires_at", nullptr},
          {"filename", f.filename},
          {"purpose", f.purpose},
          {"status", "processed"},
          {"status_details", nullptr}};
}

json batch_object(const batch_row& b) {
  json errors = json::parse(b.errors_json, nullptr, false);
  json metadata = json::parse(b.metadata_json, nullptr, false);
  return {
      {"id", b.id},
      {"object", "batch"},
      {"endpoint", b.endpoint},
      {"errors", errors.is_discarded() ? json(nullptr) : errors},
      {"input_file_id", b.input_file_id},
      {"completion_window", b.completion_window},
      {"status", batch_status_name(b.status)},
      {"output_file_id", id_or_null(b.output_file_id)},
      {"error_file_id", id_or_null(b.error_file_id)},
      {"created_at", b.created_at},
      {"in_progress_at", time_or_null(b.in_progress_at)},
      {"expires_at", time_or_null(b.expires_at)},
      {"finalizing_at", time_or_null(b.finalizing_at)},
      {"completed_at", time_or_null(b.completed_at)},
      {"failed_at", time_or_null(b.failed_at)},
      {"expired_at", time_or_null(b.expired_at)},
      {"cancelling_at", time_or_null(b.cancelling_at)},
      {"cancelled_at", time_or_null(b.cancelled_at)},
      {"request_counts", {{"total", b.total}, {"completed", b.completed}, {"failed", b.failed}}},
      {"metadata", metadata.is_discarded() ? json(nullptr) : metadata}};
}

// OpenAI's page of a list: {"object": "list", "data", "first_id", "last_id", "has_more"}.
template <class Row>
http_response list_response(const std::vector<Row>& rows, json (*object)(const Row&), bool more) {
  json data = json::array();
  for (const Row& r : rows) data.push_back(object(r));
  return json_response({{"object", "list"},
                        {"data", data},
                        {"first_id", rows.empty() ? json(nullptr) : json(rows.front().id)},
                        {"last_id", rows.empty() ? json(nullptr) : json(rows.back().id)},
                        {"has_more", more}});
}

// A list's ?limit= (1..max_list_limit, default 20); nullopt with the error when out of range.
std::variant<uint32_t, http_response> list_limit(const http_request& r) {
  std::string v = r.query_param("limit");
  if (v.empty()) return uint32_t(20);
  uint32_t n = 0;
  bool digits = v.size() <= 3 && v.find_first_not_of("0123456789") == std::string::npos;
  if (digits) n = uint32_t(std::stoul(v));
  if (!digits || n < 1 || n > max_list_limit) {
    return bad_request("limit must be an integer from 1 to " + std::to_string(max_list_limit) +
                           ", got '" + v.substr(0, 20) + "'",
                       "limit");
  }
  return n;
}

// A batch's metadata: null, or an object of at most 16 string values (OpenAI's rule).
std::string check_metadata(const json& m) {
  if (m.is_null()) return "";
  if (!m.is_object()) return "metadata must be an object of strings";
  if (m.size() > max_metadata_pairs) {
    return "metadata has " + std::to_string(m.size()) + " keys, at most " +
           std::to_string(max_metadata_pairs);
  }
  for (auto& [k, v] : m.items()) {
    if (k.size() > max_metadata_key_bytes) {
      return "a metadata key has " + std::to_string(k.size()) + " bytes, at most " +
             std::to_string(max_metadata_key_bytes);
    }
    if (!v.is_string()) return "metadata value of '" + k + "' must be a string";
    if (v.get_ref<const std::string&>().size() > max_metadata_value_bytes) {
      return "metadata value of '" + k + "' has more than " +
             std::to_string(max_metadata_value_bytes) + " bytes";
    }
  }
  return "";
}

}  // namespace

struct batch_service::impl {
  gateway_services& s;
  std::unique_ptr<batch_store> store;
  std::map<std::string, std::shared_ptr<batch_run>> runs;  // batch id -> its run

  impl(gateway_services& services, std::unique_ptr<batch_store> st)
      : s(services), store(std::move(st)) {}

  void run_batch(batch_row b) {
    std::string id = b.id;
    auto run = std::make_shared<batch_run>(s, *store, std::move(b), [this, id] { runs.erase(id); });
    runs[id] = run;
    run->start();
  }

  // The handler's body; a failing database answers 500 (what was committed before stays).
  void guarded(const std::shared_ptr<exchange>& ex,
               const std::function<http_response(exchange&)>& f) {
    http_response r;
    try {
      r = f(*ex);
    } catch (const std::exception& e) {
      spdlog::error("{} {}: {}", ex->request.method, ex->request.path, e.what());
      r = error_response(500, std::string("the gateway could not use its database: ") + e.what(),
                         "server_error");
    }
    ex->out->reply(std::move(r));
  }

  http_response upload(exchange& ex) {
    auto boundary = multipart_boundary(ex.request.header("content-type"));
    if (!boundary) return bad_request(boundary.message());
    auto parts = multipart_parse(ex.request.body, *boundary);
    if (!parts) return bad_request(parts.message());
    const form_part* file = nullptr;
    const form_part* purpose = nullptr;
    for (const form_part& p : *parts) {
      const form_part** slot = p.name == "file" ? &file : p.name == "purpose" ? &purpose : nullptr;
      if (!slot) continue;  // other fields are ignored, as OpenAI does
      if (*slot) return bad_request("the form has two '" + p.name + "' fields", p.name);
      *slot = &p;
    }
    if (!purpose) return bad_request("the form has no 'purpose' field", "purpose");
    if (purpose->content != "batch") {
      return bad_request("purpose must be 'batch' (files here are batch inputs), got '" +
                             std::string(purpose->content.substr(0, 40)) + "'",
                         "purpose");
    }
    if (!file) return bad_request("the form has no 'file' field", "file");
    owner_usage u = store->usage(ex.who.owner);
    if (u.files >= max_files_per_owner) {
      return error_response(429,
                            "this key has " + std::to_string(u.files) + " files, at most " +
                                std::to_string(max_files_per_owner) + ": delete some first",
                            "rate_limit_error", "file", "files_limit");
    }
    if (u.bytes + file->content.size() > max_bytes_per_owner) {
      return error_response(429,
                            "this key keeps " + std::to_string(u.bytes) + " bytes of files; " +
                                std::to_string(file->content.size()) + " more would pass " +
                                std::to_string(max_bytes_per_owner) + ": delete some first",
                            "rate_limit_error", "file", "bytes_limit");
    }
    file_row f{batch_store::new_id("file-"),
               ex.who.owner,
               file->filename.empty() ? "upload.jsonl" : file->filename.substr(0, 255),
               "batch",
               file->content.size(),
               batch_time_now()};
    store->file_insert(f, file->content);
    return json_response(file_object(f));
  }

  http_response list_files(exchange& ex) {
    auto limit = list_limit(ex.request);
    if (auto* e = std::get_if<http_response>(&limit)) return *e;
    bool more = false;
    auto files = store->file_list(ex.who.owner, ex.request.query_param("purpose"),
                                  std::get<uint32_t>(limit), ex.request.query_param("after"), more);
    return list_response(files, file_object, more);
  }

  http_response get_file(exchange& ex) {
    auto f = store->file_get(ex.who.owner, ex.params["id"]);
    if (!f) return not_found("file", ex.params["id"]);
    return json_response(file_object(*f));
  }

  http_response file_content(exchange& ex) {
    auto c = store->file_content(ex.who.owner, ex.params["id"]);
    if (!c) return not_found("file", ex.params["id"]);
    http_response r;
    r.content_type = "application/octet-stream";
    r.body = std::move(*c);
    return r;
  }

  http_response delete_file(exchange& ex) {
    const std::string& id = ex.params["id"];
    if (!store->file_delete(ex.who.owner, id)) return not_found("file", id);
    return json_response({{"id", id}, {"object", "file"}, {"deleted", true}});
  }

  http_response create_batch(exchange& ex) {
    json req = json::parse(ex.request.body, nullptr, false);
    if (req.is_discarded() || !req.is_object()) {
      return bad_request("the body must be a JSON object");
    }
    auto string_field = [&](const char* name) -> std::optional<std::string> {
      auto it = req.find(name);
      if (it == req.end() || !it->is_string()) return std::nullopt;
      return it->get<std::string>();
    };
    auto file_id = string_field("input_file_id");
    if (!file_id) return bad_request("input_file_id must be a string", "input_file_id");
    auto endpoint = string_field("endpoint");
    if (!endpoint || !openai_endpoint_of(*endpoint)) {
      return bad_request("endpoint must be \"/v1/chat/completions\" or \"/v1/completions\", got " +
                             (req.contains("endpoint") ? dump(req["endpoint"]).substr(0, 80)
                                                       : std::string("nothing")),
                         "endpoint");
    }
    auto window = string_field("completion_window");
    if (!window || *window != "24h") {
      return bad_request("completion_window must be \"24h\"", "completion_window");
    }
    json metadata = req.value("metadata", json(nullptr));
    if (std::string why = check_metadata(metadata); !why.empty()) {
      return bad_request(why, "metadata");
    }
    auto file = store->file_get(ex.who.owner, *file_id);
    if (!file) return not_found("file", *file_id);
    if (file->purpose != "batch") {
      return bad_request("the file " + *file_id + " has purpose '" + file->purpose +
                             "', a batch reads files of purpose 'batch'",
                         "input_file_id");
    }
    if (uint32_t n = store->usage(ex.who.owner).batches_unfinished;
        n >= max_unfinished_batches_per_owner) {
      return error_response(429,
                            "this key has " + std::to_string(n) + " batches in progress, at most " +
                                std::to_string(max_unfinished_batches_per_owner),
                            "rate_limit_error", {}, "batches_limit");
    }

    batch_row b;
    b.id = batch_store::new_id("batch_");
    b.owner = ex.who.owner;
    b.api_key = ex.who.api_key;
    b.endpoint = *endpoint;
    b.input_file_id = *file_id;
    b.completion_window = *window;
    b.metadata_json = dump(metadata);
    b.errors_json = "null";
    b.created_at = batch_time_now();
    b.expires_at = b.created_at + completion_window_seconds;

    batch_input in =
        batch_input_parse(store->file_content(ex.who.owner, *file_id).value_or(""), *endpoint);
    // Each body as the endpoint would take it: what the HTTP route refuses, the batch refuses.
    for (const batch_input_line& l : in.lines) {
      if (in.errors.size() >= batch_max_errors) break;
      auto parsed = parse_openai_request(*openai_endpoint_of(*endpoint), l.body);
      if (auto* refusal = std::get_if<request_refusal>(&parsed)) {
        in.errors.push_back({refusal->code.empty() ? "invalid_request" : refusal->code,
                             refusal->message,
                             refusal->param.empty() ? "body" : "body." + refusal->param, l.line});
      } else if (std::get<openai_request>(parsed).stream) {
        in.errors.push_back(
            {"invalid_value", "a batch's requests are not streamed", "body.stream", l.line});
      }
    }
    std::vector<line_row> lines;
    if (!in.errors.empty()) {
      b.status = batch_status::failed;
      b.failed_at = b.created_at;
      b.api_key.clear();
      b.errors_json = batch_input_errors_json(in.errors);
    } else {
      b.status = batch_status::validating;
      b.total = uint32_t(in.lines.size());
      lines.reserve(in.lines.size());
      for (batch_input_line& l : in.lines) {
        line_row row;
        row.index = l.index;
        row.custom_id = std::move(l.custom_id);
        row.body = std::move(l.body);
        lines.push_back(std::move(row));
      }
    }
    store->batch_insert(b, lines);
    http_response r = json_response(batch_object(b));
    if (b.status == batch_status::validating) {
      // In progress from the next turn on: the client has its answer first.
      s.after(std::chrono::milliseconds(0), [this, owner = b.owner, id = b.id] {
        try {
          // Cancelled in between, its run is there already.
          if (runs.count(id)) return;
          if (auto row = store->batch_get(owner, id); row && !batch_status_is_final(row->status))
            run_batch(std::move(*row));
        } catch (const std::exception& e) {
          spdlog::error("batch {}: {} (resumed at the next start)", id, e.what());
        }
      });
    }
    return r;
  }

  http_response get_batch(exchange& ex) {
    auto b = store->batch_get(ex.who.owner, ex.params["id"]);
    if (!b) return not_found("batch", ex.params["id"]);
    return json_response(batch_object(*b));
  }

  http_response list_batches(exchange& ex) {
    auto limit = list_limit(ex.request);
    if (auto* e = std::get_if<http_response>(&limit)) return *e;
    bool more = false;
    auto batches = store->batch_list(ex.who.owner, std::get<uint32_t>(limit),
                                     ex.request.query_param("after"), more);
    return list_response(batches, batch_object, more);
  }

  http_response cancel_batch(exchange& ex) {
    const std::string& id = ex.params["id"];
    auto b = store->batch_get(ex.who.owner, id);
    if (!b) return not_found("batch", id);
    if (b->status == batch_status::cancelling || b->status == batch_status::cancelled) {
      return json_response(batch_object(*b));
    }
    if (batch_status_is_final(b->status) || b->status == batch_status::finalizing) {
      return error_response(
          409,
          "Cannot cancel a batch with status '" + std::string(batch_status_name(b->status)) + "'",
          "invalid_request_error", {}, "batch_not_cancellable");
    }
    auto it = runs.find(id);
    if (it == runs.end()) {
      // Made a moment ago, its run not started yet: it starts cancelling.
      b->status = batch_status::cancelling;
      b->cancelling_at = batch_time_now();
      store->batch_update(*b);
      run_batch(*b);
    } else {
      it->second->cancel();
    }
    return json_response(batch_object(*store->batch_get(ex.who.owner, id)));
  }
};

batch_service::batch_service(gateway_services& s, const std::string& db_path) {
  auto store = batch_store::open(db_path);
  if (!store) throw std::runtime_error(store.message());
  impl_ = std::make_unique<impl>(s, std::move(store).value());
}

batch_service::~batch_service() = default;

void batch_service::add_routes(router& r) {
  auto route = [&](const char* method, const char* pattern, http_response (impl::*f)(exchange&),
                   route_options o = {}) {
    impl* p = impl_.get();
    r.add(
        method, pattern,
        [p, f](std::shared_ptr<exchange> ex) {
          p->guarded(ex, [p, f](exchange& e) { return (p->*f)(e); });
        },
        o);
  };
  route_options upload;
  upload.max_body_bytes = impl_->s.options().max_upload_bytes;
  route("POST", "/v1/files", &impl::upload, upload);
  route("GET", "/v1/files", &impl::list_files);
  route("GET", "/v1/files/{id}", &impl::get_file);
  route("DELETE", "/v1/files/{id}", &impl::delete_file);
  route("GET", "/v1/files/{id}/content", &impl::file_content);
  route("POST", "/v1/batches", &impl::create_batch);
  route("GET", "/v1/batches", &impl::list_batches);
  route("GET", "/v1/batches/{id}", &impl::get_batch);
  route("POST", "/v1/batches/{id}/cancel", &impl::cancel_batch);
}

void batch_service::start() {
  for (batch_row& b : impl_->store->batches_unfinished()) {
    const std::string id = b.id;
    if (impl_->runs.count(id)) continue;
    spdlog::info("batch {}: resumed ({}, {} of {} lines finished)", b.id,
                 batch_status_name(b.status), b.completed + b.failed, b.total);
    try {
      impl_->run_batch(std::move(b));
    } catch (const std::exception& e) {
      spdlog::error("batch {}: cannot resume: {}", id, e.what());
    }
  }
}

}  // namespace hearth::gateway
