#!/usr/bin/env bash
# Measures `hearth bench` (pp128, tg64, 2 threads by default) on the models of the test data.
# Reference figures for the same files do not exist: ../shared/BENCHMARKS.md measures
# TinyLlama-1.1B shapes, which need the model maker of a later issue; until then this prints our
# figures only. Usage: bench/run.sh [threads]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
testdata=${HEARTH_TESTDATA:-../shared/testdata}
hearth=build/release/tools/hearth
[ -x "$hearth" ] || { echo "build first: cmake --preset release && cmake --build --preset release" >&2; exit 1; }

echo "| model | type | size | backend | threads | test | t/s |"
echo "| --- | --- | ---: | --- | ---: | --- | ---: |"
for f in "$testdata/models/stories260K.gguf" \
         "$testdata"/models/synthetic/synthetic-llama-a.{f32,f16,bf16,q8_0}.gguf; do
  "$hearth" bench -m "$f" -p 128 -n 64 -r 3 -t "$threads" | tail -n 2
done
