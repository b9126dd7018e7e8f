#!/usr/bin/env bash
# The README's first command: installs dependencies, builds hearth, and runs the main job.
# Until the broker lands, the main job is a local generation with the stories260K model,
# streamed to the terminal.
set -euo pipefail
cd "$(dirname "$0")/.."

deploy/install-deps.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)"

testdata=${HEARTH_TESTDATA:-../shared/testdata}
build/release/tools/hearth run -m "$testdata/models/stories260K.gguf" -p "Once upon a time" -n 64 --temp 0
