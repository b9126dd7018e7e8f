#include "store/sha256.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace hearth::store {

struct sha256::context {
  EVP_MD_CTX* md = nullptr;
  ~context() { EVP_MD_CTX_free(md); }
};

sha256::sha256() : ctx_(std::make_unique<context>()) {
  ctx_->md = EVP_MD_CTX_new();
  if (!ctx_->md || EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("OpenSSL cannot start a SHA-256");
}

sha256::~sha256() = default;

void sha256::update(const void* data, size_t n) {
  if (n && EVP_DigestUpdate(ctx_->md, data, n) != 1)
    throw std::runtime_error("OpenSSL's SHA-256 update failed");
}

std::string sha256::finish() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(ctx_->md, md, &n) != 1 || n != 32)
    throw std::runtime_error("OpenSSL's SHA-256 final failed");
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(sha256_prefix);
  for (unsigned i = 0; i < n; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

std::string sha256_bytes(std::string_view bytes) {
  sha256 h;
  h.update(bytes.data(), bytes.size());
  return h.finish();
}

void sha256_file_update(sha256& h, const std::filesystem::path& file, uint64_t offset) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "opening " + file.string());
  // Tells the kernel to read ahead: hashing is one sequential pass.
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::vector<char> buf(size_t(4) << 20);
  for (;;) {
    ssize_t n = ::pread(fd, buf.data(), buf.size(), off_t(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      throw std::system_error(e, std::generic_category(), "reading " + file.string());
    }
    if (n == 0) break;
    h.update(buf.data(), size_t(n));
    offset += uint64_t(n);
  }
  ::close(fd);
}

std::string sha256_file(const std::filesystem::path& file) {
  sha256 h;
  sha256_file_update(h, file, 0);
  return h.finish();
}

bool sha256_digest_valid(std::string_view digest) {
  if (digest.size() != sha256_prefix.size() + 64 || !digest.starts_with(sha256_prefix))
    return false;
  for (char c : digest.substr(sha256_prefix.size()))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string_view sha256_digest_hex(std::string_view digest) {
  return digest.substr(sha256_prefix.size());
}

}  // namespace hearth::store
