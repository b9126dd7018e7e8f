// libFuzzer target for manifest_from_json (store/manifest.cpp): a model store's manifest file,
// read back from disk (another process, a damaged disk or a hand edit may have written it). Every
// input gives a manifest or an error; a manifest's names and paths are ones the store may turn
// into paths (no "..", nothing absolute), its digest is its files', and it survives a round trip.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz-check.h"
#include "store/manifest.h"
#include "store/sha256.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hearth::store;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = manifest_from_json(text);
  if (!m) {
    FUZZ_CHECK(!m.message().empty());
    return 0;
  }
  FUZZ_CHECK(model_name_valid(m->name));
  FUZZ_CHECK(!m->files.empty());
  for (const auto& f : m->files) {
    FUZZ_CHECK(model_file_path_valid(f.path));
    FUZZ_CHECK(f.path[0] != '/');
    FUZZ_CHECK(sha256_digest_valid(f.digest));
  }
  FUZZ_CHECK(m->digest == model_digest(m->files));
  auto again = manifest_from_json(manifest_to_json(*m).dump());
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->name == m->name && again->files == m->files && again->digest == m->digest);
  return 0;
}
