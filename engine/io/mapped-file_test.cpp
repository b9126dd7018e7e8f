// A mapped file truncated under the process: with mapped_file_survive_truncation() the reads past
// its new end find zeros and are counted, instead of killing the process with SIGBUS.
#include "engine/io/mapped-file.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace hearth {
namespace {

namespace fs = std::filesystem;

TEST(MappedFile, ReadsPastATruncatedEndFindZerosInsteadOfSigbus) {
  mapped_file_survive_truncation();
  const fs::path path = fs::temp_directory_path() / ("hearth_mapped_" + std::to_string(getpid()));
  const size_t size = 256 * 1024;
  {
    std::ofstream out(path, std::ios::binary);
    const std::string bytes(size, '\x5a');
    out.write(bytes.data(), std::streamsize(bytes.size()));
  }
  auto m = mapped_file::open(path.string());
  ASSERT_TRUE(m.ok()) << m.message();
  const auto bytes = m.value()->bytes();
  ASSERT_EQ(bytes.size(), size);
  EXPECT_EQ(bytes[size - 1], 0x5a);

  const uint64_t faults = mapped_file_faults();
  fs::resize_file(path, 8192);  // as `truncate` or the first step of a `cp` over it
  uint64_t sum = 0;
  for (size_t i = 0; i < size; i += 512) sum += bytes[i];
  EXPECT_EQ(sum, 0x5au * (8192 / 512));  // the first two pages are still the file's
  EXPECT_EQ(bytes[size - 1], 0);
  EXPECT_GT(mapped_file_faults(), faults);
  fs::remove(path);
}

TEST(MappedFile, AFaultOutsideEveryMappedFileStillKillsTheProcess) {
  mapped_file_survive_truncation();
  EXPECT_EXIT(
      {
        const fs::path path =
            fs::temp_directory_path() / ("hearth_unmapped_" + std::to_string(getpid()));
        { std::ofstream(path, std::ios::binary) << std::string(65536, 'x'); }
        FILE* f = std::fopen(path.c_str(), "r");
        // Not through mapped_file: the handler passes the fault on to the default action.
        void* p = mmap(nullptr, 65536, PROT_READ, MAP_SHARED, fileno(f), 0);
        fs::resize_file(path, 0);
        fs::remove(path);
        volatile uint8_t b = static_cast<const uint8_t*>(p)[4096];
        (void)b;
        std::exit(0);
      },
      // Killed by SIGBUS; under AddressSanitizer its own handler reports it and exits non-zero.
      [](int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }, "");
}

}  // namespace
}  // namespace hearth
