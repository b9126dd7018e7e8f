// Moves SQLite's WAL checkpoints off the broker's event loop. With automatic checkpoints the
// commit that crosses the WAL threshold copies pages into the database and fsyncs it — several
// milliseconds, added to the latency of every reply and token relayed in that turn. Instead the
// broker's connection disables them and this thread runs passive checkpoints on a connection of
// its own; passive checkpoints never block the writer.
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace hearth::broker {

class wal_checkpointer {
 public:
  // Opens its own connection to `path` and starts checkpointing every `interval`. If the
  // connection cannot be opened it does nothing (SQLite then only checkpoints at close).
  wal_checkpointer(const std::string& path, std::chrono::milliseconds interval);
  ~wal_checkpointer();
  wal_checkpointer(const wal_checkpointer&) = delete;
  wal_checkpointer& operator=(const wal_checkpointer&) = delete;

 private:
  void loop();

  sqlite3* db_ = nullptr;
  std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hearth::broker
