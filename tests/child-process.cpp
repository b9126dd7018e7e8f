#include "tests/child-process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

extern char** environ;

namespace hearth::testing {
namespace {

// Pids of live children, for the signal handler: a SIGINT/SIGTERM of the parent kills them too.
constexpr int k_max_children = 8;
std::atomic<pid_t> g_children[k_max_children];

void kill_children_and_exit(int sig) {
  for (auto& p : g_children) {
    const pid_t pid = p.load();
    if (pid > 0) ::kill(pid, SIGKILL);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

child_process::child_process(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  if (access(args[0], X_OK) != 0) {
    throw process_error("cannot run " + argv[0] + ": " + std::strerror(errno));
  }
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) throw process_error("cannot start " + argv[0] + ": fork: " + std::strerror(errno));
  if (pid_ == 0) {
    // Only async-signal-safe calls between fork and exec.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execve(args[0], args.data(), environ);
    _exit(127);
  }
  for (auto& p : g_children) {
    pid_t expected = 0;
    if (p.compare_exchange_strong(expected, pid_)) break;
  }
}

child_process::~child_process() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    forget();
  }
}

bool child_process::running() {
  if (pid_ <= 0) return false;
  int st = 0;
  if (waitpid(pid_, &st, WNOHANG) == pid_) {
    forget();
    pid_ = -1;
    return false;
  }
  return true;
}

int child_process::stop(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      forget();
      pid_ = -1;
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

double child_process::cpu_seconds() const {
  std::ifstream f("/proc/" + std::to_string(pid_) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto paren = s.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream in(s.substr(paren + 2));
  std::string field;
  double utime = 0, stime = 0;
  // Fields 3.. after the name; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  return (utime + stime) / double(sysconf(_SC_CLK_TCK));
}

void child_process::forget() {
  for (auto& p : g_children) {
    pid_t expected = pid_;
    if (p.compare_exchange_strong(expected, 0)) break;
  }
}

void child_processes_die_with_signals() {
  ::signal(SIGINT, kill_children_and_exit);
  ::signal(SIGTERM, kill_children_and_exit);
}

scratch_dir::scratch_dir(const std::string& prefix, std::string keep_env)
    : keep_env_(std::move(keep_env)) {
  const char* t = std::getenv("TMPDIR");
  std::string tmpl = std::string(t && *t ? t : "/tmp") + "/" + prefix + "-XXXXXX";
  if (!mkdtemp(tmpl.data())) throw process_error("cannot create a temporary directory: " + tmpl);
  path_ = tmpl;
}

scratch_dir::~scratch_dir() {
  std::error_code ec;
  if (!keep_ && !std::getenv(keep_env_.c_str())) std::filesystem::remove_all(path_, ec);
}

}  // namespace hearth::testing
