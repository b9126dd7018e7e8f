#!/usr/bin/env bash
# Speed while another program keeps cores busy, side by side with the reference engine: a homelab
# node shares its machine with whatever else runs there. TinyLlama-1.1B's shapes in Q4_K_M (the
# file cpu-speed.sh makes), `hearth bench -p 64 -n 32` against `llama-bench -p 64 -n 32`, in three
# conditions per round: the machine idle with THREADS threads; BUSY busy loops (`yes`) running
# with THREADS threads; and the busy loops with THREADS - BUSY threads (what a user could pick to
# stay out of their way). Each round runs the reference then hearth in each condition; the table
# gives every run, the medians and hearth / reference of the medians.
#
# Usage: PEER_BENCH=/path/to/llama-bench bench/busy-core.sh
#   PEER_BENCH         the reference's llama-bench (../shared/BENCHMARKS.md); without it only
#                      hearth's columns are printed
#   THREADS            threads (default: the machine's cores); BUSY busy loops (default 1)
#   ROUNDS             rounds (default 3); REPS repetitions inside each run (default 2)
#   HEARTH_BUILD_DIR   build folder (default build/release)
#   HEARTH_BENCH_MODELS where the model file is made once and kept (default build/bench-models)
# Nothing passes or fails on a timing; the exit status is non-zero only when something could not
# run. The busy loops are stopped on every exit.
{
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/median.sh
build=${HEARTH_BUILD_DIR:-build/release}
cache=${HEARTH_BENCH_MODELS:-build/bench-models}
threads=${THREADS:-$(nproc)}
busy=${BUSY:-1}
rounds=${ROUNDS:-3}
reps=${REPS:-2}
peer=${PEER_BENCH:-}
hearth=$build/tools/hearth
[ -x "$hearth" ] || {
  echo "missing $hearth: cmake --preset release && cmake --build --preset release" >&2
  exit 1
}
[ -z "$peer" ] || [ -x "$peer" ] || {
  echo "PEER_BENCH=$peer is not an executable" >&2
  exit 1
}
if [ "$busy" -lt 1 ] || [ "$busy" -ge "$threads" ]; then
  echo "BUSY=$busy must be at least 1 and below THREADS=$threads" >&2
  exit 1
fi
model=$cache/tinyllama-1.1b.q4_k_m.gguf
if [ ! -s "$model" ]; then
  mkdir -p "$cache"
  echo "making $model" >&2
  "$hearth" mkmodel --shape tinyllama-1.1b --type q4_k_m --seed 1 -o "$model" >&2
fi

loops=()
stop_loops() {
  [ "${#loops[@]}" -eq 0 ] || kill "${loops[@]}" 2>/dev/null || true
  [ "${#loops[@]}" -eq 0 ] || wait "${loops[@]}" 2>/dev/null || true
  loops=()
}
start_loops() {
  for _ in $(seq "$busy"); do
    yes >/dev/null &
    loops+=($!)
  done
  sleep 1
}

# Both engines print a markdown table whose 7th column is the test and 8th "t/s ± sd".
figures() { awk -F'|' '$7 ~ /(pp|tg)[0-9]/ {gsub(/ /, "", $7); split($8, v, " "); print $7, v[1]}'; }

runs=$(mktemp)
trap 'stop_loops; rm -f "$runs"' EXIT
measure() {  # condition threads
  if [ -n "$peer" ]; then
    "$peer" -m "$model" -t "$2" -p 64 -n 32 -r "$reps" 2>/dev/null | figures |
      sed "s/^/$1 $2 reference /" >>"$runs"
  fi
  "$hearth" bench -m "$model" -t "$2" -p 64 -n 32 -r "$reps" 2>/dev/null | figures |
    sed "s/^/$1 $2 hearth /" >>"$runs"
}
for r in $(seq "$rounds"); do
  echo "round $r/$rounds" >&2
  measure idle "$threads"
  start_loops
  measure "busy-$busy" "$threads"
  measure "busy-$busy" "$((threads - busy))"
  stop_loops
done

echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; $rounds rounds, -r $reps;" \
  "busy: $busy \`yes\` loop(s)"
echo
echo "| condition | threads | test | reference runs | hearth runs | reference | hearth | hearth / reference |"
echo "| --- | ---: | --- | --- | --- | ---: | ---: | ---: |"
for cond in idle "busy-$busy"; do
  for t in $threads $((threads - busy)); do
    [ "$cond" = idle ] && [ "$t" != "$threads" ] && continue
    for test in pp64 tg32; do
      pick() { awk -v c="$cond" -v t="$t" -v e="$1" -v x="$test" '$1 == c && $2 == t && $3 == e && $4 == x {print $5}' "$runs"; }
      ref=$(pick reference | median)
      ours=$(pick hearth | median)
      ratio=
      if [ -n "$ref" ] && [ -n "$ours" ]; then
        ratio=$(awk -v a="$ours" -v b="$ref" 'BEGIN {printf "**%.2fx**", a / b}')
      fi
      echo "| $cond | $t | $test | $(pick reference | tr '\n' ' ') | $(pick hearth | tr '\n' ' ') | ${ref:--} | ${ours:--} | ${ratio:--} |"
    done
  done
done
exit
}
