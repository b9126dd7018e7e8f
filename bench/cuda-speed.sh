#!/usr/bin/env bash
# CUDA speed (issue 7): `hearth bench --backend cuda` on random-weight models with TinyLlama-1.1B's
# and Llama-3-8B's exact shapes (hearth mkmodel) in Q4_K_M, Q8_0 and F16: prompt tokens/s
# (pp512), generation tokens/s at batch 1 (tg128) beside the ceiling the GPU's measured read
# bandwidth sets (bench/cuda-bandwidth: bandwidth / bytes of weights), and aggregate generation
# tokens/s with 16 and 64 sequences decoded together. Targets (issue 7): tg at batch 1 >= 70% of
# the ceiling on the 8B shape and >= 50% on 1.1B; pp >= 10,000 t/s on 1.1B.
#
# Usage: bench/cuda-speed.sh
#   SHAPES               mkmodel shapes (default "tinyllama-1.1b llama-3-8b")
#   TYPES                file types (default "q4_k_m q8_0 f16")
#   HEARTH_BUILD_DIR     build folder (default build/release)
#   HEARTH_BENCH_MODELS  where the model files are made once and kept (default build/bench-models)
# Needs an NVIDIA GPU. Nothing passes or fails on a timing; the exit status is non-zero only when
# something could not run (no GPU, a model that fell back to the CPU).
# The whole script is one compound command, read before any of it runs: bash reads a script as it
# goes, so editing this file during a run would change the run (as bench/cpu-speed.sh says).
{
set -euo pipefail
cd "$(dirname "$0")/.."
build=${HEARTH_BUILD_DIR:-build/release}
cache=${HEARTH_BENCH_MODELS:-build/bench-models}
shapes=${SHAPES:-tinyllama-1.1b llama-3-8b}
types=${TYPES:-q4_k_m q8_0 f16}
hearth=$build/tools/hearth
bandwidth=$build/bench/cuda-bandwidth
for bin in "$hearth" "$bandwidth"; do
  [ -x "$bin" ] || {
    echo "missing $bin: build with nvcc found (cmake --preset release && cmake --build --preset release)" >&2
    exit 1
  }
done

field() { sed -n "s/.*\"$1\": *\([-0-9.eE+]*\).*/\1/p" <<<"$2"; }

bw_json=$("$bandwidth" --json)
gbps=$(field gbps "$bw_json")
peak=$(field peak_gbps "$bw_json")
device=$(sed -n 's/.*"device": *"\([^"]*\)".*/\1/p' <<<"$bw_json")
echo "device: $device; measured read bandwidth $gbps GB/s (peak from clock and bus: $peak GB/s)"
echo "hearth bench --backend cuda -p 512 -n 128 -r 3; aggregate: -p 0 -n 64 -s 16 / -s 64"
echo
echo "| model | weights | pp512 t/s | tg128 t/s | tg ceiling | tg share of ceiling | tg x16 t/s | tg x64 t/s |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
mkdir -p "$cache"
for shape in $shapes; do
  for t in $types; do
    f=$cache/$shape.$t.gguf
    if [ ! -s "$f" ]; then
      echo "making $f" >&2
      "$hearth" mkmodel --shape "$shape" --type "$t" --seed 1 -o "$f" --threads "$(nproc)" >&2
    fi
    j=$("$hearth" bench -m "$f" --backend cuda -p 512 -n 128 -r 3 --json)
    if [ "$(sed -n 's/.*"backend": *"\([a-z]*\)".*/\1/p' <<<"$j")" != cuda ]; then
      echo "$f did not run on CUDA: $j" >&2
      exit 1
    fi
    j16=$("$hearth" bench -m "$f" --backend cuda -p 0 -n 64 -r 2 -s 16 --json)
    j64=$("$hearth" bench -m "$f" --backend cuda -p 0 -n 64 -r 2 -s 64 --json)
    awk -v name="$shape $t" -v bytes="$(field weight_bytes "$j")" -v gbps="$gbps" \
      -v pp="$(field pp_tps "$j")" -v tg="$(field tg_tps "$j")" \
      -v tg16="$(field tg_tps "$j16")" -v tg64="$(field tg_tps "$j64")" 'BEGIN {
        ceiling = gbps * 1e9 / bytes
        printf "| %s | %.2f GiB | %.0f | %.1f | %.1f | %.0f%% | %.0f | %.0f |\n",
               name, bytes / 2^30, pp, tg, ceiling, 100 * tg / ceiling, tg16, tg64
      }'
  done
done
exit
}
