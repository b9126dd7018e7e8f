#!/usr/bin/env bash
# Measures `hearth bench` (pp128, tg64, 2 threads by default) on the models of the test data,
# then the broker end to end (broker_bench: jobs/s, tokens/s relayed, token latency).
# Reference figures do not exist for these model files, so the engine part prints our figures
# only; the comparison with ../shared/BENCHMARKS.md (llama.cpp on TinyLlama-1.1B shapes, with the
# machine's read bandwidth as the ceiling) is bench/cpu-speed.sh. The broker part prints ours
# beside the targets.
# Usage: bench/run.sh [threads]             both
#        bench/run.sh broker [flags...]     only broker_bench, flags passed on (--jobs, --json ...)
# HEARTH_BUILD_DIR picks the build folder (default build/release).
# The whole script is one compound command, read before any of it runs: bash reads a script as it
# goes, so editing this file during a run would change the run (as bench/cpu-speed.sh says).
{
set -euo pipefail
cd "$(dirname "$0")/.."
build=${HEARTH_BUILD_DIR:-build/release}
broker_bench=$build/bench/broker_bench

run_broker() {
  [ -x "$broker_bench" ] || {
    echo "build first: cmake --preset release && cmake --build --preset release --target broker_bench" >&2
    exit 1
  }
  "$broker_bench" "$@"
}

if [ "${1:-}" = broker ]; then
  shift
  run_broker "$@"
  exit
fi

threads=${1:-2}
testdata=${HEARTH_TESTDATA:-../shared/testdata}
hearth=$build/tools/hearth
[ -x "$hearth" ] || { echo "build first: cmake --preset release && cmake --build --preset release" >&2; exit 1; }

echo "| model | type | size | backend | threads | test | t/s |"
echo "| --- | --- | ---: | --- | ---: | --- | ---: |"
for f in "$testdata/models/stories260K.gguf" \
         "$testdata"/models/synthetic/synthetic-llama-a.{f32,f16,bf16,q8_0}.gguf; do
  "$hearth" bench -m "$f" -p 128 -n 64 -r 3 -t "$threads" | tail -n 2
done

echo
run_broker
exit
}
