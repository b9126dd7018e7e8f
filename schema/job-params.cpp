#include "schema/job-params.h"

namespace hearth::wire {

generation_params generation_params_of(const job_params& p) {
  generation_params g;
  g.max_tokens = p.max_tokens;
  g.stop = p.stop;
  g.sampling.temperature = p.temperature;
  g.sampling.top_k = p.top_k;
  g.sampling.top_p = p.top_p;
  g.sampling.min_p = p.min_p;
  g.sampling.repeat_penalty = p.repeat_penalty;
  g.sampling.repeat_last_n = p.repeat_last_n;
  g.sampling.presence_penalty = p.presence_penalty;
  g.sampling.frequency_penalty = p.frequency_penalty;
  g.sampling.seed = p.seed;
  return g;
}

param_check job_params_check(const job_params& p) {
  // The name itself is checked where the templates are known (the node, the CLI): here only
  // that it could be one.
  if (p.chat_template.size() > 32 ||
      p.chat_template.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_.") !=
          std::string::npos) {
    return {param_check_code::not_a_name, "chat_template",
            "chat_template must be a template's name (at most 32 of a-z, 0-9, '-', '_', '.')"};
  }
  return generation_params_check(generation_params_of(p));
}

}  // namespace hearth::wire
