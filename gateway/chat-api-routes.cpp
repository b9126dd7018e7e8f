#include "gateway/chat-api-routes.h"

#include <functional>
#include <memory>

#include "gateway/anthropic-api.h"
#include "gateway/model-catalog.h"
#include "gateway/openai-routes.h"
#include "gateway/responses-api.h"

namespace hearth::gateway {
namespace {

// The route of one API: `Request` parsed by `parse`, refusals shaped by `shape` (OpenAI's error
// as the API writes it), answered by `Answer`.
template <class Answer, class Request, class Parse>
void add_chat_route(router& r, gateway_services& s, std::shared_ptr<model_catalog> models,
                    const char* path, Parse parse,
                    std::function<http_response(const http_response&)> shape) {
  r.add("POST", path, [&s, models, parse, shape](std::shared_ptr<exchange> ex) {
    auto parsed = parse(ex->request.body);
    if (auto* refused = std::get_if<request_refusal>(&parsed)) {
      return ex->out->reply(
          shape(error_response(refused->status, refused->message, "invalid_request_error",
                               refused->param, refused->code)));
    }
    auto& req = std::get<Request>(parsed);
    auto submit = std::make_shared<wire::submit>(submit_taken(req.submit));
    auto answer = std::make_shared<Answer>(std::move(req), unix_seconds_now(), ex->out);
    models->get([&s, ex, submit, answer](const link_result<wire::models_reply>& m) {
      if (ex->out->closed()) return;
      if (auto* f = std::get_if<link_failure>(&m)) return answer->refused(*f);
      if (auto e = model_unavailable(std::get<wire::models_reply>(m), submit->model)) {
        return answer->fail(*e);
      }
      submit_and_answer(s, ex, std::move(*submit), answer);
    });
  });
}

}  // namespace

void add_chat_api_routes(router& r, gateway_services& s) {
  auto models = std::make_shared<model_catalog>(s);
  add_chat_route<responses_answer, responses_request>(r, s, models, "/v1/responses",
                                                      parse_responses_request,
                                                      [](const http_response& e) { return e; });
  add_chat_route<anthropic_answer, anthropic_request>(r, s, models, "/v1/messages",
                                                      parse_anthropic_request, anthropic_error);
}

}  // namespace hearth::gateway
