// Keeps the job store's WAL bounded without putting checkpoints inside the broker's commits.
//
// SQLite's automatic checkpoint runs in the commit that crosses its threshold: it copies pages
// into the database and fsyncs it, milliseconds added to every reply of that turn. So the
// broker's connection turns it off and this thread checkpoints on a connection of its own:
// - while the broker commits, a passive checkpoint every `busy_interval` (passive checkpoints
//   never wait for the writer); a WAL over `wal_limit_bytes` is checkpointed again at once;
// - when no commit has come for `idle_after`, one TRUNCATE checkpoint sets the -wal file back
//   to 0 bytes (it waits for the writer at most `truncate_busy`, so the broker is never held
//   up for long).
// After a complete checkpoint the broker's next commit restarts the WAL from its beginning, and
// journal_size_limit cuts the file back to wal_limit_bytes there.
//
// The backstop: a broker that commits without pause leaves no moment in which the WAL is fully
// checkpointed, so it never restarts from its beginning. When its WAL holds 2 * wal_limit_bytes,
// a commit runs one passive checkpoint on the broker's own connection (blocking the broker for
// the frames this thread has not copied yet, as SQLite's automatic checkpoint would), unless this
// thread's checkpoint is under way: waiting for that one would hold the broker for its whole copy
// and fsync, so the broker tries again at its next commit. Past 4 * wal_limit_bytes it waits.
// The next commit after a complete checkpoint restarts the WAL. So the -wal file never grows past
// 4 * wal_limit_bytes plus the transaction that crossed it.
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "broker/log-limiter.h"

namespace hearth::broker {

class wal_checkpointer {
 public:
  struct settings {
    bool full_sync = true;  // synchronous=FULL on its connection, as on the broker's
    uint64_t wal_limit_bytes = 64 << 20;
    std::chrono::milliseconds busy_interval{100};
    std::chrono::milliseconds idle_after{1000};
    std::chrono::milliseconds truncate_busy{20};
  };
  struct figures {
    uint64_t checkpoints = 0;
    uint64_t failures = 0;  // busy excluded
    std::string last_error;
  };

  // Opens its own connection to `path` (with the default VFS, as the store's) and starts the
  // thread. If the connection cannot be opened it logs why and counts a failure; only the
  // backstop then checkpoints.
  wal_checkpointer(const std::string& path, const settings& s);
  ~wal_checkpointer();
  wal_checkpointer(const wal_checkpointer&) = delete;
  wal_checkpointer& operator=(const wal_checkpointer&) = delete;

  // Called by the store after each commit of `broker_db` (sqlite3_wal_hook, on the broker's
  // thread) with the frames its WAL now holds; runs the backstop there when needed.
  void committed(sqlite3* broker_db, int wal_frames);
  figures stats() const;

 private:
  void loop();
  // Bytes of a WAL holding `frames` frames (pages of page_size plus their headers).
  uint64_t wal_bytes(int frames) const;
  // Runs one checkpoint on `db`; counts it or its failure. False when it could not run (busy, or
  // with `wait` false another checkpoint under way).
  bool checkpoint(sqlite3* db, int mode, bool wait = true);

  settings s_;
  uint64_t page_size_ = 4096;
  sqlite3* db_ = nullptr;

  std::atomic<uint64_t> commits_{0};
  std::atomic<int> wal_frames_{0};

  std::mutex run_mu_;  // one checkpoint at a time: this thread's or the backstop's

  mutable std::mutex stats_mu_;
  figures stats_;
  log_limiter log_{1.0 / 60, 3};  // a failing disk fails every 100 ms: a line a minute

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hearth::broker
