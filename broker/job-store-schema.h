// The job store's layout on disk: the tables of schema version 8, and the steps that upgrade a
// file of an older version in place.
#pragma once

#include <sqlite3.h>

#include <string>

#include "broker/job-store.h"

namespace hearth::broker {

// Checks that the file is empty or a hearth database of a version this broker reads, sets the
// connection up (WAL, synchronous, journal size limit), creates the tables of a new file and
// migrates an older one. Returns "" or what is wrong; throws store_error when SQLite fails.
std::string store_schema_prepare(sqlite3* db, const store_options& options);

}  // namespace hearth::broker
