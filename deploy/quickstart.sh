#!/usr/bin/env bash
# The README's first command: installs dependencies, builds hearth, starts a broker, a node and the
# OpenAI HTTP API with its web dashboard on this machine (`hearth up`, serving the stories260K
# model pulled into a model store), submits a job and streams the answer back through the broker, shows the job in the
# history and the Prometheus metrics, and stops the service again.
set -euo pipefail
cd "$(dirname "$0")/.."

# Only what building and running hearth needs (not the test tools: tests/run.sh installs those),
# and only the programs (not the tests and benchmarks, which tests/run.sh builds in the same
# folder): on a 2-core machine the whole build and every test tool took 19 minutes. The programs
# are 343 of the 559 build steps: from a clean folder 874 CPU-seconds here (user + sys), about
# half of the whole build's (estimated from its steps); the build set is 50 packages (31 MiB) beyond what a machine with
# g++, cmake, GoogleTest and Node.js has, the test set 171 more (184 MiB, Chromium and clang).
deploy/install-deps.sh --build
cmake --preset release
# The CLI, the daemons, the GPU backend modules this machine can use and the dashboard (built
# into hearth-gateway). The CUDA module only where an NVIDIA driver is loaded: nvcc alone (a CI or
# build machine) makes it buildable but not usable here, and its kernels are about a tenth of the
# build (`cmake --build --preset release --target hearth-cuda` builds it later; tests/run.sh does).
targets=(hearth hearth-broker hearth-node hearth-gateway)
known=$(cmake --build --preset release --target help)
wanted=(hearth-vulkan)
if [ -e /dev/nvidiactl ] || [ -e /proc/driver/nvidia/version ]; then wanted+=(hearth-cuda); fi
for module in "${wanted[@]}"; do
  if grep -q "^$module:" <<<"$known"; then targets+=("$module"); fi
done
cmake --build --preset release -j "$(nproc)" --target "${targets[@]}"

hearth=build/release/tools/hearth
testdata=${HEARTH_TESTDATA:-../shared/testdata}
work=$(mktemp -d)
# A model comes into the model store with hearth pull (from Hugging Face, Ollama's registry or a
# URL on a machine with internet; here the test model's file, which pull links instead of copying).
store=$work/store
"$hearth" pull "$(realpath "$testdata/models/stories260K.gguf")" --store "$store"
port=${HEARTH_QUICKSTART_PORT:-5555}
export HEARTH_BROKER=tcp://127.0.0.1:$port

http=127.0.0.1:${HEARTH_QUICKSTART_HTTP_PORT:-8080}
"$hearth" up --store "$store" --bind "$HEARTH_BROKER" --db "$work/hearth.db" \
  --http "$http" 2>"$work/up.log" &
up=$!
trap 'kill $up 2>/dev/null; wait $up 2>/dev/null; rm -rf "$work"' EXIT

# The node registers within a moment; until then the model is unknown to the broker.
for _ in $(seq 100); do
  "$hearth" models 2>/dev/null | grep -q stories260K && break
  sleep 0.1
done

echo "--- hearth submit --stream -m stories260K 'Once upon a time'"
"$hearth" submit --stream -m stories260K -n 64 --temp 0 "Once upon a time"
echo "--- curl -N http://$http/v1/completions (the OpenAI API, streamed as Server-Sent Events)"
curl -sSfN "http://$http/v1/completions" -H "Content-Type: application/json" \
  -d '{"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 24, "temperature": 0, "stream": true}'
echo "--- hearth jobs"
"$hearth" jobs
echo "--- hearth nodes"
"$hearth" nodes
echo "--- curl http://$http/metrics (Prometheus's text format; a few of its lines)"
curl -sSf "http://$http/metrics" | grep -E '^hearth_(jobs_finished_total|tokens_generated_total|nodes)'
echo "--- the web dashboard: http://$http/ (GET /dashboard/: $(curl -sSf -o /dev/null -w '%{http_code}' "http://$http/dashboard/"))"
