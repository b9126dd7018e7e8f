// The gateway's SQLite file for OpenAI's Batch API: uploaded files (their bytes too), batches
// and, for every line of a batch, its request, the job that runs it and its result. Each change
// is one transaction, committed with synchronous=FULL in WAL mode before the call returns, so
// what the gateway has told a client survives a crash, and a restarted gateway finds every
// unfinished batch with the job id of each line it already submitted.
//
// Everything is keyed by owner: a query for another owner's file or batch finds nothing. The
// store is used from the gateway's I/O thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace hearth::gateway {

// The store's times: seconds since the Unix epoch, now.
int64_t batch_time_now();

// The largest file the store keeps: a file is one SQLite value, and SQLite takes none longer
// (SQLITE_MAX_LENGTH as Debian's libsqlite3 is built). The gateway's max_upload_bytes may not
// exceed it, nor may max_batch_output_bytes (config.cpp); a larger value is refused when it is
// bound, not stored cut short.
constexpr uint64_t max_file_bytes = 1'000'000'000;

struct file_row {
  std::string id;  // "file-" + 24 hex digits
  std::string owner;
  std::string filename;
  std::string purpose;  // "batch" (uploaded), "batch_output" (written by a batch)
  uint64_t bytes = 0;
  int64_t created_at = 0;  // seconds since the Unix epoch
};

// A batch's states, as OpenAI names them. validating -> in_progress -> finalizing -> completed;
// validating -> failed; in_progress -> cancelling -> cancelled.
enum class batch_status : uint8_t {
  validating,
  failed,
  in_progress,
  finalizing,
  completed,
  expired,
  cancelling,
  cancelled
};
std::string_view batch_status_name(batch_status s);
std::optional<batch_status> batch_status_from_name(std::string_view name);
// completed, failed, expired, cancelled: nothing more happens to the batch.
bool batch_status_is_final(batch_status s);

struct batch_row {
  std::string id;  // "batch_" + 24 hex digits
  std::string owner;
  // The API key the batch's jobs are submitted as, kept so that a restarted gateway can submit
  // the rest; erased when the batch reaches a final state.
  std::string api_key;
  std::string endpoint;  // "/v1/chat/completions" or "/v1/completions"
  std::string input_file_id;
  std::string completion_window;  // "24h"
  std::string metadata_json;      // an object, or "null"
  std::string errors_json;        // OpenAI's errors list when validation failed, else "null"
  batch_status status = batch_status::validating;
  std::string output_file_id, error_file_id;  // "" until written
  // Seconds since the Unix epoch; 0 = not (yet).
  int64_t created_at = 0, in_progress_at = 0, expires_at = 0, finalizing_at = 0, completed_at = 0,
          failed_at = 0, expired_at = 0, cancelling_at = 0, cancelled_at = 0;
  uint32_t total = 0, completed = 0, failed = 0;  // request_counts
};

// A line's states: pending (no job yet), submitted (its job id known), then completed (its
// response recorded) or failed (its error recorded).
enum class line_state : uint8_t { pending, submitted, completed, failed };

struct line_row {
  uint32_t index = 0;  // 0-based line of the input file (blank lines not counted)
  std::string custom_id;
  std::string body;  // the request body (JSON), as the input file had it
  line_state state = line_state::pending;
  uint64_t job_id = 0;      // 0 while pending
  int32_t status_code = 0;  // the HTTP status of its response (completed or failed)
  std::string result_json;  // completed: the response body; failed: the error body
};

// What one owner keeps, for the per-owner bounds.
struct owner_usage {
  uint32_t files = 0;
  uint64_t bytes = 0;
  uint32_t batches_unfinished = 0;
};

class batch_store {
 public:
  // Opens (creating) the database and checks that it is a gateway database of a version this
  // gateway reads. The error names the file and what is wrong.
  static result<std::unique_ptr<batch_store>> open(const std::string& path);
  ~batch_store();

  // A fresh id: `prefix` + 24 random hex digits ("file-", "batch_").
  static std::string new_id(std::string_view prefix);

  void file_insert(const file_row& f, std::string_view content);
  std::optional<file_row> file_get(std::string_view owner, std::string_view id);
  std::optional<std::string> file_content(std::string_view owner, std::string_view id);
  // The owner's files of `purpose` ("" = any), newest first; after = the id the previous page
  // ended with ("" = start). `has_more` says whether more follow.
  std::vector<file_row> file_list(std::string_view owner, std::string_view purpose, uint32_t limit,
                                  std::string_view after, bool& has_more);
  bool file_delete(std::string_view owner, std::string_view id);

  owner_usage usage(std::string_view owner);

  // The batch and its lines, in one transaction.
  void batch_insert(const batch_row& b, const std::vector<line_row>& lines);
  std::optional<batch_row> batch_get(std::string_view owner, std::string_view id);
  // The owner's batches, newest first; after = the id the previous page ended with.
  // `has_more` says whether more follow.
  std::vector<batch_row> batch_list(std::string_view owner, uint32_t limit, std::string_view after,
                                    bool& has_more);
  // Every batch not in a final state, oldest first (to resume after a restart).
  std::vector<batch_row> batches_unfinished();
  // Writes the batch's state: status, times, output files, errors, total (api_key is erased
  // once the status is final). completed and failed are line_finished's to count.
  void batch_update(const batch_row& b);
  // Writes the output and error files and the batch's completion in one transaction.
  void batch_finish(const batch_row& b, const std::vector<std::pair<file_row, std::string>>& files);

  std::vector<line_row> lines(std::string_view batch_id);
  void line_submitted(std::string_view batch_id, uint32_t index, uint64_t job_id);
  // Records a finished line and counts it in its batch (completed or failed), once: a second
  // call for the same line changes nothing and returns false.
  bool line_finished(std::string_view batch_id, uint32_t index, line_state state,
                     int32_t status_code, std::string_view result_json);
  // Fails every line that has no job yet (a cancelled batch's), in one transaction, with
  // status_code 0 and `result_json`; returns how many.
  uint32_t lines_fail_pending(std::string_view batch_id, std::string_view result_json);

 private:
  struct impl;
  explicit batch_store(std::unique_ptr<impl> p);
  std::unique_ptr<impl> p_;
};

}  // namespace hearth::gateway
