#include "broker/wal-checkpointer.h"

#include <spdlog/spdlog.h>

#include <string_view>

#include "common/sqlite.h"

namespace hearth::broker {
namespace {

// Sets the connection up as the store's. The SELECT matters: a connection that has never read
// the database has not opened its WAL, and a checkpoint on it returns OK with log = -1 having
// done nothing (SQLite 3.40).
std::string prepare(sqlite3* db, const wal_checkpointer::settings& s, uint64_t& page_size) {
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, static_cast<int>(s.truncate_busy.count()));
  const std::string sql = std::string("PRAGMA synchronous=") + (s.full_sync ? "FULL" : "NORMAL") +
                          "; PRAGMA journal_size_limit=" + std::to_string(s.wal_limit_bytes) +
                          "; SELECT count(*) FROM sqlite_master;";
  try {
    sqlite::exec(db, sql);
    page_size = static_cast<uint64_t>(std::stoll(sqlite::read_value(db, "PRAGMA page_size")));
  } catch (const sqlite::failure& e) {
    return e.what();
  }
  return "";
}

}  // namespace

wal_checkpointer::wal_checkpointer(const std::string& path, const settings& s) : s_(s) {
  std::string why;
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    why = db_ ? sqlite3_errmsg(db_) : "out of memory";
  } else {
    why = prepare(db_, s_, page_size_);
  }
  if (!why.empty()) {
    spdlog::warn("WAL checkpoints only when the WAL passes twice its limit: cannot open {}: {}",
                 path, why);
    sqlite3_close(db_);
    db_ = nullptr;
    std::lock_guard lock(stats_mu_);
    stats_.failures = 1;
    stats_.last_error = why;
    return;
  }
  thread_ = std::thread([this] { loop(); });
}

wal_checkpointer::~wal_checkpointer() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  sqlite3_close(db_);
}

uint64_t wal_checkpointer::wal_bytes(int frames) const {
  constexpr uint64_t wal_header = 32, frame_header = 24;
  return frames <= 0 ? 0 : wal_header + static_cast<uint64_t>(frames) * (page_size_ + frame_header);
}

wal_checkpointer::figures wal_checkpointer::stats() const {
  std::lock_guard lock(stats_mu_);
  return stats_;
}

void wal_checkpointer::committed(sqlite3* broker_db, int wal_frames) {
  wal_frames_.store(wal_frames, std::memory_order_relaxed);
  commits_.fetch_add(1, std::memory_order_release);
  const uint64_t bytes = wal_bytes(wal_frames);
  if (bytes > s_.wal_limit_bytes) cv_.notify_one();
  // Past twice the limit, not while this thread's checkpoint is under way: waiting for it stalled
  // the broker for the whole copy and fsync (a 200 ms p99 in broker_bench). Once it is done, the
  // broker's next commit finds few frames left to copy, and its checkpoint lets the WAL start
  // over. Past four times the limit it waits: that is the bound.
  const bool over = bytes > 2 * s_.wal_limit_bytes;
  if (over) checkpoint(broker_db, SQLITE_CHECKPOINT_PASSIVE, bytes > 4 * s_.wal_limit_bytes);
}

bool wal_checkpointer::checkpoint(sqlite3* db, int mode, bool wait) {
  std::unique_lock run(run_mu_, std::defer_lock);
  if (wait) {
    run.lock();
  } else if (!run.try_lock()) {
    return false;
  }
  int log_frames = 0, done_frames = 0;
  const int rc = sqlite3_wal_checkpoint_v2(db, nullptr, mode, &log_frames, &done_frames);
  if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) return false;
  std::string error;
  if (rc != SQLITE_OK) {
    error = sqlite3_errmsg(db);
  } else if (log_frames < 0) {
    error = "the connection is not in WAL mode";
  }
  std::lock_guard lock(stats_mu_);
  if (error.empty()) {
    ++stats_.checkpoints;
    return true;
  }
  ++stats_.failures;
  stats_.last_error = error;
  if (auto more = log_.admit(token_bucket::clock::now())) {
    spdlog::warn("WAL checkpoint ({}) failed: {}{}",
                 mode == SQLITE_CHECKPOINT_TRUNCATE ? "truncate" : "passive", error, *more);
  }
  return false;
}

void wal_checkpointer::loop() {
  using clock = std::chrono::steady_clock;
  uint64_t seen = commits_.load(std::memory_order_acquire);
  auto last_commit = clock::now();
  bool truncated = false;  // opening may have written (a new file, a migration)
  std::unique_lock lock(mu_);
  while (!stop_) {
    // Woken early only for a new commit that left the WAL over its limit.
    cv_.wait_for(lock, s_.busy_interval, [&] {
      return stop_ || (commits_.load(std::memory_order_acquire) != seen &&
                       wal_bytes(wal_frames_.load(std::memory_order_relaxed)) > s_.wal_limit_bytes);
    });
    if (stop_) break;
    lock.unlock();
    const uint64_t c = commits_.load(std::memory_order_acquire);
    const auto now = clock::now();
    if (c != seen) {
      seen = c;
      last_commit = now;
      truncated = false;
      checkpoint(db_, SQLITE_CHECKPOINT_PASSIVE);
    } else if (!truncated && now - last_commit >= s_.idle_after) {
      truncated = checkpoint(db_, SQLITE_CHECKPOINT_TRUNCATE);
    }
    lock.lock();
  }
}

}  // namespace hearth::broker
