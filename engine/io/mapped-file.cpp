#include "engine/io/mapped-file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hearth {

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
  }
  ::close(fd);
  return std::shared_ptr<const mapped_file>(std::move(m));
}

mapped_file::~mapped_file() {
  if (addr_ && size_) munmap(addr_, size_);
}

}  // namespace hearth
