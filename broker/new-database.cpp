#include "broker/new-database.h"

#include <filesystem>
#include <system_error>

namespace hearth::broker {

new_database::new_database(std::string path) : path_(std::move(path)) {
  std::error_code ec;
  // An error (a folder that cannot be read) counts as existing: never remove what may be there.
  existed_ = std::filesystem::exists(path_, ec) || ec;
}

new_database::~new_database() {
  if (existed_ || keep_) return;
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal", ".lock"}) {
    std::filesystem::remove(path_ + suffix, ec);
  }
}

}  // namespace hearth::broker
