#!/usr/bin/env bash
# Vulkan speed against the reference engine's Vulkan backend, side by side on one device (issue
# 21; lavapipe in CI): TinyLlama's shapes (or SHAPE's) cut to LAYERS blocks (hearth mkmodel --shape
# tinyllama-1.1b --layers N, default 2: lavapipe is slow) in TYPE. Each round runs
# `llama-bench -ngl 99 -t THREADS -p PP -n TG -d DEPTH -r REPS` and
# `hearth bench --backend vulkan -p PP -n TG -d DEPTH -r REPS -t THREADS`, the engine that goes first
# alternating; ROUNDS rounds, every run printed, then the medians and hearth / reference for pp
# and tg. Without PEER_BENCH only hearth's column is printed (and the script says so).
#
# Usage: [PEER_BENCH=/path/to/llama-bench] bench/vulkan-speed.sh
#   PEER_BENCH           the reference's llama-bench built with -DGGML_VULKAN=ON (optional)
#   SHAPE                hearth mkmodel --shape (default tinyllama-1.1b; llama-3.2-1b: an
#                        embedding table larger than lavapipe's 128 MiB buffers)
#   LAYERS               blocks of the shape's to keep (default 2: 137 MiB of TinyLlama in Q4_K_M)
#   TYPE                 file type (default q4_k_m)
#   PP, TG               prompt and generated tokens (default 32 and 16)
#   DEPTH                tokens in the cache before each test (default 0; -d of both benches:
#                        attention over a long context)
#   THREADS              CPU threads of both engines (default 2)
#   ROUNDS               rounds of both engines (default 3)
#   REPS                 repetitions within each run, -r of both benches (default 2)
#   HEARTH_BUILD_DIR     build folder (default build/release)
#   HEARTH_BENCH_MODELS  where the model file is made once and kept (default build/bench-models)
#   GGML_VK_VISIBLE_DEVICES  the reference's Vulkan device (default 0: it skips CPU devices such
#                        as lavapipe unless named, and would run on its CPU backend instead)
# lavapipe's threads come from LP_NUM_THREADS (default: every core); set it to THREADS to keep
# both engines on the same cores. Nothing passes or fails on a timing; the exit status is
# non-zero only when something could not run. Single runs vary on a shared machine: compare
# the medians' ratio.
# The whole script is one compound command, read before any of it runs: bash reads a script as it
# goes, so editing this file during a run would change the run (as bench/cpu-speed.sh says).
{
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/median.sh
build=${HEARTH_BUILD_DIR:-build/release}
cache=${HEARTH_BENCH_MODELS:-build/bench-models}
shape=${SHAPE:-tinyllama-1.1b}
layers=${LAYERS:-2}
type=${TYPE:-q4_k_m}
pp=${PP:-32}
tg=${TG:-16}
depth=${DEPTH:-0}
threads=${THREADS:-2}
rounds=${ROUNDS:-3}
reps=${REPS:-2}
hearth=$build/tools/hearth
peer=${PEER_BENCH:-}
[ -x "$hearth" ] || {
  echo "missing $hearth: cmake --preset release && cmake --build --preset release" >&2
  exit 1
}
if [ -n "$peer" ] && [ ! -x "$peer" ]; then
  echo "PEER_BENCH=$peer is not an executable" >&2
  exit 1
fi
# The reference's Vulkan backend skips CPU devices such as lavapipe unless they are named: without
# a device it silently runs on its CPU backend.
export GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0}
if [ -n "$peer" ] && ! "$peer" --list-devices 2>/dev/null | grep -q 'Vulkan0'; then
  echo "the reference sees no Vulkan device (GGML_VK_VISIBLE_DEVICES=$GGML_VK_VISIBLE_DEVICES)" >&2
  exit 1
fi

mkdir -p "$cache"
f=$cache/$shape.${layers}l.$type.gguf
if [ ! -s "$f" ]; then
  echo "making $f" >&2
  "$hearth" mkmodel --shape "$shape" --type "$type" --layers "$layers" --seed 1 -o "$f" >&2
fi

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
device=$("$hearth" devices 2>/dev/null | grep -i vulkan | head -n 1 || true)
echo "machine: ${cpu:-unknown CPU}, $(nproc) cores; $threads threads; LP_NUM_THREADS=${LP_NUM_THREADS:-unset}"
echo "device: ${device:-no Vulkan device listed by hearth devices}"
echo "file: $shape shapes, $layers layers, $type ($(du -m "$f" | cut -f1) MiB); depth $depth"
if [ -n "$peer" ]; then
  echo "reference: $peer on $("$peer" --list-devices 2>/dev/null | grep Vulkan0 | sed 's/^ *//')"
else
  echo "no PEER_BENCH: hearth's column only (build the reference with -DGGML_VULKAN=ON and pass its llama-bench)"
fi
echo

field() { sed -n "s/.*\"$1\": *\([-0-9.eE+]*\).*/\1/p" <<<"$2" | head -n 1; }
peer_ts() { grep "\"n_prompt\": *$1, *\"n_gen\": *$2," <<<"$3" | sed -n 's/.*"avg_ts": *\([0-9.eE+-]*\).*/\1/p'; }

engines="hearth"
[ -n "$peer" ] && engines="peer hearth"
runs=()  # "engine pp tg"
for r in $(seq 1 "$rounds"); do
  order=$engines
  [ -n "$peer" ] && [ $((r % 2)) -eq 0 ] && order="hearth peer"
  for engine in $order; do
    if [ "$engine" = peer ]; then
      j=$("$peer" -m "$f" -ngl 99 -t "$threads" -p "$pp" -n "$tg" -d "$depth" -r "$reps" -o jsonl \
        2>/dev/null)
      p=$(peer_ts "$pp" 0 "$j")
      g=$(peer_ts 0 "$tg" "$j")
    else
      j=$("$hearth" bench -m "$f" --backend vulkan -p "$pp" -n "$tg" -d "$depth" -r "$reps" \
        -t "$threads" --json 2>/dev/null)
      if [ "$(sed -n 's/.*"backend": *"\([a-z]*\)".*/\1/p' <<<"$j")" != vulkan ]; then
        echo "hearth did not run on Vulkan: $j" >&2
        exit 1
      fi
      p=$(field pp_tps "$j")
      g=$(field tg_tps "$j")
    fi
    if [ -z "$p" ] || [ -z "$g" ]; then
      echo "$engine gave no figures" >&2
      exit 1
    fi
    echo "round $r: $engine pp$pp $p tg$tg $g"
    runs+=("$engine $(printf '%.2f %.2f' "$p" "$g")")
  done
done
echo

printf '%s\n' "${runs[@]}" | awk -v pp="$pp" -v tg="$tg" -v engines="$engines" "$median_awk"'
  {
    p[$1] = p[$1] (p[$1] == "" ? "" : " ") $2
    g[$1] = g[$1] (g[$1] == "" ? "" : " ") $3
  }
  END {
    printf "| engine | pp%d runs | pp%d median | tg%d runs | tg%d median |\n", pp, pp, tg, tg
    print "| --- | --- | ---: | --- | ---: |"
    n = split(engines, e, " ")
    for (i = 1; i <= n; ++i) {
      mp[e[i]] = median(p[e[i]]); mg[e[i]] = median(g[e[i]])
      printf "| %s | %s | %.2f | %s | %.2f |\n", e[i] == "peer" ? "reference (Vulkan)" : "hearth (Vulkan)",
             p[e[i]], mp[e[i]], g[e[i]], mg[e[i]]
    }
    if (n == 2) {
      print ""
      printf "hearth / reference (of medians): pp%d %.2fx, tg%d %.2fx\n", pp, mp["hearth"] / mp["peer"],
             tg, mg["hearth"] / mg["peer"]
    }
  }'
exit
}
