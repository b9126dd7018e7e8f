#!/usr/bin/env bash
# A homelab on one machine: the broker, two nodes and a client each in a network namespace of its
# own with its own address (10.77.0.1 to .4 on a bridge, reached through veth pairs), all inside
# one namespace the test makes for itself (unshare), so nothing of the host's network is touched.
# With keys (CURVE), as a LAN broker must run. Latency and loss (tc netem, 40 ms and 2%) go on the
# second node's link where the kernel has netem; the first node's link is cut for 20 s while its
# jobs run, then restored. Checks: every job completes exactly once, the cut node's jobs moved to
# the other one (a second attempt, the history says where each ran), the cut node comes back
# online and serves again.
# Usage: tests/multihost.sh [BUILD_DIR] (default build/release). Exits 77 (skipped) where it
# cannot make network namespaces (not root, no unshare).
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build/release}")

fail() {
  echo "multihost: FAILED: $*" >&2
  exit 1
}

if [[ ${MULTIHOST_INSIDE:-} != 1 ]]; then
  if [[ $(id -u) != 0 ]] || ! command -v unshare >/dev/null || ! command -v ip >/dev/null ||
    ! unshare --net --mount true 2>/dev/null; then
    echo "multihost: skipped: needs root, unshare and ip to make network namespaces"
    exit 77
  fi
  # The test's own network and mount namespaces: its bridge, veths and named namespaces vanish
  # with it.
  MULTIHOST_INSIDE=1 exec unshare --net --mount --propagation private "$0" "$build"
fi

hearth=$build/tools/hearth
for b in "$hearth" "$build/broker/hearth-broker" "$build/node/hearth-node"; do
  [[ -x $b ]] || fail "missing $b (build first: cmake --build --preset release)"
done
stories=${HEARTH_TESTDATA:-$(realpath ../shared/testdata 2>/dev/null || true)}/models/stories260K.gguf
[[ -f $stories ]] || fail "no $stories (set HEARTH_TESTDATA)"

tmp=$(mktemp -d /tmp/hearth-multihost.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# --- The network: br0 here, one namespace per machine, a veth from each to br0.
source tests/netns-lan.sh
declare -A addr=([broker]=10.77.0.1 [n1]=10.77.0.2 [n2]=10.77.0.3 [client]=10.77.0.4)
netns_lan_make broker n1 n2 client
if ip netns exec n2 tc qdisc add dev eth0 root netem delay 40ms loss 2% 2>/dev/null; then
  echo "multihost: n2's link: 40 ms delay, 2% loss (netem)"
else
  echo "multihost: this kernel has no netem (sch_netem): n2's link gets no added latency or loss"
fi

# --- Keys, as README 'Using it' makes them.
auth=$tmp/auth
mkdir -p "$auth/nodes" "$auth/clients" "$auth/admins" "$tmp/keys"
"$hearth" keygen broker --dir "$auth" >/dev/null
for k in n1 n2; do "$hearth" keygen "$k" --dir "$tmp/keys" >/dev/null; done
"$hearth" keygen admin --dir "$tmp/keys" >/dev/null
cp "$tmp/keys/n1.pub" "$tmp/keys/n2.pub" "$auth/nodes/"
cp "$tmp/keys/admin.pub" "$auth/admins/"

printf 'heartbeat_ms: 500\nliveness: 4\n' >"$tmp/broker.yaml"
ip netns exec broker "$build/broker/hearth-broker" --bind "tcp://${addr[broker]}:5555" \
  --db "$tmp/hearth.db" --auth "$auth" --config "$tmp/broker.yaml" 2>"$tmp/broker.log" &
pids+=($!)
for n in n1 n2; do
  mkdir -p "$tmp/models-$n"
  ln -s "$stories" "$tmp/models-$n/stories260K.gguf"
  ip netns exec "$n" "$build/node/hearth-node" --broker "tcp://${addr[broker]}:5555" --name "$n" \
    --models "$tmp/models-$n" --engine null --null-tokens-per-s 20 --slots 2 \
    --broker-key "$auth/broker.pub" --key "$tmp/keys/$n.key" 2>"$tmp/$n.log" &
  pids+=($!)
done

cli() {  # the client machine's hearth, as the admin
  ip netns exec client "$hearth" "$@" --broker "tcp://${addr[broker]}:5555" \
    --broker-key "$auth/broker.pub" --key "$tmp/keys/admin.key"
}
online() {  # online NAME: whether the broker lists the node online
  cli nodes --json | python3 -c "
import json, sys
print(any(n['name'] == '$1' and n['online'] for n in json.load(sys.stdin)))" | grep -q True
}
wait_for() {  # wait_for SECONDS WHAT COMMAND...
  local secs=$1 until=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    ((SECONDS < until)) || fail "$what: not within $secs s; broker log: $(tail -5 "$tmp/broker.log")"
    sleep 0.5
  done
}
wait_for 30 "both nodes online" eval 'online n1 && online n2'
echo "multihost: broker ${addr[broker]}, nodes n1 ${addr[n1]} and n2 ${addr[n2]}, client ${addr[client]}: both nodes online"

# --- Work in flight, then n1's link cut for 20 s.
# submit_at_once ARRAY TOKENS LABEL: 8 jobs of TOKENS tokens submitted together, their ids into
# ARRAY. Together, because the test is about both nodes having work: submitted one after another
# by a slow client (an ASan build, a busy machine), jobs of a few seconds can find the first-ranked
# node with a free slot every time, and the other node would get none.
submit_at_once() {
  local -n into=$1
  local procs=() i
  for i in $(seq 1 8); do
    cli submit --id-only -m stories260K -n "$2" "$3 $i" >"$tmp/submit-$3-$i" &
    procs+=($!)
  done
  for i in "${procs[@]}"; do wait "$i" || fail "submitting the '$3' jobs"; done
  into=()
  for i in $(seq 1 8); do into+=("$(cat "$tmp/submit-$3-$i")"); done
}
# 5 s each at 20 tokens/s.
submit_at_once ids 100 job
# Until n1 runs some of them (2 slots each: 4 run, 4 wait).
wait_for 30 "n1 running a job" eval \
  "cli jobs --json | python3 -c \"import json,sys; sys.exit(0 if any(j['node'] == 'n1' and j['state'] == 'running' for j in json.load(sys.stdin)) else 1)\""
ip link set br-n1 down
echo "multihost: n1's link cut"
cut_at=$SECONDS
wait_for 30 "n1 offline" eval '! online n1'
echo "multihost: n1 offline after $((SECONDS - cut_at)) s"
sleep $((20 - (SECONDS - cut_at) > 0 ? 20 - (SECONDS - cut_at) : 0))
ip link set br-n1 up
echo "multihost: n1's link restored after $((SECONDS - cut_at)) s"
wait_for 60 "n1 online again" online n1
echo "multihost: n1 online again $((SECONDS - cut_at)) s after the cut"

# Every job completes, each once.
for id in "${ids[@]}"; do
  ip netns exec client timeout 120 "$hearth" watch "$id" --broker "tcp://${addr[broker]}:5555" \
    --broker-key "$auth/broker.pub" --key "$tmp/keys/admin.key" >/dev/null ||
    fail "watching job $id: $(cli job "$id" | head -20)"
done
# n1 serves again: new jobs land on both nodes. n1 lost attempts a moment ago, so for the broker's
# quarantine window it ranks below n2 and gets a job only while n2's two slots are full: 8 at once
# (1 s each) fill them.
submit_at_once more 20 after
for id in "${more[@]}"; do
  ip netns exec client timeout 60 "$hearth" watch "$id" --broker "tcp://${addr[broker]}:5555" \
    --broker-key "$auth/broker.pub" --key "$tmp/keys/admin.key" >/dev/null ||
    fail "watching job $id"
done

# --- The history: every job completed once; the ones n1 had when cut ran again on n2.
cli jobs --json --limit 100 >"$tmp/jobs.json"
python3 - "$tmp/jobs.json" "${#ids[@]}" "${#more[@]}" <<'EOF' || fail "the history is not as expected"
import json, sys
jobs = json.load(open(sys.argv[1]))
first, second = int(sys.argv[2]), int(sys.argv[3])
assert len(jobs) == first + second, f"{len(jobs)} jobs listed, {first + second} submitted"
by_id = sorted(jobs, key=lambda j: j["job_id"])
bad = [j for j in jobs if j["state"] != "completed"]
assert not bad, f"not completed: {bad}"
# Each job's tokens counted once: a job whose text was duplicated or cut would differ.
want = {**{j["job_id"]: 100 for j in by_id[:first]}, **{j["job_id"]: 20 for j in by_id[first:]}}
wrong = [j for j in jobs if j["n_gen"] != want[j["job_id"]]]
assert not wrong, f"token counts differ from what was asked: {wrong}"
moved = [j for j in by_id[:first] if j["attempts"] >= 2]
assert moved, "no job of the cut node ran a second attempt"
assert all(j["node"] == "n2" for j in moved), f"moved jobs ended elsewhere: {moved}"
after = {j["node"] for j in by_id[first:]}
assert "n1" in after, f"n1 served none of the jobs after it came back (nodes: {after})"
print(f"multihost: {len(jobs)} jobs completed once each; {len(moved)} moved from n1 to n2; "
      f"after the cut they ran on {sorted(after)}")
EOF
echo "multihost: passed"
