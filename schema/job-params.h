// A job's wire parameters as the generation they ask for, and their check: the one copy of
// wire::job_params into generation_params, and the rules of common/generation-params.h applied to
// a job by the CLI (hearth submit), the broker (at submit) and the node (at admission).
#pragma once

#include <string>

#include "common/generation-params.h"
#include "schema/messages.h"

namespace hearth::wire {

// The seed is copied as it is: the broker has replaced 0 ("choose one") by the time a node sees
// it. The penalties the wire does not carry (frequency, presence) stay off.
generation_params generation_params_of(const job_params& p);

// generation_params_check of the job's parameters: "" or the message naming the parameter, its
// allowed range and the value given.
std::string job_params_check(const job_params& p);

}  // namespace hearth::wire
