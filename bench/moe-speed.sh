#!/usr/bin/env bash
# Mixture-of-experts speed against the reference engine, side by side on one machine: Qwen3-30B-A3B
# shapes cut to LAYERS blocks (hearth mkmodel --shape qwen3-30b-a3b --layers N) and their dense twin
# (--dense-active: the same attention, embeddings and output, and the 8 experts a token uses as one
# dense 6144-wide feed-forward, so its weights are the MoE file's active set), both in TYPE.
# Each round runs, per file, `llama-bench -t THREADS -p 128 -n 64 -r 3` then
# `hearth bench -p 128 -n 64 -r 3 -t THREADS`; ROUNDS rounds alternate the two engines, and the
# table gives every run and the medians: pp128 and tg64 of both engines, hearth / reference, and
# tg of the MoE file / tg of the dense twin (1.0 would mean routing and scattered expert reads
# cost nothing over a dense model of the same active size).
#
# Usage: PEER_BENCH=/path/to/llama-bench bench/moe-speed.sh
#   PEER_BENCH           the reference's llama-bench binary, already built (required)
#   LAYERS               blocks of the 48 to keep (default 8: 3.2 GiB in Q4_K_M)
#   TYPE                 file type (default q4_k_m)
#   THREADS              threads for both engines (default 2, as BENCHMARKS.md)
#   ROUNDS               rounds of both engines on both files (default 3)
#   REPS                 repetitions within each run, -r of both benches (default 3)
#   HEARTH_BUILD_DIR     build folder (default build/release)
#   HEARTH_BENCH_MODELS  where the model files are made once and kept (default build/bench-models)
# Nothing passes or fails on a timing; the exit status is non-zero only when something could not
# run. On a shared machine single runs vary by 20% or more: compare the medians' ratios.
# The whole script is one compound command, read before any of it runs: bash reads a script as it
# goes, so editing this file during a run would change the run (as bench/cpu-speed.sh says).
{
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/median.sh
build=${HEARTH_BUILD_DIR:-build/release}
cache=${HEARTH_BENCH_MODELS:-build/bench-models}
layers=${LAYERS:-8}
type=${TYPE:-q4_k_m}
threads=${THREADS:-2}
rounds=${ROUNDS:-3}
reps=${REPS:-3}
hearth=$build/tools/hearth
peer=${PEER_BENCH:-}
[ -x "$hearth" ] || {
  echo "missing $hearth: cmake --preset release && cmake --build --preset release" >&2
  exit 1
}
if [ -z "$peer" ] || [ ! -x "$peer" ]; then
  echo "PEER_BENCH must name the reference's llama-bench binary (see ../shared/BENCHMARKS.md)" >&2
  exit 1
fi

mkdir -p "$cache"
moe=$cache/qwen3-30b-a3b.${layers}l.$type.gguf
dense=$cache/qwen3-30b-a3b-dense-active.${layers}l.$type.gguf
make_file() {  # path, extra mkmodel flags...
  local f=$1
  shift
  [ -s "$f" ] && return 0
  echo "making $f" >&2
  "$hearth" mkmodel --shape qwen3-30b-a3b --type "$type" --layers "$layers" --seed 1 "$@" -o "$f" >&2
}
make_file "$moe"
make_file "$dense" --dense-active

# What each file holds: the MoE file's total and per-token (active) parameters and weight bytes,
# the dense twin's total (its active set is all of it).
moe_dry=$("$hearth" mkmodel --shape qwen3-30b-a3b --type "$type" --layers "$layers" --dry-run)
dense_dry=$("$hearth" mkmodel --shape qwen3-30b-a3b --type "$type" --layers "$layers" --dry-run \
  --dense-active)
params() { sed -n 's/.* \([0-9]*\) parameters.*/\1/p' <<<"$1" | head -n 1; }
bytes() { sed -n 's/.* \([0-9]*\) bytes (.*/\1/p' <<<"$1" | head -n 1; }
active=$(sed -n 's/^per token: \([0-9]*\) active parameters.*/\1/p' <<<"$moe_dry")
active_bytes=$(sed -n 's/^per token: .*, \([0-9]*\) bytes of weights.*/\1/p' <<<"$moe_dry")

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "machine: ${cpu:-unknown CPU}, $(nproc) cores; $threads threads; reference: $peer"
awk -v l="$layers" -v t="$type" -v tp="$(params "$moe_dry")" -v tb="$(bytes "$moe_dry")" \
  -v ap="$active" -v ab="$active_bytes" -v dp="$(params "$dense_dry")" \
  -v db="$(bytes "$dense_dry")" 'BEGIN {
    printf "MoE file: Qwen3-30B-A3B, %d of 48 layers, %s: %.0f parameters (%.3f B), %.0f MiB;\n",
           l, toupper(t), tp, tp / 1e9, tb / 2^20
    printf "  per token %.0f active parameters (%.3f B, %.1f%%), %.0f MiB of weights\n",
           ap, ap / 1e9, 100 * ap / tp, ab / 2^20
    printf "dense twin: %.0f parameters (%.3f B), %.0f MiB (the active set less the routers)\n",
           dp, dp / 1e9, db / 2^20
  }'
echo

# One numeric field of a flat JSON object printed on one line.
field() { sed -n "s/.*\"$1\": *\([-0-9.eE+]*\).*/\1/p" <<<"$2" | head -n 1; }
# llama-bench -o jsonl: one line per test; avg_ts of the line with n_prompt/n_gen as given.
peer_ts() { grep "\"n_prompt\": *$1, *\"n_gen\": *$2," <<<"$3" | sed -n 's/.*"avg_ts": *\([0-9.eE+-]*\).*/\1/p'; }

runs=()  # "file engine pp tg"
for r in $(seq 1 "$rounds"); do
  for which in moe dense; do
    f=$moe
    [ "$which" = dense ] && f=$dense
    # Alternate which engine goes first from one round to the next.
    order="peer hearth"
    [ $((r % 2)) -eq 0 ] && order="hearth peer"
    for engine in $order; do
      if [ "$engine" = peer ]; then
        j=$("$peer" -m "$f" -t "$threads" -p 128 -n 64 -r "$reps" -o jsonl 2>/dev/null)
        pp=$(peer_ts 128 0 "$j")
        tg=$(peer_ts 0 64 "$j")
      else
        j=$("$hearth" bench -m "$f" -p 128 -n 64 -r "$reps" -t "$threads" --json 2>/dev/null)
        pp=$(field pp_tps "$j")
        tg=$(field tg_tps "$j")
      fi
      if [ -z "$pp" ] || [ -z "$tg" ]; then
        echo "$engine on $f gave no figures" >&2
        exit 1
      fi
      echo "round $r: $which $engine pp128 $pp tg64 $tg" >&2
      runs+=("$which $engine $(printf '%.1f %.2f' "$pp" "$tg")")
    done
  done
done

printf '%s\n' "${runs[@]}" | awk "$median_awk"'
  {
    k = $1 " " $2
    pp[k] = pp[k] (pp[k] == "" ? "" : " ") $3
    tg[k] = tg[k] (tg[k] == "" ? "" : " ") $4
  }
  END {
    print "| file | engine | pp128 runs | pp128 median | tg64 runs | tg64 median |"
    print "| --- | --- | --- | ---: | --- | ---: |"
    split("moe dense", files, " "); split("peer hearth", engines, " ")
    for (fi = 1; fi <= 2; ++fi) for (ei = 1; ei <= 2; ++ei) {
      k = files[fi] " " engines[ei]
      mp[k] = median(pp[k]); mt[k] = median(tg[k])
      printf "| %s | %s | %s | %.2f | %s | %.2f |\n", files[fi] == "moe" ? "MoE" : "dense twin",
             engines[ei] == "peer" ? "reference" : "hearth", pp[k], mp[k], tg[k], mt[k]
    }
    print ""
    print "| ratio (of medians) | reference | hearth |"
    print "| --- | ---: | ---: |"
    printf "| MoE: hearth / reference, pp128 | | %.2fx |\n", mp["moe hearth"] / mp["moe peer"]
    printf "| MoE: hearth / reference, tg64 | | %.2fx |\n", mt["moe hearth"] / mt["moe peer"]
    printf "| dense twin: hearth / reference, pp128 | | %.2fx |\n", mp["dense hearth"] / mp["dense peer"]
    printf "| dense twin: hearth / reference, tg64 | | %.2fx |\n", mt["dense hearth"] / mt["dense peer"]
    printf "| tg64 MoE / tg64 dense twin | %.2f | %.2f |\n", mt["moe peer"] / mt["dense peer"],
           mt["moe hearth"] / mt["dense hearth"]
    printf "| pp128 MoE / pp128 dense twin | %.2f | %.2f |\n", mp["moe peer"] / mp["dense peer"],
           mp["moe hearth"] / mp["dense hearth"]
  }'
exit
}
