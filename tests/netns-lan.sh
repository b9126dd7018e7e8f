# Sourced by the tests that make a LAN of network namespaces (multihost.sh, lan-copy.sh), run
# inside a network and mount namespace of their own (unshare): a bridge br0, and per machine a
# named namespace with eth0 (a veth whose other end is on br0) at its address, lo up.
# Usage: declare -A addr=([NAME]=ADDRESS ...); netns_lan_make NAME...
netns_lan_make() {
  mkdir -p /run/netns
  mount -t tmpfs none /run/netns
  ip link set lo up
  ip link add br0 type bridge
  ip link set br0 up
  local m
  for m in "$@"; do
    ip netns add "$m"
    ip link add "br-$m" type veth peer name eth0 netns "$m"
    ip link set "br-$m" master br0 up
    ip -n "$m" addr add "${addr[$m]}/24" dev eth0
    ip -n "$m" link set eth0 up
    ip -n "$m" link set lo up
  done
}

# Delays what namespace NAME sends on eth0 by DELAY_US microseconds where the kernel has no netem:
# an iptables NFQUEUE rule in its output hook hands each packet to netfilter's queue 0, where it
# stays in the kernel until TOOL (the build's tests/netns_delay, run in the namespace, writing to
# LOG) releases it DELAY_US after it was queued. Sets NETNS_DELAY_PID; returns 1 with the reason on
# stderr when it cannot (no iptables, no tool, the queue refused).
# Usage: netns_delay_start NAME DELAY_US TOOL LOG
netns_delay_start() {
  local m=$1 us=$2 tool=$3 log=$4
  NETNS_DELAY_PID=""
  command -v iptables >/dev/null || { echo "no iptables (deploy/install-deps.sh installs it)" >&2; return 1; }
  [[ -x $tool ]] || { echo "no $tool (build the target netns_delay)" >&2; return 1; }
  ip netns exec "$m" "$tool" 0 "$us" >"$log" 2>&1 &
  local pid=$! i
  # The rule goes in only once the queue is bound: a packet queued to nobody is dropped.
  for i in $(seq 100); do
    grep -q '^delaying' "$log" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  if ! grep -q '^delaying' "$log"; then
    kill "$pid" 2>/dev/null || true
    echo "netns_delay did not start: $(cat "$log")" >&2
    return 1
  fi
  if ! ip netns exec "$m" iptables -A OUTPUT -o eth0 -j NFQUEUE --queue-num 0 >&2; then
    kill "$pid" 2>/dev/null || true
    return 1
  fi
  NETNS_DELAY_PID=$pid
}

# A scratch folder in $tmp and the list $pids of background processes: at exit the processes are
# killed and waited for and the folder removed (the namespaces vanish with the caller's own).
# Usage: netns_lan_scratch PREFIX
netns_lan_scratch() {
  tmp=$(mktemp -d "/tmp/$1.XXXXXX")
  pids=()
  trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
}
