#include "gateway/job-answer.h"

#include <type_traits>
#include <variant>

#include "gateway/openai-request.h"

namespace hearth::gateway {

void job_answer::refused(const link_failure& f) {
  fail(openai_link_error(f));
}

bool job_answer::event(const job_event& e) {
  if (ended()) return true;
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, wire::job_tokens>) {
          tokens(m);
        } else if constexpr (std::is_same_v<T, wire::job_restarted>) {
          restarted(m.attempt);
        } else if constexpr (std::is_same_v<T, wire::job_done>) {
          done(m);
        } else if constexpr (std::is_same_v<T, link_failure>) {
          fail(openai_link_error(m));
        }
        // job_queued and job_running change nothing the client sees.
      },
      e);
  return ended();
}

}  // namespace hearth::gateway
