// Locating ../shared/testdata from tests: the HEARTH_TESTDATA environment variable, or the
// default next to the checkout. A missing file fails the test with its full path named.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hearth::testing {

// Root folder of the test data (no trailing slash).
std::string testdata_root();

// Full path of `relative` under the root. Fails the calling test (ADD_FAILURE naming the path)
// and returns "" when the file does not exist; callers then stop with ASSERT_FALSE(p.empty()).
std::string testdata_path(const std::string& relative);

// Root folder of the test data generated from the shared data in the build tree (the
// synthetic2 types that ../shared holds only as SHA256SUMS, made by `hearth quantize` in the
// synthetic2_models fixture); HEARTH_GENERATED_TESTDATA overrides it (tests run from a copy of the
// build elsewhere).
std::string generated_testdata_root();

// A model file named relative to the test data root: from the shared folder when it is there,
// else from the generated folder; fails the test naming both when neither has it.
std::string model_path(const std::string& relative);

// Whole file as bytes / text; fails the test naming the path when it cannot be read.
std::vector<uint8_t> read_file_bytes(const std::string& path);
std::string read_file_text(const std::string& path);

// Writes `text` to the file `name` in GoogleTest's temporary folder and returns its path (a
// settings file a test loads).
std::string write_temp_file(const std::string& name, const std::string& text);

// Little-endian float32 file -> floats.
std::vector<float> read_f32_file(const std::string& path);

// Ends a test binary that cannot run on this machine at all (no GPU for a cuda test): prints
// the reason and exits with 77, which ctest reports as skipped (cmake/hearth.cmake).
[[noreturn]] void skip_all(const std::string& reason);

}  // namespace hearth::testing
