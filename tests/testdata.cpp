#include "tests/testdata.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace hearth::testing {

std::string testdata_root() {
  const char* env = std::getenv("HEARTH_TESTDATA");
  return env && *env ? std::string(env) : std::string(HEARTH_DEFAULT_TESTDATA);
}

std::string testdata_path(const std::string& relative) {
  const std::string p = testdata_root() + "/" + relative;
  if (!std::filesystem::exists(p)) {
    ADD_FAILURE() << "test data file missing: " << p
                  << " (set HEARTH_TESTDATA to the shared testdata folder)";
    return "";
  }
  return p;
}

std::string generated_testdata_root() {
  const char* env = std::getenv("HEARTH_GENERATED_TESTDATA");
  return env && *env ? std::string(env) : std::string(HEARTH_GENERATED_TESTDATA);
}

std::string model_path(const std::string& relative) {
  const std::string shared = testdata_root() + "/" + relative;
  if (std::filesystem::exists(shared)) return shared;
  const std::string generated = generated_testdata_root() + "/" + relative;
  if (std::filesystem::exists(generated)) return generated;
  ADD_FAILURE() << "model file missing: neither " << shared << " nor " << generated
                << " exists (the generated ones come from the synthetic2_models test)";
  return "";
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return {};
  }
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string read_file_text(const std::string& path) {
  auto bytes = read_file_bytes(path);
  return {bytes.begin(), bytes.end()};
}

std::string write_temp_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

std::vector<float> read_f32_file(const std::string& path) {
  auto bytes = read_file_bytes(path);
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

void skip_all(const std::string& reason) {
  std::fprintf(stdout, "SKIPPED: %s\n", reason.c_str());
  std::fflush(stdout);
  std::exit(77);
}

}  // namespace hearth::testing
