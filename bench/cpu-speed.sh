#!/usr/bin/env bash
# CPU speed against the reference engine: `hearth bench -p 128 -n 64 -r 3` on random-weight models
# with TinyLlama-1.1B's exact shapes (hearth mkmodel) in Q4_K_M, Q8_0 and F16, beside llama.cpp's
# figures for the same shapes and settings from ../shared/BENCHMARKS.md, and beside the decode
# ceiling this machine's measured read bandwidth (bench/bandwidth) sets: bandwidth / file size.
#
# Usage: bench/cpu-speed.sh
#   THREADS              threads for bandwidth and hearth bench (default 2, as BENCHMARKS.md)
#   TYPES                file types to run (default "q4_k_m q8_0 f16")
#   HEARTH_BUILD_DIR     build folder (default build/release)
#   HEARTH_BENCH_MODELS  where the model files are made once and kept (default build/bench-models)
# A file type the quantizer cannot write yet is reported and skipped. Nothing passes or fails on a
# timing; the exit status is non-zero only when something could not run.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${HEARTH_BUILD_DIR:-build/release}
cache=${HEARTH_BENCH_MODELS:-build/bench-models}
threads=${THREADS:-2}
types=${TYPES:-q4_k_m q8_0 f16}
hearth=$build/tools/hearth
bandwidth=$build/bench/bandwidth
for bin in "$hearth" "$bandwidth"; do
  [ -x "$bin" ] || {
    echo "missing $bin: cmake --preset release && cmake --build --preset release" >&2
    exit 1
  }
done

# llama.cpp build 4748, 2 threads, llama-bench -p 128 -n 64 -r 3, on TinyLlama-1.1B shapes: the
# published figures of ../shared/BENCHMARKS.md (keep in step with that file).
reference() {
  case $1 in
    q4_k_m) echo "47.7 19.7" ;;
    q8_0) echo "77.5 14.1" ;;
    f16) echo "68.3 8.4" ;;
    *) echo "- -" ;;
  esac
}

# One numeric field of a flat JSON object printed on one line.
field() { sed -n "s/.*\"$1\": *\([-0-9.eE+]*\).*/\1/p" <<<"$2"; }

mkdir -p "$cache"
made=()
for t in $types; do
  f=$cache/tinyllama-1.1b.$t.gguf
  if [ ! -s "$f" ]; then
    echo "making $f" >&2
    if ! "$hearth" mkmodel --shape tinyllama-1.1b --type "$t" --seed 1 -o "$f" >&2; then
      echo "skipping $t: hearth mkmodel could not make it" >&2
      continue
    fi
  fi
  made+=("$t")
done
[ ${#made[@]} -gt 0 ] || { echo "no model file could be made" >&2; exit 1; }

bw_json=$("$bandwidth" --threads "$threads" --json)
gbps=$(sed -n 's/.*"gbps": *\([0-9.]*\).*/\1/p' <<<"$bw_json")
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "machine: ${cpu:-unknown CPU}, $(nproc) cores (BENCHMARKS.md's: 2 cores of an Intel Xeon with AVX-512/VNNI)"
echo "read bandwidth, $threads threads: $gbps GB/s (BENCHMARKS.md: 18.6 GB/s with 2 threads)"
echo "hearth bench -p 128 -n 64 -r 3 -t $threads; reference: llama.cpp on BENCHMARKS.md's machine"
echo
echo "| file | size | pp128 ours | pp128 reference | tg64 ours | tg64 reference | tg ceiling (bandwidth/size) | tg share of ceiling |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for t in "${made[@]}"; do
  f=$cache/tinyllama-1.1b.$t.gguf
  bytes=$(stat -c %s "$f")
  j=$("$hearth" bench -m "$f" -p 128 -n 64 -r 3 -t "$threads" --json)
  read -r pp_ref tg_ref < <(reference "$t")
  awk -v t="$t" -v bytes="$bytes" -v gbps="$gbps" -v pp_ref="$pp_ref" -v tg_ref="$tg_ref" \
    -v pp="$(field pp_tps "$j")" -v pp_sd="$(field pp_tps_stdev "$j")" \
    -v tg="$(field tg_tps "$j")" -v tg_sd="$(field tg_tps_stdev "$j")" 'BEGIN {
      size = bytes >= 2^30 ? sprintf("%.2f GiB", bytes / 2^30) : sprintf("%.0f MiB", bytes / 2^20)
      ceiling = gbps * 1e9 / bytes
      printf "| TinyLlama-1.1B %s | %s | %.1f ± %.1f | %s | %.1f ± %.1f | %s | %.1f | %.0f%% |\n",
             toupper(t), size, pp, pp_sd, pp_ref, tg, tg_sd, tg_ref, ceiling, 100 * tg / ceiling
    }'
done
