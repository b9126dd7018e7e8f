#include "broker/wal-checkpointer.h"

#include <spdlog/spdlog.h>

namespace hearth::broker {

wal_checkpointer::wal_checkpointer(const std::string& path, std::chrono::milliseconds interval)
    : interval_(interval) {
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    spdlog::warn("WAL checkpoints stay on the main thread: cannot open {}: {}", path,
                 db_ ? sqlite3_errmsg(db_) : "out of memory");
    sqlite3_close(db_);
    db_ = nullptr;
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

void wal_checkpointer::loop() {
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, interval_, [this] { return stop_; })) {
    int log_frames = 0, done_frames = 0;
    const int rc = sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log_frames,
                                             &done_frames);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
      spdlog::warn("WAL checkpoint failed: {}", sqlite3_errmsg(db_));
    }
  }
}

}  // namespace hearth::broker
