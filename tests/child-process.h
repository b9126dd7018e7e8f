// Child processes that die with their parent, and a scratch directory kept for a post-mortem: what
// a harness outside GoogleTest needs to run hearth's daemons (bench/broker_bench starts
// hearth-broker and hearth-node through here). No GoogleTest here: failures throw process_error.
// cluster.h's `process` and `temp_dir` are the GoogleTest-bound pair of these and could be built on
// them.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

namespace hearth::testing {

// A child could not be started, or a scratch directory made.
struct process_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A child process, killed (SIGKILL) and reaped when the handle is destroyed. It is started with
// fork and exec rather than posix_spawn so that it asks the kernel to kill it when its parent dies,
// however it dies (PR_SET_PDEATHSIG).
class child_process {
 public:
  // Starts argv[0] (a path) with the arguments; stdout and stderr appended to `log`.
  child_process(const std::vector<std::string>& argv, const std::string& log);
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  ~child_process();

  pid_t pid() const { return pid_; }
  bool running();
  // SIGTERM and a wait for it to exit; SIGKILL (by the destructor) after the timeout. Returns its
  // exit status, 128 + signal, or -1 when it did not exit in time.
  int stop(std::chrono::milliseconds timeout);
  // CPU seconds (user + system) it has used so far, from /proc.
  double cpu_seconds() const;

 private:
  void forget();
  pid_t pid_ = -1;
};

// SIGINT and SIGTERM of this process kill every live child_process first (SIGKILL), then end it
// with the same signal.
void child_processes_die_with_signals();

// A fresh directory `prefix`-XXXXXX under $TMPDIR (or /tmp), removed with its contents at
// destruction unless keep() was called or the environment variable `keep_env` is set.
class scratch_dir {
 public:
  scratch_dir(const std::string& prefix, std::string keep_env);
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  ~scratch_dir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  void keep() { keep_ = true; }

 private:
  std::string path_;
  std::string keep_env_;
  bool keep_ = false;
};

}  // namespace hearth::testing
