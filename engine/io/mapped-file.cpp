#include "engine/io/mapped-file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

namespace hearth {
namespace {

// The mappings the SIGBUS handler may repair: a fixed table of atomics, as a signal handler can
// neither lock nor allocate. A mapping that finds no free slot is still served, unprotected.
struct mapped_region {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};  // page-rounded
};
constexpr size_t k_mapped_regions = 4096;
std::array<mapped_region, k_mapped_regions> g_mapped_regions;
std::atomic<uint64_t> g_mapped_faults{0};
struct sigaction g_sigbus_before {};
uintptr_t g_page_bytes = 4096;  // set before the handler is installed (sysconf is not signal-safe)

int mapped_region_add(uintptr_t begin, uintptr_t end) {
  for (size_t i = 0; i < g_mapped_regions.size(); ++i) {
    uintptr_t free_slot = 0;
    if (g_mapped_regions[i].begin.compare_exchange_strong(free_slot, begin)) {
      g_mapped_regions[i].end.store(end);
      return int(i);
    }
  }
  return -1;
}

void mapped_region_remove(int i) {
  g_mapped_regions[size_t(i)].end.store(0);
  g_mapped_regions[size_t(i)].begin.store(0);
}

void mapped_file_on_sigbus(int sig, siginfo_t* info, void* uctx) {
  const auto addr = uintptr_t(info->si_addr);
  const uintptr_t page = g_page_bytes;
  for (const auto& r : g_mapped_regions) {
    const uintptr_t begin = r.begin.load();
    const uintptr_t end = r.end.load();
    if (begin == 0 || addr < begin || addr >= end) continue;
    // The file ends before `addr`, so every page from there on is past its end: zero pages
    // instead, in one call (each page would fault on its own otherwise).
    const uintptr_t from = addr & ~(page - 1);
    void* p = mmap(reinterpret_cast<void*>(from), end - from, PROT_READ,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p != MAP_FAILED) {
      g_mapped_faults.fetch_add(1);
      return;  // the read is retried and finds zeros
    }
    break;
  }
  if ((g_sigbus_before.sa_flags & SA_SIGINFO) && g_sigbus_before.sa_sigaction) {
    g_sigbus_before.sa_sigaction(sig, info, uctx);
  } else if (g_sigbus_before.sa_handler != SIG_DFL && g_sigbus_before.sa_handler != SIG_IGN) {
    g_sigbus_before.sa_handler(sig);
  } else {
    // Not ours: the default action, when the faulting instruction runs again.
    signal(SIGBUS, SIG_DFL);
  }
}

}  // namespace

result<std::shared_ptr<const mapped_file>> mapped_file::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return error{"cannot open " + path + ": " + std::strerror(errno)};
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return error{path + " is not a regular file"};
  }
  std::shared_ptr<mapped_file> m(new mapped_file());
  m->size_ = size_t(st.st_size);
  if (m->size_ > 0) {
    void* addr = mmap(nullptr, m->size_, PROT_READ, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      m->size_ = 0;
      return error{"cannot map " + path + ": " + std::strerror(e)};
    }
    m->addr_ = addr;
    const auto page = size_t(sysconf(_SC_PAGESIZE));
    const auto begin = uintptr_t(addr);
    m->region_ = mapped_region_add(begin, begin + (m->size_ + page - 1) / page * page);
  }
  ::close(fd);
  return std::shared_ptr<const mapped_file>(std::move(m));
}

mapped_file::~mapped_file() {
  if (region_ >= 0) mapped_region_remove(region_);
  if (addr_ && size_) munmap(addr_, size_);
}

void mapped_file_survive_truncation() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_page_bytes = uintptr_t(sysconf(_SC_PAGESIZE));
    sigaction(SIGBUS, nullptr, &g_sigbus_before);
    struct sigaction sa {};
    sa.sa_sigaction = mapped_file_on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, nullptr);
  });
}

uint64_t mapped_file_faults() {
  return g_mapped_faults.load();
}

}  // namespace hearth
