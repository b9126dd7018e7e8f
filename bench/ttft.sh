#!/usr/bin/env bash
# Time to first token through the broker against the engine alone, in one run on one machine:
# a PROMPT_TOKENS-token prompt (default 1000) on MODEL.
#   alone:   `hearth run -n 1 --json`: the prompt's forward pass as the engine times it (loading
#            the model and its one-token warm-up, engine/context.h, come first and are not
#            counted).
#   broker:  `hearth up` (broker, node, gateway in one process, the model loaded once), then
#            `hearth submit --json -n 1`: from the moment the CLI starts to the first token event
#            it prints, so it counts what a user waits for: connecting, the job's commit, the
#            node pulling it, the forward pass, the token's way back through the broker.
# ROUNDS rounds (default 3) alternate the two; the table gives every run, the medians and
# broker / alone.
#
# Usage: bench/ttft.sh
#   MODEL                GGUF file (default build/bench-models/tinyllama-1.1b.q4_k_m.gguf, made
#                        with hearth mkmodel when absent)
#   PROMPT_TOKENS        prompt length in tokens, BOS included (default 1000)
#   THREADS              engine threads of both (default 2)
#   ROUNDS               rounds (default 3)
#   HEARTH_TTFT_PORT     the broker's port on 127.0.0.1 (default 5971; the gateway takes +1)
#   HEARTH_BUILD_DIR     build folder (default build/release)
# Nothing passes or fails on a timing; the exit status is non-zero only when something could not
# run.
# The whole script is one compound command, read before any of it runs: bash reads a script as it
# goes, so editing this file during a run would change the run (as bench/cpu-speed.sh says).
{
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/median.sh
build=${HEARTH_BUILD_DIR:-build/release}
hearth=$build/tools/hearth
model=${MODEL:-build/bench-models/tinyllama-1.1b.q4_k_m.gguf}
n=${PROMPT_TOKENS:-1000}
threads=${THREADS:-2}
rounds=${ROUNDS:-3}
port=${HEARTH_TTFT_PORT:-5971}
[ -x "$hearth" ] || {
  echo "missing $hearth: cmake --preset release && cmake --build --preset release" >&2
  exit 1
}
if [ ! -s "$model" ]; then
  mkdir -p "$(dirname "$model")"
  "$hearth" mkmodel --shape tinyllama-1.1b --type q4_k_m --seed 1 -o "$model" >&2
fi

# "hello" then " hello" n - 2 times: one token each in Llama's vocabularies, with BOS n tokens.
prompt="hello$(printf ' hello%.0s' $(seq 2 $((n - 1))))"
got=$("$hearth" tokenize -m "$model" -- "$prompt" | wc -w)
echo "prompt: $got tokens as hearth tokenize counts them (BOS included where the model adds it)"

work=$(mktemp -d)
mkdir -p "$work/models"
name=ttft-model
ln -s "$(realpath "$model")" "$work/models/$name.gguf"
export HEARTH_BROKER=tcp://127.0.0.1:$port
export XDG_CONFIG_HOME=$work/config XDG_DATA_HOME=$work/data
"$hearth" up --models "$work/models" --bind "$HEARTH_BROKER" --db "$work/hearth.db" \
  --http "127.0.0.1:$((port + 1))" --slots 1 -t "$threads" >"$work/up.log" 2>&1 &
up=$!
trap 'kill $up 2>/dev/null; wait $up 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 600); do
  "$hearth" models 2>/dev/null | grep -q "$name" && break
  sleep 0.1
done
"$hearth" models | grep -q "$name" || {
  echo "the node did not advertise $name; its log:" >&2
  cat "$work/up.log" >&2
  exit 1
}

# The node loads a model on its first job: one short job first, so no timed job pays for that.
"$hearth" submit -m "$name" -n 1 --temp 0 -p hello >/dev/null

now() { date +%s.%N; }
alone=() broker=()
for r in $(seq 1 "$rounds"); do
  j=$("$hearth" run -m "$model" -p "$prompt" -n 1 --temp 0 -t "$threads" --json | tail -n 1)
  alone+=("$(sed -n 's/.*"n_prompt": *\([0-9]*\).*"prompt_tps": *\([0-9.eE+-]*\).*/\1 \2/p' \
    <<<"$j" | awk '{ printf "%.3f", $1 / $2 }')")
  start=$(now)
  first=
  while IFS= read -r line; do
    if [ -z "$first" ] && [[ $line == *'"event":"tokens"'* ]]; then first=$(now); fi
  done < <("$hearth" submit --json -m "$name" -n 1 --temp 0 -p "$prompt")
  [ -n "$first" ] || {
    echo "no token event came back; the service's log:" >&2
    cat "$work/up.log" >&2
    exit 1
  }
  broker+=("$(awk -v a="$start" -v b="$first" 'BEGIN { printf "%.3f", b - a }')")
  echo "round $r/$rounds: alone ${alone[-1]} s, through the broker ${broker[-1]} s" >&2
done

ma=$(printf '%s\n' "${alone[@]}" | median)
mb=$(printf '%s\n' "${broker[@]}" | median)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "machine: ${cpu:-unknown CPU}, $(nproc) cores; $threads threads; $(basename "$model")"
echo
echo "| path | runs (s) | median (s) |"
echo "| --- | --- | ---: |"
echo "| hearth run (the forward pass) | ${alone[*]} | $ma |"
echo "| hearth submit through the broker (to the first token event) | ${broker[*]} | $mb |"
awk -v a="$ma" -v b="$mb" 'BEGIN { printf "\nbroker / alone: **%.2fx**\n", b / a }'
exit
}
