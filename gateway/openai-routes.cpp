// POST /v1/chat/completions and /v1/completions: the body checked (openai-request.cpp), the
// model checked against the broker's list (503 when no online node serves it, 404 when none ever
// did), then the job submitted as the caller at interactive priority and followed to its end
// (openai-stream.cpp). A client that goes away cancels its job. GET /v1/models and
// /v1/models/{id} answer from the same list.
#include "gateway/openai-routes.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "gateway/model-catalog.h"
#include "gateway/openai-stream.h"

namespace hearth::gateway {
namespace {

// Interactive requests; batches submit below this (batch-service.h).
constexpr int32_t k_interactive_priority = 0;

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

http_response json_response(const ojson& j) {
  http_response r;
  r.body = json_text(j);
  return r;
}

void cancel_job(gateway_services& s, uint64_t job_id, const std::string& api_key) {
  wire::cancel c;
  c.job_id = job_id;
  c.api_key = api_key;
  // not_cancellable (it finished meanwhile) and no_reply leave nothing to do.
  s.broker().request<wire::ok>(std::move(c), [](link_result<wire::ok>) {});
}

void keep_alive_every(gateway_services& s, std::weak_ptr<job_answer> a) {
  s.after(k_keep_alive, [&s, a] {
    auto answer = a.lock();
    if (!answer || answer->ended()) return;
    answer->keep_alive();
    keep_alive_every(s, a);
  });
}

// Whether the job was accepted and whether its client left, shared by the submit's callbacks
// and the responder's on_close.
struct follow_state {
  uint64_t follower = 0;
  bool accepted = false;
  bool client_gone = false;
};

void submit_completion(gateway_services& s, const std::shared_ptr<exchange>& ex, openai_request r) {
  // The answer needs the request's model and parameters (how to read the job's output), not
  // its text: the text goes to the broker.
  wire::submit submit = std::move(r.submit);
  r.submit = wire::submit{};
  r.submit.model = submit.model;
  r.submit.params = submit.params;
  submit_and_answer(s, ex, std::move(submit),
                    std::make_shared<openai_answer>(std::move(r), unix_seconds(), ex->out));
}

void completion_route(gateway_services& s, const std::shared_ptr<model_catalog>& models,
                      openai_endpoint endpoint, std::shared_ptr<exchange> ex) {
  auto parsed = parse_openai_request(endpoint, ex->request.body);
  if (auto* refused = std::get_if<request_refusal>(&parsed)) {
    return ex->out->reply(error_response(refused->status, refused->message, "invalid_request_error",
                                         refused->param, refused->code));
  }
  auto r = std::make_shared<openai_request>(std::move(std::get<openai_request>(parsed)));
  models->get([&s, ex, r](const link_result<wire::models_reply>& m) {
    if (ex->out->closed()) return;
    if (auto* f = std::get_if<link_failure>(&m)) return ex->out->reply(openai_link_error(*f));
    if (auto e = model_unavailable(std::get<wire::models_reply>(m), r->submit.model)) {
      return ex->out->reply(std::move(*e));
    }
    submit_completion(s, ex, std::move(*r));
  });
}

void list_models_route(const std::shared_ptr<model_catalog>& models, std::shared_ptr<exchange> ex) {
  models->get([ex](const link_result<wire::models_reply>& m) {
    if (auto* f = std::get_if<link_failure>(&m)) return ex->out->reply(openai_link_error(*f));
    ojson data = ojson::array();
    for (const auto& model : std::get<wire::models_reply>(m).models) {
      data.push_back(openai_model_json(model));
    }
    ex->out->reply(json_response({{"object", "list"}, {"data", std::move(data)}}));
  });
}

void get_model_route(const std::shared_ptr<model_catalog>& models, std::shared_ptr<exchange> ex) {
  models->get([ex](const link_result<wire::models_reply>& m) {
    if (auto* f = std::get_if<link_failure>(&m)) return ex->out->reply(openai_link_error(*f));
    const auto& list = std::get<wire::models_reply>(m);
    const std::string& id = ex->params["id"];
    auto it = std::find_if(list.models.begin(), list.models.end(),
                           [&](const wire::model_summary& s) { return s.name == id; });
    if (it == list.models.end()) {
      return ex->out->reply(error_response(
          404, "the model '" + id + "' does not exist; known models: " + model_names(list),
          "invalid_request_error", "model", "model_not_found"));
    }
    ex->out->reply(json_response(openai_model_json(*it)));
  });
}

}  // namespace

void submit_and_answer(gateway_services& s, const std::shared_ptr<exchange>& ex,
                       wire::submit submit, std::shared_ptr<job_answer> answer) {
  const std::string api_key = ex->who.api_key;
  submit.api_key = api_key;
  submit.priority = k_interactive_priority;
  auto st = std::make_shared<follow_state>();
  st->follower = s.broker().submit_and_follow(
      std::move(submit),
      [&s, answer, st, api_key](link_result<wire::accepted> a) {
        if (auto* f = std::get_if<link_failure>(&a)) return answer->refused(*f);
        answer->accepted(std::get<wire::accepted>(a).job_id);
        st->accepted = true;
        if (st->client_gone) {
          s.broker().unfollow(st->follower);
          cancel_job(s, answer->job_id(), api_key);
        }
      },
      [answer](const job_event& e) { answer->event(e); });
  // The follower is dropped only once the job is known, so that its acceptance is seen and
  // the job cancelled even when the client leaves before the broker answered.
  ex->out->on_close([&s, answer, st, api_key] {
    if (answer->ended() || st->client_gone) return;
    st->client_gone = true;
    if (!st->accepted) return;
    s.broker().unfollow(st->follower);
    cancel_job(s, answer->job_id(), api_key);
  });
  if (answer->streaming()) keep_alive_every(s, answer);
}

void add_openai_routes(router& r, gateway_services& s) {
  auto models = std::make_shared<model_catalog>(s);
  for (auto endpoint : {openai_endpoint::chat_completions, openai_endpoint::completions}) {
    const char* path =
        endpoint == openai_endpoint::chat_completions ? "/v1/chat/completions" : "/v1/completions";
    r.add("POST", path, [&s, models, endpoint](std::shared_ptr<exchange> ex) {
      completion_route(s, models, endpoint, std::move(ex));
    });
  }
  r.add("GET", "/v1/models",
        [models](std::shared_ptr<exchange> ex) { list_models_route(models, std::move(ex)); });
  r.add("GET", "/v1/models/{id}",
        [models](std::shared_ptr<exchange> ex) { get_model_route(models, std::move(ex)); });
}

}  // namespace hearth::gateway
