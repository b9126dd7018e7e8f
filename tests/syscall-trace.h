// A program's system calls as strace records them (strace -f -ttt -T -o FILE), for tests that
// check what a process does at the system-call level: the broker's fsyncs between a request's
// arrival and its reply (tests/durability_test.cpp).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace hearth::testing {

// One system call: the thread that made it, its name, start and end (seconds of the wall
// clock, as -ttt and -T give them) and its result.
struct traced_call {
  long tid = 0;  // a process's first thread has the process's pid
  std::string name;
  double start = 0, end = 0;
  long result = -1;
};

// The calls of a `strace -f -ttt -T` output file, by start time. A call that another thread
// interrupted is written in two lines ("<unfinished ...>", then "<... name resumed>"), joined
// here by thread id. Signals and exits are left out.
std::vector<traced_call> read_trace(const std::string& path);

// The first child process of `parent`, or 0: the program that strace (the parent) runs, which
// a test stops itself so that strace exits when it does.
pid_t first_child(pid_t parent);

}  // namespace hearth::testing
