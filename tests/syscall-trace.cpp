#include "tests/syscall-trace.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace hearth::testing {

std::vector<traced_call> read_trace(const std::string& path) {
  std::vector<traced_call> calls;
  std::map<long, traced_call> unfinished;  // by thread id
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) {
    std::istringstream in(line);
    long tid = 0;
    double ts = 0;
    if (!(in >> tid >> ts)) continue;
    std::string rest;
    std::getline(in, rest);
    rest.erase(0, rest.find_first_not_of(' '));
    traced_call c;
    if (rest.rfind("<... ", 0) == 0) {
      const auto name_end = rest.find(' ', 5);
      auto it = unfinished.find(tid);
      if (it == unfinished.end() || name_end == std::string::npos) continue;
      c = it->second;
      unfinished.erase(it);
    } else {
      const auto paren = rest.find('(');
      if (paren == std::string::npos) continue;  // signals, exits
      c.tid = tid;
      c.name = rest.substr(0, paren);
      c.start = ts;
      if (rest.find("<unfinished ...>") != std::string::npos) {
        unfinished[tid] = c;
        continue;
      }
    }
    // "... = RESULT <DURATION>"
    const auto eq = rest.rfind(" = ");
    const auto lt = rest.rfind('<');
    if (eq == std::string::npos || lt == std::string::npos || lt < eq) continue;
    c.result = std::strtol(rest.c_str() + eq + 3, nullptr, 10);
    c.end = c.start + std::strtod(rest.c_str() + lt + 1, nullptr);
    calls.push_back(c);
  }
  std::sort(calls.begin(), calls.end(), [](auto& a, auto& b) { return a.start < b.start; });
  return calls;
}

// From /proc/PID/stat: "pid (comm) state ppid ...".
pid_t first_child(pid_t parent) {
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::ifstream stat(e.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    std::string state;
    pid_t ppid = 0;
    if (rest >> state >> ppid && ppid == parent) return pid_t(std::stol(e.path().filename()));
  }
  return 0;
}

}  // namespace hearth::testing
