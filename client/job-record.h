// A job's record read page by page (job_reply, PROTOCOL.md section 10.5) over the blocking face.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "client/broker-client.h"
#include "schema/messages.h"

namespace hearth::client {

// Job `job_id`'s record: `on_record` gets it once, with the whole prompt and no output, then
// `on_output` each page of the output in order as it arrives, so that an output of any size
// passes through without being held whole. Returns false when the output started over (a new
// attempt of a running job) after some of it was passed on: what was passed is then the start of
// an older attempt's output. Throws as broker_client::request does.
using job_record_fn = std::function<void(wire::job_detail)>;
using job_output_fn = std::function<void(std::string_view)>;
bool read_job(broker_client& client, uint64_t job_id, const job_record_fn& on_record,
              const job_output_fn& on_output);

// Job `job_id`'s whole record, output included (read_job, again when the output started over).
wire::job_detail fetch_job(broker_client& client, uint64_t job_id);

}  // namespace hearth::client
