#!/usr/bin/env bash
# Issue 55: one model split across nodes against the same model on one node, over a homelab's
# links. Inside a network namespace of its own (unshare; nothing of the host's network is
# touched): the broker, three nodes and a client each in a namespace (10.79.0.1 to .5 on a
# bridge), each node's sending shaped to 1 Gbit/s (tbf) and delayed DELAY_US each way (netem where
# the kernel has it, else tests/netns-delay.cpp's netfilter queue). A TinyLlama-1.1B-shaped Q4_K_M
# model (hearth mkmodel, random weights, cached in build/bench-models) is run whole on n1 (under
# a second name only n1 serves: the same file, the same page cache), and split over n1,n2 and
# n1,n2,n3 (`hearth models place --split`), in ROUNDS rounds (default 3) of all three in turn, each
# measured the same way (the table gives each figure's median over the rounds):
#   tg   one greedy job of TOKENS tokens: generated tokens over started -> finished (per token);
#   tg×4 four such jobs submitted together (node slots 4): their tokens over the first start to
#        the last finish;
#   pp   a prompt of about 1,000 tokens, 1 token generated: prompt tokens over assigned -> started
#        (the prompt's forward pass; nothing loads then: the model was loaded by the runs before).
# Threads: every node runs THREADS threads (default 2: all of this machine's cores). The stages of
# a pipeline compute one after another (a step goes round the ring; no micro-batches overlap), so
# at any moment one process computes and the cores are never shared between two stages' work.
# Prints a table: every figure beside the whole model's, and the ratios the issue names.
# Usage: bench/pipeline-speed.sh [BUILD_DIR]; DELAY_US (200), TOKENS (64), THREADS (2), ROUNDS (3).
# Nothing is asserted on timing. Exits 77 where it cannot make network namespaces.
{
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build/release}")
delay_us=${DELAY_US:-200}
tokens=${TOKENS:-64}
threads=${THREADS:-2}
rounds=${ROUNDS:-3}

if [[ ${PIPELINE_SPEED_INSIDE:-} != 1 ]]; then
  if [[ $(id -u) != 0 ]] || ! command -v unshare >/dev/null || ! command -v ip >/dev/null ||
    ! command -v tc >/dev/null || ! unshare --net --mount true 2>/dev/null; then
    echo "pipeline-speed: skipped: needs root, unshare, ip and tc to make network namespaces"
    exit 77
  fi
  PIPELINE_SPEED_INSIDE=1 exec unshare --net --mount --propagation private "$0" "$build"
fi

hearth=$build/tools/hearth
for b in "$hearth" "$build/broker/hearth-broker" "$build/node/hearth-node"; do
  [[ -x $b ]] || { echo "missing $b (build first: cmake --build --preset release)" >&2; exit 1; }
done
cache=${HEARTH_BENCH_MODELS:-build/bench-models}
model=$cache/tinyllama-1.1b.q4_k_m.gguf
if [[ ! -f $model ]]; then
  mkdir -p "$cache"
  "$hearth" mkmodel --shape tinyllama-1.1b --type q4_k_m --seed 1 -o "$model" >&2
fi
model=$(realpath "$model")
name=tinyllama-1.1b.q4_k_m
whole=tinyllama-whole  # the same file, served by n1 alone: the model run whole

source tests/netns-lan.sh
netns_lan_scratch hearth-pipeline-speed
declare -A addr=([broker]=10.79.0.1 [n1]=10.79.0.2 [n2]=10.79.0.3 [n3]=10.79.0.4 [client]=10.79.0.5)
netns_lan_make broker n1 n2 n3 client
shaping=""
for m in n1 n2 n3; do
  if ip netns exec "$m" tc qdisc add dev eth0 root netem rate 1gbit delay "${delay_us}us" limit 100000 2>"$tmp/tc.err"; then
    shaping="netem: 1 Gbit/s, $delay_us us each way"
  elif ip netns exec "$m" tc qdisc add dev eth0 root tbf rate 1gbit burst 1mb latency 10ms 2>>"$tmp/tc.err"; then
    if [[ $delay_us == 0 ]]; then
      shaping="tbf: 1 Gbit/s, no added delay"
    elif netns_delay_start "$m" "$delay_us" "$build/tests/netns_delay" "$tmp/delay-$m.log" 2>"$tmp/delay.err"; then
      pids+=("$NETNS_DELAY_PID")
      shaping="tbf: 1 Gbit/s; netns_delay: $delay_us us each way (no netem here)"
    else
      shaping="tbf: 1 Gbit/s, NO added delay ($(head -1 "$tmp/delay.err"))"
    fi
  else
    echo "pipeline-speed: skipped: neither tc netem nor tbf: $(cat "$tmp/tc.err")"
    exit 77
  fi
done
rtt=$(ip netns exec n1 ping -c 5 -i 0.2 -q "${addr[n2]}" | sed -n 's|.*= [0-9.]*/\([0-9.]*\)/.*|\1|p')

auth=$tmp/auth
mkdir -p "$auth/nodes" "$auth/admins" "$tmp/keys"
"$hearth" keygen broker --dir "$auth" >/dev/null
for k in n1 n2 n3 admin; do "$hearth" keygen "$k" --dir "$tmp/keys" >/dev/null; done
for k in n1 n2 n3; do cp "$tmp/keys/$k.pub" "$auth/nodes/"; done
cp "$tmp/keys/admin.pub" "$auth/admins/"
ip netns exec broker "$build/broker/hearth-broker" --bind "tcp://${addr[broker]}:5555" \
  --db "$tmp/hearth.db" --auth "$auth" 2>"$tmp/broker.log" &
pids+=($!)
printf 'threads: %s\n' "$threads" >"$tmp/node.yaml"
start_nodes() {  # start_nodes NAME...: the nodes, each serving the model, until all are online
  local n i
  for n in "$@"; do
    mkdir -p "$tmp/models-$n"
    ln -s "$model" "$tmp/models-$n/$name.gguf"
    [[ $n == n1 ]] && ln -s "$model" "$tmp/models-$n/$whole.gguf"
    ip netns exec "$n" "$build/node/hearth-node" --broker "tcp://${addr[broker]}:5555" --name "$n" \
      --models "$tmp/models-$n" --slots 4 --config "$tmp/node.yaml" --store "$tmp/store-$n" \
      --broker-key "$auth/broker.pub" --key "$tmp/keys/$n.key" 2>"$tmp/$n.log" &
    pids+=($!)
  done
  for i in $(seq 60); do
    [[ $(cli nodes --json | python3 -c "import json,sys; print(sum(n['online'] for n in json.load(sys.stdin)))") == "$online_want" ]] && return
    sleep 0.5
  done
  echo "pipeline-speed: the nodes did not come online: $(tail -3 "$tmp/broker.log")" >&2
  exit 1
}
cli() {
  ip netns exec client "$hearth" "$@" --broker "tcp://${addr[broker]}:5555" \
    --broker-key "$auth/broker.pub" --key "$tmp/keys/admin.key"
}

prompt1000=$(python3 -c "print(' '.join(['the little cat sat on the warm mat by the door and'] * 90))")
# run_jobs MODEL N TOKENS PROMPT: N jobs submitted together, watched to their end; their ids.
run_jobs() {
  local m=$1 n=$2 k=$3 text=$4 procs=() i
  for i in $(seq 1 "$n"); do
    cli submit --id-only -m "$m" -n "$k" --temp 0 "$text" >"$tmp/id-$i" &
    procs+=($!)
  done
  for p in "${procs[@]}"; do wait "$p"; done
  for i in $(seq 1 "$n"); do
    local id
    id=$(cat "$tmp/id-$i")
    cli watch "$id" >/dev/null
    echo "$id"
  done
}
# figures IDS...: "tokens/s" of generation (tg) over the first start to the last finish, and of
# the prompt (pp) over assigned -> started, from the jobs' records, and the prompt's tokens.
figures() {
  local id
  for id in "$@"; do cli job "$id" --json; echo; done | python3 -c "
import json, sys
jobs = [json.loads(l) for l in sys.stdin if l.strip()]
s = [j['summary'] for j in jobs]
gen = sum(x['n_gen'] for x in s)
t = max(max(x['finished_ms'] for x in s) - min(x['started_ms'] for x in s), 1) / 1000
def assigned(j):
    return max(e['time_ms'] for e in j['events'] if e['event'] == 'assigned')
pp = [x['n_prompt'] / (max(x['started_ms'] - assigned(j), 1) / 1000) for j, x in zip(jobs, s)]
print(f'{gen / t:.2f} {sum(pp) / len(pp):.1f} {s[0][\"n_prompt\"]}')"
}
# output ID: a job's text, as the broker recorded it.
output() {
  cli job "$1" --json | python3 -c "import json, sys; print(json.load(sys.stdin)['output'])"
}
prompt1000=$(python3 -c "print(' '.join(['the little cat sat on the warm mat by the door and'] * 90))")
declare -A tg tg4 pp text
measure() {  # measure LABEL MODEL: one round's figures, appended to the label's lists
  local id a b
  run_jobs "$2" 1 4 "warm up" >/dev/null
  id=$(run_jobs "$2" 1 "$tokens" "Once upon a time")
  read -r a _ _ < <(figures "$id")
  tg[$1]+=" $a"
  text[$1]=$(output "$id")
  read -r a _ _ < <(figures $(run_jobs "$2" 4 "$tokens" "Once upon a time"))
  tg4[$1]+=" $a"
  read -r _ b n_pp < <(figures $(run_jobs "$2" 1 1 "$prompt1000"))
  pp[$1]+=" $b"
}

source bench/median.sh
online_want=1 start_nodes n1
online_want=3 start_nodes n2 n3
for r in $(seq 1 "$rounds"); do
  measure whole "$whole"
  cli models place "$name" --split n1,n2 >/dev/null
  measure split2 "$name"
  cli models place "$name" --split n1,n2,n3 >/dev/null
  measure split3 "$name"
done
stages=$(cli models | sed -n '/split models/,$p' | tail -n +2)

echo "pipeline-speed: $name, $threads threads per node, links: $shaping; ping n1 -> n2: $rtt ms round trip; $rounds rounds"
echo "last split: $stages"
for r in split2 split3; do
  [[ ${text[$r]} == "${text[whole]}" ]] && same=yes || same=NO
  echo "$r: the same $tokens greedy tokens' text as the whole model: $same"
done
med() { tr ' ' '\n' <<<"$1" | grep . | median; }
echo
echo "| run | tg (1 seq) t/s | vs whole | tg (4 seqs) t/s | vs 1 seq | pp ($n_pp tokens) t/s | vs whole | runs (tg; tg x4; pp) |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
for r in whole split2 split3; do
  python3 -c "
tg, tg4, pp, wtg, wpp = $(med "${tg[$r]}"), $(med "${tg4[$r]}"), $(med "${pp[$r]}"), $(med "${tg[whole]}"), $(med "${pp[whole]}")
print(f'| $r | {tg:.2f} | {tg / wtg:.0%} | {tg4:.2f} | {tg4 / tg:.2f}x | {pp:.1f} | {pp / wpp:.0%} | ${tg[$r]};${tg4[$r]};${pp[$r]} |')"
done
exit 0
}
