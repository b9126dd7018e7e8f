// For tests: a SQLite VFS that forwards everything to the default VFS and counts, per thread and
// per kind of file (main database, WAL), the xSync calls and the bytes written; it can also make
// writes to main database files fail (in WAL mode only checkpoints write them). While one exists
// it is the default VFS, so every connection opened meanwhile (the store's and its
// checkpointer's) goes through it; counting per thread tells the broker thread's syncs from the
// checkpointer's.
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <cstdint>
#include <new>

namespace hearth::broker {

class counting_vfs {
 public:
  struct counts {
    uint64_t db_syncs = 0;
    uint64_t wal_syncs = 0;
    uint64_t db_bytes_written = 0;
    uint64_t wal_bytes_written = 0;
  };

  // The calling thread's counts since it started.
  static counts& this_thread() {
    thread_local counts c;
    return c;
  }

  // While true, every write to a main database file fails with SQLITE_IOERR_WRITE.
  static std::atomic<bool>& fail_db_writes() {
    static std::atomic<bool> fail{false};
    return fail;
  }

  counting_vfs() : root_(sqlite3_vfs_find(nullptr)) {
    vfs_ = *root_;
    vfs_.zName = "hearth-counting";
    vfs_.szOsFile = static_cast<int>(sizeof(file)) + root_->szOsFile;
    vfs_.pAppData = this;
    vfs_.xOpen = &open;
    sqlite3_vfs_register(&vfs_, 1);
  }
  ~counting_vfs() { sqlite3_vfs_unregister(&vfs_); }
  counting_vfs(const counting_vfs&) = delete;
  counting_vfs& operator=(const counting_vfs&) = delete;

 private:
  // Our file, followed in the same allocation by the default VFS's file it wraps.
  struct file {
    sqlite3_file base;
    bool wal;
    bool db;
    sqlite3_file* real() { return reinterpret_cast<sqlite3_file*>(this + 1); }
  };
  static file& of(sqlite3_file* f) { return *reinterpret_cast<file*>(f); }
  static const sqlite3_io_methods& real_io(sqlite3_file* f) { return *of(f).real()->pMethods; }

  static int open(sqlite3_vfs* vfs, const char* name, sqlite3_file* f, int flags, int* out_flags) {
    auto* self = static_cast<counting_vfs*>(vfs->pAppData);
    auto* ours =
        new (f) file{{nullptr}, (flags & SQLITE_OPEN_WAL) != 0, (flags & SQLITE_OPEN_MAIN_DB) != 0};
    int rc = self->root_->xOpen(self->root_, name, ours->real(), flags, out_flags);
    // Without methods SQLite does not call xClose; the real file then has none either.
    ours->base.pMethods = ours->real()->pMethods ? &io : nullptr;
    return rc;
  }

  static int close(sqlite3_file* f) { return real_io(f).xClose(of(f).real()); }
  static int read(sqlite3_file* f, void* p, int n, sqlite3_int64 at) {
    return real_io(f).xRead(of(f).real(), p, n, at);
  }
  static int write(sqlite3_file* f, const void* p, int n, sqlite3_int64 at) {
    if (of(f).wal) this_thread().wal_bytes_written += static_cast<uint64_t>(n);
    if (of(f).db) {
      if (fail_db_writes()) return SQLITE_IOERR_WRITE;
      this_thread().db_bytes_written += static_cast<uint64_t>(n);
    }
    return real_io(f).xWrite(of(f).real(), p, n, at);
  }
  static int truncate(sqlite3_file* f, sqlite3_int64 size) {
    return real_io(f).xTruncate(of(f).real(), size);
  }
  static int sync(sqlite3_file* f, int flags) {
    if (of(f).wal) ++this_thread().wal_syncs;
    if (of(f).db) ++this_thread().db_syncs;
    return real_io(f).xSync(of(f).real(), flags);
  }
  static int file_size(sqlite3_file* f, sqlite3_int64* size) {
    return real_io(f).xFileSize(of(f).real(), size);
  }
  static int lock(sqlite3_file* f, int level) { return real_io(f).xLock(of(f).real(), level); }
  static int unlock(sqlite3_file* f, int level) { return real_io(f).xUnlock(of(f).real(), level); }
  static int check_reserved(sqlite3_file* f, int* out) {
    return real_io(f).xCheckReservedLock(of(f).real(), out);
  }
  static int file_control(sqlite3_file* f, int op, void* arg) {
    return real_io(f).xFileControl(of(f).real(), op, arg);
  }
  static int sector_size(sqlite3_file* f) { return real_io(f).xSectorSize(of(f).real()); }
  static int device_characteristics(sqlite3_file* f) {
    return real_io(f).xDeviceCharacteristics(of(f).real());
  }
  static int shm_map(sqlite3_file* f, int region, int size, int extend, void volatile** p) {
    return real_io(f).xShmMap(of(f).real(), region, size, extend, p);
  }
  static int shm_lock(sqlite3_file* f, int offset, int n, int flags) {
    return real_io(f).xShmLock(of(f).real(), offset, n, flags);
  }
  static void shm_barrier(sqlite3_file* f) { real_io(f).xShmBarrier(of(f).real()); }
  static int shm_unmap(sqlite3_file* f, int remove) {
    return real_io(f).xShmUnmap(of(f).real(), remove);
  }
  static int fetch(sqlite3_file* f, sqlite3_int64 at, int n, void** p) {
    return real_io(f).xFetch(of(f).real(), at, n, p);
  }
  static int unfetch(sqlite3_file* f, sqlite3_int64 at, void* p) {
    return real_io(f).xUnfetch(of(f).real(), at, p);
  }

  // Version 3 like the unix VFS's files, so WAL (shared memory) and mmap keep working.
  static constexpr sqlite3_io_methods io = {3,
                                            &close,
                                            &read,
                                            &write,
                                            &truncate,
                                            &sync,
                                            &file_size,
                                            &lock,
                                            &unlock,
                                            &check_reserved,
                                            &file_control,
                                            &sector_size,
                                            &device_characteristics,
                                            &shm_map,
                                            &shm_lock,
                                            &shm_barrier,
                                            &shm_unmap,
                                            &fetch,
                                            &unfetch};

  sqlite3_vfs* root_;
  sqlite3_vfs vfs_;
};

}  // namespace hearth::broker
