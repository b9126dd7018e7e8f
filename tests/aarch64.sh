#!/usr/bin/env bash
# The arm64 step of tests/run.sh: cross-builds the aarch64 preset (cmake/aarch64-linux-gnu.cmake)
# and runs a subset of the tests under qemu-aarch64's user-mode emulation, which fits CI's time:
# the engine's unit tests (the kernels: NEON with SDOT, NEON without it, portable; the thread
# pool, tokenizers, GGUF), logits conformance on every model file with NEON+SDOT, plain NEON and
# the portable kernels, the golden generations, the tokenizer vectors and chat tokens, model load
# errors and the named intermediates (eval_dump). Only the targets these tests need are built:
# about 5 minutes on 2 cores (2.5 build, 2.5 tests). Test data comes from HEARTH_TESTDATA, as for run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc)
start=$SECONDS
deploy/install-deps-aarch64.sh

# The test binaries built, and the ctest names run (their environment variants included:
# engine_vec_dot_neon is engine_vec_dot with HEARTH_CPU_NO_DOTPROD=1). Tests that start other
# hearth binaries themselves (the CLI, broker and node tests, quantize, mkmodel) or inspect them
# from a shell script (doc_flags, no_gpu_libraries) are left out: those binaries are arm64 and
# only ctest's own commands go through the emulator.
# engine_unit_tests is every engine/**/*_test.cpp (cmake/hearth.cmake), so a new one is never left
# unbuilt while its test runs.
targets=(engine_unit_tests conformance generation tokenizer_vectors chat_tokens model_errors eval_dump)
tests='^(engine_.*|conformance|conformance_portable|conformance_neon|generation|tokenizer_vectors|chat_tokens|model_errors|eval_dump)$'

cmake --preset aarch64
cmake --build --preset aarch64 -j "$jobs" --target "${targets[@]}"
echo "tests/aarch64.sh: aarch64 build done in $((SECONDS - start)) s"
ctest --preset aarch64 -j "$jobs" -R "$tests"
echo "tests/aarch64.sh: aarch64 tests done in $((SECONDS - start)) s"
