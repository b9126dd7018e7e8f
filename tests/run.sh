#!/usr/bin/env bash
# The test command (README, .ci/run): installs dependencies, builds, and runs every test.
#   1. release build, all ctest labels (unit, model, vulkan, cuda; without an NVIDIA GPU the cuda
#      tests report themselves skipped)
#      and the Debian packages installed and run in a clean root (tests/package-install.sh)
#   2. the same tests under AddressSanitizer + UBSan
#   3. the libFuzzer targets for a bounded time (HEARTH_FUZZ_SECONDS, default 30 each; the 30
#      per-message wire decoders HEARTH_WIRE_FUZZ_SECONDS, default 5 each)
#   4. arm64: the aarch64 preset cross-built, the engine's unit tests, conformance and a few
#      model tests under qemu-aarch64 (tests/aarch64.sh; HEARTH_SKIP_AARCH64=1 leaves it out)
# Test data comes from HEARTH_TESTDATA (default ../shared/testdata).
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc)
# Tests at once: twice the cores. About half of the suite's time is tests waiting on sockets and
# timers (brokers, nodes, gateways talking), not computing: on 2 cores the release tests used 337
# CPU-seconds in 296 s at 2 at once, and took 226 s at 4; the sanitizer tests 480 s at 4 instead
# of 600 s at 2, with the cores then busy throughout.
test_jobs=$((2 * jobs))
deploy/install-deps.sh

# The release build is configured exactly as the README's first command (deploy/quickstart.sh)
# configures it, so CI builds it once. HEARTH_CUDA_ARCHITECTURES picks other CUDA architectures
# (e.g. 80 for a short local run).
cmake --preset release ${HEARTH_CUDA_ARCHITECTURES:+-DHEARTH_CUDA_ARCHITECTURES="$HEARTH_CUDA_ARCHITECTURES"}
cmake --build --preset release -j "$jobs"
echo "tests/run.sh: release build done at ${SECONDS} s"
ctest --preset release -j "$test_jobs"
echo "tests/run.sh: release tests done at ${SECONDS} s"
# The Debian packages of that build, installed and run in a clean Debian root (needs root and the
# mirror; says "skipped: why" and goes on without them).
rc=0
tests/package-install.sh build/release || rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || exit "$rc"
echo "tests/run.sh: package test done at ${SECONDS} s"

# The asan preset compiles the engine and test code at -O1 and the rest (daemons, CLI, gateway)
# at -O0, all with -g1 (line tables: enough for the sanitizers' stack traces). At
# RelWithDebInfo's -O2 -g this build took 4,960 CPU-seconds on a clean 2-core machine, the
# largest step of CI by far; at -O1 -g1 throughout 2,319 to 2,376 (20 minutes); split as above
# 1,775 (14 minutes), while its tests took 636 s instead of 576 (cmake/hearth.cmake). It is also a
# unity build (CMAKE_UNITY_BUILD: each target's sources compiled in batches of 8, so the heavy
# headers are parsed and their inline code generated once per batch): 1,533 CPU-seconds, and 651 s
# in a cold CI run instead of 840; its tests took 602 s instead of 627. The release build is
# not, so that it still catches a source that leans on another's includes.
cmake --preset asan
cmake --build --preset asan -j "$jobs"
echo "tests/run.sh: asan build done at ${SECONDS} s"
# Not the checks of the documents against the binaries' --help (label docs): the release run
# made them, and under the sanitizers doc_flags alone took 239 s of CI's 1,043 (2026-12-03).
ctest --preset asan -j "$test_jobs" -LE '^docs$'
echo "tests/run.sh: asan tests done at ${SECONDS} s"

# The fuzz preset builds at -O1 -g1 as a unity build (CMakePresets.json): a cold build of the
# fuzzers took 190 s instead of 270 on this 2-core machine (2026-12-03).
# 30 s per fuzzer (17 of them, two at once: 4.5 minutes), not 60: CI of 2026-12-03 had reached
# 4,003 s at the end of the sanitizer tests, and the fuzz (about 20 minutes at 60 s) and arm64
# (about 8) stages after it would have passed the 90 minutes CI allows. A longer run:
# HEARTH_FUZZ_SECONDS (fuzz/README.md).
cmake --preset fuzz -DHEARTH_FUZZ_SECONDS="${HEARTH_FUZZ_SECONDS:-30}" \
    -DHEARTH_WIRE_FUZZ_SECONDS="${HEARTH_WIRE_FUZZ_SECONDS:-5}"
cmake --build --preset fuzz -j "$jobs" --target fuzzers
# Each fuzzer is one process on one core: run as many at once as there are cores.
ctest --preset fuzz -j "$jobs"
echo "tests/run.sh: fuzz done at ${SECONDS} s"

if [ "${HEARTH_SKIP_AARCH64:-0}" = 0 ]; then
  tests/aarch64.sh
  echo "tests/run.sh: aarch64 done at ${SECONDS} s"
fi
