// OpenAI's Batch API over hearth's durable queue: POST /v1/files (JSONL, purpose "batch"),
// GET /v1/files/{id}, GET /v1/files/{id}/content, POST /v1/batches, GET /v1/batches,
// GET /v1/batches/{id}, POST /v1/batches/{id}/cancel. Files and batches live in the gateway's
// SQLite file (gateway_options::db), each under its caller's owner; every line of a batch
// becomes a job at a priority below interactive requests, submitted with a request_key, so a
// gateway or broker restart neither loses nor duplicates a line. Progress and output come from
// the jobs as the broker reports them.
#pragma once

#include <memory>
#include <string>

#include "gateway/gateway.h"
#include "gateway/router.h"

namespace hearth::gateway {

// The priority of batch jobs: below interactive requests (0).
inline constexpr int32_t batch_job_priority = -10;

class batch_service {
 public:
  // Opens (creating or migrating) the database; throws std::runtime_error naming the file.
  batch_service(gateway_services& s, const std::string& db_path);
  ~batch_service();
  void add_routes(router& r);
  // Resumes batches that were in progress when the gateway stopped (on the I/O thread).
  void start();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace hearth::gateway
