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
