#!/usr/bin/env bash
# CPU speed side by side with the reference engine, in one run on one machine: random-weight
# models with TinyLlama-1.1B's exact shapes (hearth mkmodel) in Q4_K_M, Q8_0 and F16. Each round
# measures, per file, the reference then hearth with the same settings, so a machine that slows
# down mid-run slows both; ROUNDS rounds alternate the engines, and the tables give every run,
# the medians and hearth / reference of the medians. A speed figure only counts as such a ratio
# (../shared/BENCHMARKS.md: the processor behind a machine changes from day to day).
#
# Sections (SECTIONS, default "single batched depth"):
#   single   `llama-bench -p 128,512` against `hearth bench -p 128|512`: pp128 and pp512; then
#            tg64 (`-p 0 -n 64`), run reference, hearth, hearth, reference back to back, each
#            engine's round figure the mean of its two.
#   batched  many users at once: `llama-batched-bench -npp 128 -ntg 32 -npl 1,4,16` against
#            `hearth bench -p 0 -n 32 -s N -d 128` (N sequences, each holding a 128-token prompt,
#            decoded together): aggregate generation tokens/s.
#   depth    long contexts: `llama-bench -p 0 -n 32 -d 2048,8192` against
#            `hearth bench -p 0 -n 32 -d D`: generation with D tokens already in the cache.
# Every row also gives each engine's figure as a share of the machine's ceiling for it, from
# the streaming-read bandwidth (bench/bandwidth) and the multiply-add peaks (bench/compute_peak:
# int8 VNNI for quantized weights where the CPU has it, else F32 FMA; F32 FMA for attention)
# measured in the same round before each file's runs (the read also after them; the higher of
# the two counts), and the work hearth bench --json counts:
#   pp       a prompt token's multiply-adds at the peaks (pp_layer_macs, pp_attention_macs): a
#            token can not be processed faster than its products can be computed.
#   tg, x, d a roofline per decoding step of N sequences whose tokens see c cache cells each:
#            the longer of reading the weights (step_bytes: every weight once, an untied
#            embedding table left out, as a token reads one row of it) and N · c cells of K and V
#            (kv_bytes_per_cell) at the bandwidth, and computing N tokens' products
#            (tg_token_macs) and attention (attention_macs_per_cell · c) at the peaks; summed
#            over the run's steps, c growing from the depth. One sequence decoding is bound by
#            the read, 16 together can be bound by the products.
# A share is the median over rounds of the run's figure over its own round's ceiling (the read
# bandwidth of a shared machine swings between rounds); the ceiling column is the rounds' median.
#
# Usage: PEER_BENCH=/path/to/llama-bench bench/cpu-speed.sh
#   PEER_BENCH           the reference's llama-bench, already built (../shared/BENCHMARKS.md).
#                        Without it only hearth's columns are printed.
#   PEER_BATCHED_BENCH   the reference's llama-batched-bench (default: beside PEER_BENCH)
#   THREADS              threads for every engine and the bandwidth bench (default 2)
#   TYPES                file types of single and batched (default "q4_k_m q8_0 f16")
#   DEPTH_TYPES          file types of depth (default q4_k_m: an 8k prefix takes minutes)
#   SEQS                 sequence counts of batched (default "1 4 16")
#   DEPTHS               depths of depth (default "2048 8192")
#   ROUNDS               rounds (default 3); REPS repetitions inside each llama-bench and hearth
#                        bench run (default 2)
#   HEARTH_BUILD_DIR     build folder (default build/release)
#   HEARTH_BENCH_MODELS  where the model files are made once and kept (default build/bench-models)
#   RUNS_FILE            keep every figure in this file, a line each; with TABLES_ONLY=1 nothing
#                        runs and the tables are printed from it
# Nothing passes or fails on a timing; the exit status is non-zero only when something could not
# run.
# The whole script is one compound command, read before any of it runs: bash reads a script as it
# goes, so editing this file during a run (which takes tens of minutes) would change the run.
# (shellcheck takes the section functions, called by name through "$sec", for unreachable.)
# shellcheck disable=SC2317
{
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/median.sh
build=${HEARTH_BUILD_DIR:-build/release}
cache=${HEARTH_BENCH_MODELS:-build/bench-models}
threads=${THREADS:-2}
types=${TYPES:-q4_k_m q8_0 f16}
depth_types=${DEPTH_TYPES:-q4_k_m}
seqs=${SEQS:-1 4 16}
depths=${DEPTHS:-2048 8192}
rounds=${ROUNDS:-3}
reps=${REPS:-2}
sections=${SECTIONS:-single batched depth}
# TABLES_ONLY: no runs (and no model files made), the tables from RUNS_FILE's figures.
tables_only=${TABLES_ONLY:-}
if [ -n "$tables_only" ]; then
  [ -n "${RUNS_FILE:-}" ] || {
    echo "TABLES_ONLY=1 prints the tables of RUNS_FILE's figures: set RUNS_FILE" >&2
    exit 1
  }
  rounds=0
fi
hearth=$build/tools/hearth
bandwidth=$build/bench/bandwidth
peak=$build/bench/compute_peak
peer=${PEER_BENCH:-}
peer_batched=${PEER_BATCHED_BENCH:-${peer:+$(dirname "$peer")/llama-batched-bench}}
for bin in "$hearth" "$bandwidth" "$peak"; do
  [ -x "$bin" ] || {
    echo "missing $bin: cmake --preset release && cmake --build --preset release" >&2
    exit 1
  }
done
if [ -n "$peer" ] && [ ! -x "$peer" ]; then
  echo "PEER_BENCH=$peer is not an executable" >&2
  exit 1
fi
[ -n "$peer_batched" ] && [ ! -x "$peer_batched" ] && peer_batched=

# One numeric field of a flat JSON object printed on one line.
field() { sed -n "s/.*\"$1\": *\([-0-9.eE+]*\).*/\1/p" <<<"$2"; }

file_of() { echo "$cache/tinyllama-1.1b.$1.gguf"; }
[ -n "$tables_only" ] || mkdir -p "$cache"
[ -n "$tables_only" ] || for t in $(printf '%s\n' $types $depth_types | sort -u); do
  f=$(file_of "$t")
  if [ ! -s "$f" ]; then
    echo "making $f" >&2
    "$hearth" mkmodel --shape tinyllama-1.1b --type "$t" --seed 1 -o "$f" >&2
  fi
done

# Every figure goes to one list, a line each: "section type test engine round value".
# RUNS_FILE keeps it (the tables can be made again from it with TABLES_ONLY=1).
if [ -n "${RUNS_FILE:-}" ]; then
  runs=$RUNS_FILE
  [ -n "$tables_only" ] || : >"$runs"
else
  runs=$(mktemp)
  trap 'rm -f "$runs"' EXIT
fi
note() { printf '%s %s %s %s %s %.2f\n' "$1" "$2" "$3" "$4" "$5" "$6" >>"$runs"; }

bandwidth_now() { field gbps "$("$bandwidth" --threads "$threads" --json)"; }

ceilings() {  # section type round: the machine's read bandwidth and multiply-add peaks now
  local j f32 i8
  note "$1" "$2" gbps - "$3" "$(bandwidth_now)"
  # The peak the file's products run at: int8 (VNNI) for quantized weights, F32 for float ones.
  j=$("$peak" --threads "$threads" --json)
  f32=$(sed -n 's/.*"what": "f32"[^}]*"gmacs": \([0-9.]*\).*/\1/p' <<<"$j")
  i8=$(sed -n 's/.*"what": "i8"[^}]*"gmacs": \([0-9.]*\).*/\1/p' <<<"$j")
  case $2 in f16 | bf16 | f32) i8= ;; esac
  note "$1" "$2" f32peak - "$3" "$f32"
  note "$1" "$2" wpeak - "$3" "${i8:-$f32}"
}

step_work() {  # section type test round json: the generation run's shape and what a step costs
  note "$1" "$2" "seqs@$3" - "$4" "$(field sequences "$5")"
  note "$1" "$2" "depth@$3" - "$4" "$(field depth "$5")"
  note "$1" "$2" "gen@$3" - "$4" "$(field n_gen "$5")"
  note "$1" "$2" "bytes@$3" - "$4" "$(field step_bytes "$5")"
  note "$1" "$2" kvcell - "$4" "$(field kv_bytes_per_cell "$5")"
  note "$1" "$2" acell - "$4" "$(field attention_macs_per_cell "$5")"
  note "$1" "$2" tmacs - "$4" "$(field tg_token_macs "$5")"
}

single() {  # type round
  local f j
  f=$(file_of "$1")
  if [ -n "$peer" ]; then
    while read -r j; do
      note single "$1" "pp$(field n_prompt "$j")" ref "$2" "$(field avg_ts "$j")"
    done < <("$peer" -m "$f" -t "$threads" -p 128,512 -n 0 -r "$reps" -o jsonl 2>/dev/null)
  fi
  j=$("$hearth" bench -m "$f" -t "$threads" -p 128 -n 0 -r "$reps" --json)
  note single "$1" pp128 hearth "$2" "$(field pp_tps "$j")"
  note single "$1" lmacs128 - "$2" "$(field pp_layer_macs "$j")"
  note single "$1" amacs128 - "$2" "$(field pp_attention_macs "$j")"
  j=$("$hearth" bench -m "$f" -t "$threads" -p 512 -n 0 -r "$reps" --json)
  note single "$1" pp512 hearth "$2" "$(field pp_tps "$j")"
  note single "$1" lmacs512 - "$2" "$(field pp_layer_macs "$j")"
  note single "$1" amacs512 - "$2" "$(field pp_attention_macs "$j")"
  # Generation back to back, reference, hearth, hearth, reference, each engine's figure the mean
  # of its two: a shared host's read rate can switch between levels within a minute (35 and
  # 60 GB/s on a Zen 4 host), and with each engine's generation inside its prompt runs, 20 s
  # apart, one engine's three rounds fell in the fast level and the other's in the slow one
  # (F16 tg64 0.74x in one run, 1.30x in the run before and 1.32x over 8 alternations).
  local h1 h2 r1 r2
  [ -z "$peer" ] || r1=$(peer_tg "$f")
  j=$("$hearth" bench -m "$f" -t "$threads" -p 0 -n 64 -r "$reps" --json)
  h1=$(field tg_tps "$j")
  step_work single "$1" tg64 "$2" "$j"
  h2=$(field tg_tps "$("$hearth" bench -m "$f" -t "$threads" -p 0 -n 64 -r "$reps" --json)")
  [ -z "$peer" ] || r2=$(peer_tg "$f")
  note single "$1" tg64 hearth "$2" "$(awk -v a="$h1" -v b="$h2" 'BEGIN { print (a + b) / 2 }')"
  [ -z "$peer" ] ||
    note single "$1" tg64 ref "$2" "$(awk -v a="$r1" -v b="$r2" 'BEGIN { print (a + b) / 2 }')"
}

peer_tg() {  # file: the reference's tg64, tokens/s
  field avg_ts "$("$peer" -m "$1" -t "$threads" -p 0 -n 64 -r "$reps" -o jsonl 2>/dev/null)"
}

batched() {  # type round
  local f j s
  f=$(file_of "$1")
  if [ -n "$peer_batched" ]; then
    local npl max=0
    npl=$(tr ' ' ',' <<<"$seqs")
    for s in $seqs; do max=$((s > max ? s : max)); done
    while read -r j; do
      [[ $j == "{"* ]] || continue
      note batched "$1" "x$(field pl "$j")" ref "$2" "$(field speed_tg "$j")"
    done < <("$peer_batched" -m "$f" -t "$threads" -tb "$threads" -c $((max * 160 + 256)) \
      -npp 128 -ntg 32 -npl "$npl" --output-format jsonl 2>/dev/null)
  fi
  for s in $seqs; do
    j=$("$hearth" bench -m "$f" -t "$threads" -p 0 -n 32 -s "$s" -d 128 -r "$reps" --json)
    note batched "$1" "x$s" hearth "$2" "$(field tg_tps "$j")"
    step_work batched "$1" "x$s" "$2" "$j"
  done
}

depth() {  # type round
  local f j d
  f=$(file_of "$1")
  if [ -n "$peer" ]; then
    while read -r j; do
      note depth "$1" "d$(field n_depth "$j")" ref "$2" "$(field avg_ts "$j")"
    done < <("$peer" -m "$f" -t "$threads" -p 0 -n 32 -d "$(tr ' ' ',' <<<"$depths")" \
      -r "$reps" -o jsonl 2>/dev/null)
  fi
  for d in $depths; do
    j=$("$hearth" bench -m "$f" -t "$threads" -p 0 -n 32 -d "$d" -r "$reps" --json)
    note depth "$1" "d$d" hearth "$2" "$(field tg_tps "$j")"
    step_work depth "$1" "d$d" "$2" "$j"
  done
}

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "machine: ${cpu:-unknown CPU}, $(nproc) cores; $threads threads; $rounds rounds, -r $reps"
echo "reference: ${peer:-none, PEER_BENCH is unset: hearth only}"
[ -n "$peer" ] && [ -z "$peer_batched" ] && echo "reference batched: none (no llama-batched-bench)"
for r in $(seq 1 "$rounds"); do
  for sec in $sections; do
    case $sec in
      single | batched) list=$types ;;
      depth) list=$depth_types ;;
      *)
        echo "unknown section $sec" >&2
        exit 1
        ;;
    esac
    for t in $list; do
      echo "round $r/$rounds: $sec $t" >&2
      ceilings "$sec" "$t" "$r"
      "$sec" "$t" "$r"
      # The read again after the runs: a shared host can switch its read level within a minute,
      # and the ceiling takes the higher of the two.
      note "$sec" "$t" gbpsafter - "$r" "$(bandwidth_now)"
    done
  done
done

# Tables from the list: every run, then per row the medians and hearth / reference.
awk -v rounds="$rounds" "$median_awk"'
  function cell(x) { return x == "" ? "-" : sprintf("%.2f", x) }
  # Figure `name` of file prefix m (section, type) in round r; 0 when not measured.
  function got(m, name, r) { return at[m name SUBSEP "-" SUBSEP r] + 0 }
  # The round'"'"'s read bandwidth: the higher of the reads before and after the file'"'"'s runs.
  function gbps(m, r) { return got(m, "gbps", r) > got(m, "gbpsafter", r) ? got(m, "gbps", r) : got(m, "gbpsafter", r) }
  # Tokens/s at most of g decoding steps of n sequences after d cells each (the roofline of the
  # script'"'"'s header); bytes: the weights one step reads.
  function gen_ceiling(m, r, n, d, g, bytes,   s, c, mem, comp, total) {
    for (s = 0; s < g; ++s) {
      c = d + s + 1
      mem = (bytes + n * c * got(m, "kvcell", r)) / (gbps(m, r) * 1e9)
      comp = n * got(m, "tmacs", r) / (got(m, "wpeak", r) * 1e9) + \
             n * c * got(m, "acell", r) / (got(m, "f32peak", r) * 1e9)
      total += mem > comp ? mem : comp
    }
    return n * g / total
  }
  # The ceiling of test t of file prefix m in round r (tokens/s), 0 without the round'"'"'s figures.
  # A generation test'"'"'s shape (sequences, depth, tokens) is what its hearth run reported.
  # (Runs files of before the batched and depth ceilings have only tg64 with "bytes": one
  # sequence from an empty cache, the read alone, as it was.)
  function ceiling_of(m, t, r,   n) {
    if (gbps(m, r) <= 0 || got(m, "wpeak", r) <= 0 || got(m, "f32peak", r) <= 0) return 0
    if (got(m, "gen@" t, r) > 0)
      return gen_ceiling(m, r, got(m, "seqs@" t, r), got(m, "depth@" t, r), got(m, "gen@" t, r),
                         got(m, "bytes@" t, r))
    if (t ~ /^tg/) return got(m, "bytes", r) > 0 ? gen_ceiling(m, r, 1, 0, substr(t, 3) + 0, got(m, "bytes", r)) : 0
    if (t !~ /^pp/) return 0
    # Seconds per prompt token at the peaks: the layer products, then attention.
    n = substr(t, 3)
    return 1 / (got(m, "lmacs" n, r) / (got(m, "wpeak", r) * 1e9) + \
                got(m, "amacs" n, r) / (got(m, "f32peak", r) * 1e9))
  }
  # Median over the rounds of engine e'"'"'s figure over that round'"'"'s ceiling, "-" without figures.
  function share(m, t, e,   r, c, list) {
    list = ""
    for (r = 1; r <= maxround; ++r) {
      if (!((m t SUBSEP e SUBSEP r) in at)) continue
      c = ceiling_of(m, t, r)
      if (c > 0) list = list " " sprintf("%.6f", at[m t SUBSEP e SUBSEP r] / c)
    }
    return list == "" ? "-" : sprintf("%.0f%%", 100 * median(list))
  }
  function ratio(a, b) { return (a == "" || b == "" || b == 0) ? "-" : sprintf("**%.2fx**", a / b) }
  {
    key = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4
    vals[key] = vals[key] (vals[key] == "" ? "" : " ") $6
    at[key SUBSEP $5] = $6
    if ($5 > maxround) maxround = $5
    if (!(($1 SUBSEP $2 SUBSEP $3) in seen)) {
      seen[$1 SUBSEP $2 SUBSEP $3] = 1
      rows[++nrows] = $1 SUBSEP $2 SUBSEP $3
    }
  }
  END {
    for (sec_i = 1; sec_i <= 3; ++sec_i) {
      sec = sec_i == 1 ? "single" : sec_i == 2 ? "batched" : "depth"
      header = 0
      for (i = 1; i <= nrows; ++i) {
        split(rows[i], k, SUBSEP)
        if (k[1] != sec || k[3] ~ /^(bytes|seqs@|depth@|gen@|gbps|f32peak|wpeak|[la]macs|kvcell|acell|tmacs)/) continue
        if (!header) {
          title = sec == "single" ? "one sequence (tokens/s)" : \
                  sec == "batched" ? "many sequences, 128-token prompts: aggregate tg32 tokens/s" : \
                  "generation at depth: tg32 tokens/s with D tokens in the cache"
          printf "\n### %s\n\n| file | test | reference runs | hearth runs | reference | hearth | hearth / reference |", title
          printf " ceiling | reference share | hearth share |"
          printf "\n| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n"
          header = 1
        }
        r = median(vals[rows[i] SUBSEP "ref"])
        h = median(vals[rows[i] SUBSEP "hearth"])
        printf "| %s | %s | %s | %s | %s | %s | %s |", toupper(k[2]), k[3], \
               vals[rows[i] SUBSEP "ref"] == "" ? "-" : vals[rows[i] SUBSEP "ref"], \
               vals[rows[i] SUBSEP "hearth"], cell(r), cell(h), ratio(h, r)
        m = sec SUBSEP k[2] SUBSEP
        cs = ""
        for (rr = 1; rr <= maxround; ++rr) {
          c = ceiling_of(m, k[3], rr)
          if (c > 0) cs = cs " " sprintf("%.6f", c)
        }
        printf " %s | %s | %s |\n", cs == "" ? "-" : sprintf("%.1f", median(cs)), \
               share(m, k[3], "ref"), share(m, k[3], "hearth")
      }
    }
    for (i = 1; i <= nrows; ++i) {
      split(rows[i], k, SUBSEP)
      if (k[3] == "gbps") bw = bw " " k[1] " " toupper(k[2]) ": " vals[rows[i] SUBSEP "-"]
      if (k[3] == "gbpsafter") bw = bw " (after: " vals[rows[i] SUBSEP "-"] ")"
    }
    if (bw != "") printf "\nstreaming read (GB/s) per round, before (and after) each section'"'"'s file:%s\n", bw
    for (i = 1; i <= nrows; ++i) {
      split(rows[i], k, SUBSEP)
      if (k[3] == "wpeak") pk = pk " " k[1] " " toupper(k[2]) ": " vals[rows[i] SUBSEP "-"]
    }
    if (pk != "") printf "multiply-add peak of the products (GMAC/s) per round, before each section'"'"'s file:%s\n", pk
  }' "$runs"
exit
}
