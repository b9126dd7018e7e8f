#!/usr/bin/env bash
# The test command (README, .ci/run): installs dependencies, builds, and runs every test.
#   1. release build, all ctest labels (unit, model; cuda tests report themselves skipped)
#   2. the same tests under AddressSanitizer + UBSan
#   3. the libFuzzer targets for a bounded time (HEARTH_FUZZ_SECONDS, default 60 each)
# Test data comes from HEARTH_TESTDATA (default ../shared/testdata).
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc)
deploy/install-deps.sh

cmake --preset release
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"

cmake --preset asan
cmake --build --preset asan -j "$jobs"
ctest --preset asan -j "$jobs"

cmake --preset fuzz -DHEARTH_FUZZ_SECONDS="${HEARTH_FUZZ_SECONDS:-60}"
cmake --build --preset fuzz -j "$jobs"
ctest --preset fuzz
