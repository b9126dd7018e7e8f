#include "gateway/batch-run.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "gateway/batch-input.h"
#include "gateway/batch-service.h"

namespace hearth::gateway {
namespace {

using json = nlohmann::json;

// The result of a line that never ran, or whose job was cancelled, because its batch was.
const std::string cancelled_result =
    R"({"code":"batch_cancelled","message":"the batch was cancelled before this request finished"})";

// Following a job that the link lost (the broker refused the watch, or did not answer it) is
// tried again this many times, waiting longer each time, before the line fails.
constexpr uint32_t max_refollows = 10;
constexpr uint32_t retry_delay_max_ms = 10000;

bool retryable(const link_failure& f) {
  return f.no_reply || f.code == wire::error_code::limit_reached ||
         f.code == wire::error_code::queue_full || f.code == wire::error_code::storage_unavailable;
}

// A failed line's error body is at most this long (a node's or the broker's message may be a
// wire string of up to 4 MiB), so that every line of a batch failing fits in one error file.
constexpr size_t max_error_body_bytes = 8192;
// An error file line beyond its body: the line's JSON (about 100 bytes, with its id and job id)
// and its custom_id, JSON-escaped (at most 6 bytes a byte, as \u00XX).
constexpr uint64_t max_error_line_bytes =
    max_error_body_bytes + 6 * batch_max_custom_id_bytes + 256;
static_assert(uint64_t(batch_max_lines) * max_error_line_bytes <= max_file_bytes,
              "every line of a batch failing must fit in its error file");

// One line of the output or error file, as OpenAI writes them.
std::string result_line(const line_row& l) {
  std::string id = batch_store::new_id("batch_req_");
  std::string body = l.result_json.empty() ? "null" : l.result_json;
  std::string out = R"({"id":")" + id + R"(","custom_id":)" +
                    json(l.custom_id).dump(-1, ' ', false, json::error_handler_t::replace);
  if (l.status_code == 0) {
    out += R"(,"response":null,"error":)" + body + "}";
  } else {
    out += R"(,"response":{"status_code":)" + std::to_string(l.status_code) +
           R"(,"request_id":"req_)" + std::to_string(l.job_id) + R"(","body":)" + body +
           R"(},"error":null})";
  }
  return out + "\n";
}

}  // namespace

batch_run::batch_run(gateway_services& s, batch_store& store, batch_row b,
                     std::function<void()> on_final)
    : s_(s), store_(store), b_(std::move(b)), on_final_(std::move(on_final)) {
  endpoint_ = openai_endpoint_of(b_.endpoint).value_or(openai_endpoint::chat_completions);
}

batch_run::~batch_run() {
  unfollow_all();
}

void batch_run::unfollow_all() {
  for (auto& [index, f] : flights_) {
    if (f.follower) s_.broker().unfollow(f.follower);
  }
}

std::string batch_run::request_key(uint32_t index) const {
  return "batch:" + b_.id + ":" + std::to_string(index);
}

void batch_run::start() {
  if (b_.status == batch_status::validating) {
    b_.status = batch_status::in_progress;
    b_.in_progress_at = batch_time_now();
    store_.batch_update(b_);
  }
  if (b_.status == batch_status::finalizing) return finalize();
  output_bytes_ = 0;
  for (line_row& l : store_.lines(b_.id)) {
    if (l.state == line_state::completed) {
      output_bytes_ += result_line(l).size();
    } else if (l.state == line_state::pending) {
      pending_.emplace_back(l.index, flight{std::move(l.custom_id), std::move(l.body)});
    } else if (l.state == line_state::submitted) {
      auto parsed = parse_openai_request(endpoint_, l.body);
      flight& f = flights_[l.index];
      f.custom_id = std::move(l.custom_id);
      f.body = std::move(l.body);
      f.job_id = l.job_id;
      // Validated when the batch was made; the same parser says the same again.
      if (auto* r = std::get_if<openai_request>(&parsed)) f.request = std::move(*r);
      follow(l.index);
    }
  }
  if (b_.status == batch_status::cancelling) {
    b_.status = batch_status::in_progress;  // cancel() moves it again, as the first time
    cancel();
    return;
  }
  pump();
  maybe_finalize();
}

void batch_run::guarded(const std::function<void()>& f) {
  if (finalized_) return;
  try {
    f();
  } catch (const std::exception& e) {
    spdlog::error("batch {}: {}; starting again from the database in 5 s", b_.id, e.what());
    finalized_ = true;  // nothing more happens until the restart
    std::weak_ptr<batch_run> self = weak_from_this();
    s_.after(std::chrono::seconds(5), [self] {
      if (auto run = self.lock()) run->restart();
    });
  }
}

void batch_run::restart() {
  unfollow_all();
  flights_.clear();
  pending_.clear();
  retry_scheduled_ = false;
  finalized_ = false;
  guarded([this] {
    if (auto row = store_.batch_get(b_.owner, b_.id)) b_ = std::move(*row);
    if (!batch_status_is_final(b_.status)) return start();
    finalized_ = true;
    s_.after(std::chrono::milliseconds(0), on_final_);
  });
}

void batch_run::pump() {
  if (b_.status != batch_status::in_progress) return;
  while (!retry_scheduled_ && flights_.size() < batch_window && !pending_.empty()) {
    auto [index, f] = std::move(pending_.front());
    pending_.pop_front();
    flights_[index] = std::move(f);
    submit(index);
  }
}

void batch_run::submit(uint32_t index) {
  flight& f = flights_[index];
  auto parsed = parse_openai_request(endpoint_, f.body);
  if (auto* refusal = std::get_if<request_refusal>(&parsed)) {
    http_response e = error_response(refusal->status, refusal->message, "invalid_request_error",
                                     refusal->param, refusal->code);
    return finish_line(index, line_state::failed, e.status, e.body);
  }
  f.request = std::move(std::get<openai_request>(parsed));
  wire::submit sub = f.request.submit;
  sub.priority = batch_job_priority;
  sub.request_key = request_key(index);
  sub.api_key = b_.api_key;
  sub.watch = true;
  std::weak_ptr<batch_run> self = weak_from_this();
  f.follower = s_.broker().submit_and_follow(
      std::move(sub),
      [self, index](link_result<wire::accepted> r) {
        auto run = self.lock();
        if (run) run->guarded([&] { run->on_accepted(index, r); });
      },
      [self, index](const job_event& e) {
        if (auto run = self.lock()) run->guarded([&] { run->on_event(index, e); });
      });
}

void batch_run::on_accepted(uint32_t index, const link_result<wire::accepted>& r) {
  auto it = flights_.find(index);
  if (it == flights_.end()) return;
  if (auto* a = std::get_if<wire::accepted>(&r)) {
    it->second.job_id = a->job_id;
    store_.line_submitted(b_.id, index, a->job_id);
    retry_delay_ms_ = 0;
    if (b_.status == batch_status::cancelling) cancel_job(index);
    return;
  }
  const link_failure& failure = std::get<link_failure>(r);
  if (b_.status == batch_status::cancelling) {
    return finish_line(index, line_state::failed, 0, cancelled_result);
  }
  if (retryable(failure)) {
    // "Later", not "no": the line goes back to the front of the queue.
    pending_.emplace_front(index,
                           flight{std::move(it->second.custom_id), std::move(it->second.body)});
    flights_.erase(it);
    return retry_later();
  }
  http_response e = openai_link_error(failure);
  finish_line(index, line_state::failed, e.status, e.body);
}

void batch_run::follow(uint32_t index) {
  flight& f = flights_[index];
  // The link sends the latest attempt from its start: what was gathered before is dropped.
  f.attempt = 0;
  f.text.clear();
  std::weak_ptr<batch_run> self = weak_from_this();
  f.follower = s_.broker().follow(f.job_id, b_.api_key, [self, index](const job_event& e) {
    if (auto run = self.lock()) run->guarded([&] { run->on_event(index, e); });
  });
}

void batch_run::on_event(uint32_t index, const job_event& e) {
  auto it = flights_.find(index);
  if (it == flights_.end()) return;
  flight& f = it->second;
  if (auto* t = std::get_if<wire::job_tokens>(&e)) {
    if (t->attempt != f.attempt) {
      f.attempt = t->attempt;
      f.text.clear();
    }
    f.text += t->text;
  } else if (auto* r = std::get_if<wire::job_restarted>(&e)) {
    f.attempt = r->attempt;
    f.text.clear();
  } else if (auto* d = std::get_if<wire::job_done>(&e)) {
    f.follower = 0;
    if (d->state == wire::job_state::completed) {
      std::string body = openai_response_body(f.request, d->job_id, batch_time_now(), f.text, *d);
      finish_line(index, line_state::completed, 200, body);
    } else if (d->state == wire::job_state::cancelled && b_.status == batch_status::cancelling) {
      finish_line(index, line_state::failed, 0, cancelled_result);
    } else {
      http_response err = openai_job_error(*d);
      finish_line(index, line_state::failed, err.status, err.body);
    }
  } else if (auto* lost = std::get_if<link_failure>(&e)) {
    f.follower = 0;
    on_lost(index, *lost);
  }
}

void batch_run::on_lost(uint32_t index, const link_failure& failure) {
  flight& f = flights_[index];
  if (f.refollows == max_refollows) {
    http_response e = error_response(500,
                                     "lost track of job " + std::to_string(f.job_id) + " after " +
                                         std::to_string(max_refollows) +
                                         " tries to follow it: " + failure.message,
                                     "server_error");
    return finish_line(index, line_state::failed, e.status, e.body);
  }
  ++f.refollows;
  std::weak_ptr<batch_run> self = weak_from_this();
  s_.after(std::chrono::milliseconds(500 * f.refollows), [self, index] {
    auto run = self.lock();
    if (run && run->flights_.count(index)) run->guarded([&] { run->follow(index); });
  });
}

void batch_run::finish_line(uint32_t index, line_state state, int32_t status_code,
                            std::string result) {
  auto it = flights_.find(index);
  uint64_t output_line_bytes = 0;
  if (state == line_state::completed && it != flights_.end()) {
    line_row l;
    l.custom_id = it->second.custom_id;
    l.job_id = it->second.job_id;
    l.status_code = status_code;
    l.result_json = std::move(result);  // lent for the size, not copied: a response can be long
    output_line_bytes = result_line(l).size();
    result = std::move(l.result_json);
    const uint64_t limit = s_.options().max_batch_output_bytes;
    if (output_bytes_ + output_line_bytes > limit) {
      const std::string message =
          "the batch's output file has " + std::to_string(output_bytes_) + " bytes and may have " +
          std::to_string(limit) + " (the gateway's max_batch_output_bytes): this response of " +
          std::to_string(output_line_bytes) + " bytes was not added. Job " +
          std::to_string(l.job_id) +
          " completed and the broker's job history keeps its output (hearth job " +
          std::to_string(l.job_id) + ")";
      state = line_state::failed;
      status_code = 0;
      result = json{{"code", "batch_output_full"}, {"message", message}}.dump();
    }
  }
  if (state == line_state::failed) {
    result = error_body_bounded(std::move(result), max_error_body_bytes);
  }
  if (store_.line_finished(b_.id, index, state, status_code, result)) {
    ++(state == line_state::completed ? b_.completed : b_.failed);
    if (state == line_state::completed) output_bytes_ += output_line_bytes;
  }
  if (it != flights_.end()) {
    if (it->second.follower) s_.broker().unfollow(it->second.follower);
    flights_.erase(it);
  }
  pump();
  maybe_finalize();
}

void batch_run::cancel() {
  if (batch_status_is_final(b_.status) || b_.status == batch_status::cancelling ||
      b_.status == batch_status::finalizing) {
    return;
  }
  b_.status = batch_status::cancelling;
  if (!b_.cancelling_at) b_.cancelling_at = batch_time_now();
  store_.batch_update(b_);
  pending_.clear();
  b_.failed += store_.lines_fail_pending(b_.id, cancelled_result);
  for (auto& [index, f] : flights_) {
    if (f.job_id) cancel_job(index);
  }
  maybe_finalize();
}

void batch_run::cancel_job(uint32_t index) {
  wire::cancel c;
  c.job_id = flights_[index].job_id;
  c.api_key = b_.api_key;
  std::weak_ptr<batch_run> self = weak_from_this();
  s_.broker().request<wire::ok>(c, [self, index](link_result<wire::ok> r) {
    auto* f = std::get_if<link_failure>(&r);
    if (!f || !f->no_reply) return;  // done, or refused because the job has ended
    auto run = self.lock();
    if (!run) return;
    run->s_.after(std::chrono::seconds(1), [self, index] {
      auto again = self.lock();
      if (again && again->flights_.count(index)) again->guarded([&] { again->cancel_job(index); });
    });
  });
}

void batch_run::retry_later() {
  if (retry_scheduled_) return;
  retry_delay_ms_ = std::min(retry_delay_max_ms, retry_delay_ms_ ? retry_delay_ms_ * 2 : 250);
  retry_scheduled_ = true;
  std::weak_ptr<batch_run> self = weak_from_this();
  s_.after(std::chrono::milliseconds(retry_delay_ms_), [self] {
    auto run = self.lock();
    if (!run) return;
    run->retry_scheduled_ = false;
    run->guarded([&] { run->pump(); });
  });
}

void batch_run::maybe_finalize() {
  bool running = b_.status == batch_status::in_progress || b_.status == batch_status::cancelling;
  if (!finalized_ && running && pending_.empty() && flights_.empty()) finalize();
}

void batch_run::finalize() {
  finalized_ = true;
  const bool cancelled = b_.status == batch_status::cancelling;
  if (!cancelled && b_.status != batch_status::finalizing) {
    b_.status = batch_status::finalizing;
    b_.finalizing_at = batch_time_now();
    store_.batch_update(b_);
  }
  std::string output, errors;
  for (const line_row& l : store_.lines(b_.id)) {
    if (l.state == line_state::completed) output += result_line(l);
    if (l.state == line_state::failed) errors += result_line(l);
  }
  std::vector<std::pair<file_row, std::string>> files;
  auto add = [&](std::string& content, const char* suffix, std::string& id) {
    if (content.empty()) return;
    file_row f{batch_store::new_id("file-"),
               b_.owner,
               b_.id + suffix,
               "batch_output",
               0,
               batch_time_now()};
    id = f.id;
    files.emplace_back(std::move(f), std::move(content));
  };
  add(output, "_output.jsonl", b_.output_file_id);
  add(errors, "_error.jsonl", b_.error_file_id);
  b_.status = cancelled ? batch_status::cancelled : batch_status::completed;
  (cancelled ? b_.cancelled_at : b_.completed_at) = batch_time_now();
  store_.batch_finish(b_, files);
  spdlog::info("batch {}: {} ({} completed, {} failed of {})", b_.id, batch_status_name(b_.status),
               b_.completed, b_.failed, b_.total);
  // The service drops this run: not from inside its own call.
  s_.after(std::chrono::milliseconds(0), on_final_);
}

}  // namespace hearth::gateway
