#!/usr/bin/env bash
# The Debian packages on a clean machine (README "Install from packages"). Builds the .debs from a
# release build (cpack), makes a clean Debian 12 root (debootstrap --variant=minbase: no
# compiler, no -dev package), installs hearth, hearth-broker, hearth-node and hearth-gateway there
# with apt (their libraries come from the mirror), and checks:
#   - no compiler, no -dev package and no GPU library (CUDA, Vulkan) came with them;
#   - the maintainer scripts made the user, the folders and the keys, and enabled the units;
#   - the broker, the node and the gateway run as their units run them (ExecStart, User,
#     LimitNOFILE read from the installed units), as the hearth user, in a network namespace of
#     their own: a job submitted with the packaged CLI (the admin key the package made) streams
#     text back from stories260K in /var/lib/hearth/models, and `hearth jobs`/`hearth nodes`
#     show the job and the node; the gateway answers /health with the broker connected;
#   - hearth-vulkan and hearth-cuda install, and `hearth devices` finds their modules in
#     /usr/lib/hearth;
#   - purging removes the keys and everything in /var/lib/hearth but the models.
# Usage: tests/package-install.sh [BUILD_DIR] (default build/release, built with the prefix /usr:
# the release preset's). Exits 77 (skipped) only when this machine cannot make the root: not
# root, or the mirror cannot be reached. HEARTH_DEBIAN_MIRROR picks the mirror
# (http://deb.debian.org/debian); HEARTH_CHROOT_CACHE=DIR keeps the bare root there as a tarball
# and starts from it next time.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
  echo "package-install: FAILED: $*" >&2
  exit 1
}

# --- Inside the network namespace (the script runs itself with `unshare --net`): start the units'
# commands in the root, submit, check. Its own port 5555 and 8080, whatever the host runs.
if [[ ${1:-} == --in-netns ]]; then
  root=$2
  logs=$3
  ip link set lo up
  units=$root/lib/systemd/system
  pids=()
  trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait' EXIT
  trap 'exit 130' INT TERM

  unit_field() {  # unit_field UNIT KEY: the value of KEY= in the installed unit (exactly one)
    local v
    v=$(sed -n "s/^$2=//p" "$units/$1.service")
    [[ -n $v && $(wc -l <<<"$v") -eq 1 ]] || fail "$1.service has no single $2= line"
    printf '%s' "$v"
  }
  # As systemd would: the unit's User (uid and gid from the root's passwd), LimitNOFILE as soft
  # and hard limit, a bare environment, ExecStart split on spaces (it has no quoting). Where root
  # may not raise the hard limit (no CAP_SYS_RESOURCE, as in some containers; systemd can), the
  # hard limit it has, said in one line.
  start_unit() {
    local unit=$1 user limit cmd uid gid hard
    user=$(unit_field "$unit" User)
    limit=$(unit_field "$unit" LimitNOFILE)
    if ! prlimit --nofile="$limit:$limit" true 2>/dev/null; then
      hard=$(ulimit -Hn)
      echo "package-install: this machine cannot raise the descriptor limit to $limit (hard limit $hard): $unit runs with $hard"
      limit=$hard
    fi
    cmd=$(unit_field "$unit" ExecStart)
    uid=$(awk -F: -v u="$user" '$1 == u {print $3}' "$root/etc/passwd")
    gid=$(awk -F: -v u="$user" '$1 == u {print $4}' "$root/etc/passwd")
    [[ -n $uid ]] || fail "$unit.service runs as $user, who is not in the root's /etc/passwd"
    echo "package-install: $unit as $user (LimitNOFILE=$limit): $cmd"
    # shellcheck disable=SC2086
    prlimit --nofile="$limit:$limit" chroot --userspec="$uid:$gid" "$root" \
      env -i PATH=/usr/bin:/bin LANG=C.UTF-8 $cmd >"$logs/$unit.log" 2>&1 &
    pids+=($!)
  }
  # cli SECONDS ARGS...: the CLI as root on the broker's machine, with the admin key the broker's
  # package made, bounded (it waits for a broker that does not answer).
  cli() {
    local seconds=$1
    shift
    timeout "$seconds" chroot "$root" env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
      HEARTH_BROKER=tcp://127.0.0.1:5555 HEARTH_KEY=/etc/hearth/admin.key \
      HEARTH_BROKER_KEY=/etc/hearth/broker.pub hearth "$@"
  }
  show_logs() {
    for f in "$logs"/hearth-*.log; do
      echo "--- $f" >&2
      tail -n 20 "$f" >&2
    done
  }

  start_unit hearth-broker
  start_unit hearth-node
  start_unit hearth-gateway
  for _ in $(seq 60); do
    cli 5 models 2>/dev/null | grep -q stories260K && break
    sleep 0.5
  done
  cli 5 models 2>&1 | grep -q stories260K || {
    show_logs
    fail "the node did not register stories260K with the broker within 30 s (logs above)"
  }

  echo "--- hearth submit --stream -m stories260K -n 48 --temp 0 'Once upon a time' (packaged CLI)"
  out=$(cli 120 submit --stream -m stories260K -n 48 --temp 0 "Once upon a time" 2>"$logs/submit.err") || {
    cat "$logs/submit.err" >&2
    show_logs
    fail "hearth submit failed"
  }
  printf '%s\n' "$out"
  words=$(wc -w <<<"$out")
  ((words >= 10)) || fail "the job streamed back $words words, expected a story"
  echo "--- hearth jobs"
  jobs=$(cli 30 jobs) || fail "hearth jobs failed"
  printf '%s\n' "$jobs"
  if ! grep -q completed <<<"$jobs" || ! grep -q stories260K <<<"$jobs"; then
    fail "hearth jobs does not list the completed stories260K job"
  fi
  echo "--- hearth nodes"
  nodes=$(cli 30 nodes) || fail "hearth nodes failed"
  printf '%s\n' "$nodes"
  grep -q "$(hostname)" <<<"$nodes" || fail "hearth nodes does not list the node $(hostname)"

  # The gateway, with its key in the broker's clients/: /health through bash's /dev/tcp (the root
  # has no curl).
  health=""
  for _ in $(seq 50); do
    health=$(chroot "$root" bash -c 'exec 3<>/dev/tcp/127.0.0.1/8080 &&
      printf "GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n" >&3 && cat <&3' \
      2>/dev/null || true)
    grep -q '"broker":"connected"' <<<"$health" && break
    sleep 0.2
  done
  echo "--- GET http://127.0.0.1:8080/health (hearth-gateway)"
  tail -n 1 <<<"$health"
  grep -q '"broker":"connected"' <<<"$health" || {
    show_logs
    fail "the gateway did not answer /health with the broker connected"
  }
  exit 0
fi

build=${1:-build/release}
testdata=${HEARTH_TESTDATA:-../shared/testdata}
mirror=${HEARTH_DEBIAN_MIRROR:-http://deb.debian.org/debian}
model=$testdata/models/stories260K.gguf

[[ $(id -u) -eq 0 ]] || { echo "package-install: skipped: not root (a chroot needs root)"; exit 77; }
host=${mirror#*://}
host=${host%%/*}
timeout 10 bash -c "exec 3<>/dev/tcp/$host/80" 2>/dev/null ||
  { echo "package-install: skipped: the mirror $host cannot be reached"; exit 77; }
for tool in debootstrap cpack dpkg-shlibdeps unshare prlimit ip; do
  command -v "$tool" >/dev/null || fail "$tool is missing (deploy/install-deps.sh installs it)"
done
[[ -f $model ]] || fail "no $model (HEARTH_TESTDATA)"
[[ -x $build/tools/hearth ]] || fail "$build is not built (cmake --build --preset release)"
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
[[ $prefix == /usr ]] ||
  fail "$build is configured with CMAKE_INSTALL_PREFIX=$prefix; the packages need /usr (cmake --preset release sets it)"

work=$(mktemp -d /tmp/hearth-package-install.XXXXXX)
root=$work/root
cleanup() {
  for m in "$root/dev" "$root/proc"; do
    if mountpoint -q "$m" 2>/dev/null; then umount -l "$m" || true; fi
  done
  # --one-file-system: never into a mount (the host's /dev) that did not go.
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$work/debs" "$work/logs"
t0=$SECONDS
lap() { echo "package-install: $1 ($((SECONDS - t0)) s)"; }

# --- The packages.
(cd "$build" && cpack -G DEB -B "$work/cpack") >"$work/logs/cpack.log" 2>&1 || {
  tail -n 40 "$work/logs/cpack.log" >&2
  fail "cpack failed (log above)"
}
cp "$work"/cpack/*.deb "$work/debs/"
for deb in "$work"/debs/*.deb; do
  printf '  %-40s %6s KiB  Depends: %s\n' "$(basename "$deb")" "$(($(stat -c %s "$deb") / 1024))" \
    "$(dpkg-deb -f "$deb" Depends)"
done
for p in hearth hearth-broker hearth-node hearth-gateway; do
  ls "$work"/debs/"${p}"_*.deb >/dev/null 2>&1 || fail "cpack made no $p package"
done
lap "packages built"

# --- The clean root.
cache=${HEARTH_CHROOT_CACHE:-}
if [[ -n $cache && -f $cache/bookworm-minbase.tar ]]; then
  mkdir "$root"
  tar -xf "$cache/bookworm-minbase.tar" -C "$root"
else
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/logs/debootstrap.log" 2>&1 || {
    tail -n 20 "$work/logs/debootstrap.log" >&2
    fail "debootstrap failed (log above)"
  }
  if [[ -n $cache ]]; then
    mkdir -p "$cache"
    tar -cf "$cache/bookworm-minbase.tar.tmp" -C "$root" . && mv "$cache/bookworm-minbase.tar.tmp" "$cache/bookworm-minbase.tar"
  fi
fi
lap "clean bookworm root made (debootstrap --variant=minbase)"
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
cp /etc/resolv.conf "$root/etc/resolv.conf"

in_root() {
  chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME=/root \
    DEBIAN_FRONTEND=noninteractive "$@"
}
# shellcheck disable=SC2016 # dpkg-query's format, not the shell's
installed() { in_root dpkg-query -W -f '${db:Status-Abbrev} ${Package}\n' | awk '$1 == "ii" {print $2}'; }
# debs PACKAGE...: their files as the root sees them (/debs/NAME_VERSION_ARCH.deb)
debs() {
  local p f
  for p in "$@"; do
    f=$(cd "$root/debs" && ls "${p}"_*.deb 2>/dev/null) || continue
    echo "/debs/$f"
  done
}

# --- Install. First what a CPU node's machine would get (apt's simulation): no GPU library.
mkdir "$root/debs"
cp "$work"/debs/*.deb "$root/debs/"
in_root apt-get update -qq >"$work/logs/apt.log" 2>&1 || fail "apt-get update in the root failed"
mapfile -t node_debs < <(debs hearth hearth-node)
would=$(in_root apt-get install -s "${node_debs[@]}" 2>&1 | awk '$1 == "Inst" {print $2}') ||
  fail "apt-get cannot install hearth-node: $would"
gpu=$(grep -E 'vulkan|cuda|cublas|nvidia|mesa|-dev$' <<<"$would" || true)
[[ -z $gpu ]] || fail "hearth-node alone would pull GPU or -dev packages: $gpu"
echo "package-install: hearth-node alone pulls $(wc -l <<<"$would") packages, none of a GPU"
# Then the broker's machine: the broker first, the node and the gateway after it (each is let
# into the broker's folders by its own postinst).
for group in "hearth hearth-broker" "hearth-node hearth-gateway"; do
  # shellcheck disable=SC2086 # two package names
  mapfile -t pkgs < <(debs $group)
  in_root apt-get install -y "${pkgs[@]}" >>"$work/logs/apt.log" 2>&1 || {
    tail -n 40 "$work/logs/apt.log" >&2
    fail "apt-get install of $group failed (log above)"
  }
done
grep -E '^(Setting up hearth|hearth-setup)' "$work/logs/apt.log" | sed 's/^/  /'
lap "hearth, hearth-broker, then hearth-node, hearth-gateway installed with apt"

# Nothing a build needs, nothing of a GPU.
dev=$(installed | grep -E -- '-dev$|^(gcc|g\+\+|cpp|clang)(-[0-9]+)?$|^build-essential$' || true)
[[ -z $dev ]] || fail "the root has compiler or -dev packages: $dev"
for c in cc gcc g++ c++ clang; do
  in_root sh -c "command -v $c" >/dev/null && fail "the root has a compiler: $c"
done
gpu=$(installed | grep -E 'vulkan|cuda|cublas|nvidia|mesa' || true)
[[ -z $gpu ]] || fail "the node's packages pulled GPU packages: $gpu"
echo "package-install: no compiler, no -dev package, no GPU package in the root ($(installed | wc -l) packages)"

# What the maintainer scripts made.
in_root getent passwd hearth >/dev/null || fail "postinst made no hearth user"
check_file() {  # check_file PATH OWNER MODE
  local got
  got=$(in_root stat -c '%U %a' "$1" 2>/dev/null) || fail "postinst made no $1"
  [[ $got == "$2 $3" ]] || fail "$1 is $got, expected $2 $3"
}
check_file /etc/hearth/auth/broker.key hearth 600
check_file /etc/hearth/broker.pub root 644
check_file /etc/hearth/admin.key root 600
check_file /etc/hearth/node.key hearth 600
check_file /etc/hearth/gateway.key hearth 600
check_file /var/lib/hearth hearth 750
check_file /var/lib/hearth/models hearth 755
in_root sh -c 'ls /etc/hearth/auth/nodes/*.pub /etc/hearth/auth/clients/gateway.pub /etc/hearth/auth/admins/admin.pub' \
  >/dev/null || fail "the local node, gateway and admin keys are not in the broker's folders"
for u in hearth-broker hearth-node hearth-gateway; do
  [[ -L $root/etc/systemd/system/multi-user.target.wants/$u.service ]] ||
    fail "$u.service is not enabled (no multi-user.target.wants link)"
  grep -q '^LimitNOFILE=' "$root/lib/systemd/system/$u.service" || fail "$u.service sets no LimitNOFILE"
done
for c in broker node gateway; do
  in_root dpkg-query --control-show "hearth-$c" conffiles 2>/dev/null | grep -q "/etc/hearth/$c.yaml" ||
    fail "/etc/hearth/$c.yaml is not a conffile of hearth-$c"
done
echo "package-install: user, folders, keys (owners and modes), enabled units, conffiles as expected"

# --- Run: the units' commands, a job through the packaged CLI.
cp "$model" "$root/var/lib/hearth/models/"
chmod 0644 "$root/var/lib/hearth/models/stories260K.gguf"
unshare --net "$0" --in-netns "$root" "$work/logs"
lap "broker, node and gateway ran as their units; the job streamed back"

# --- The GPU modules: their packages install, the CLI finds them in /usr/lib/hearth.
mapfile -t gpu_debs < <(debs hearth-vulkan hearth-cuda)
if ((${#gpu_debs[@]} > 0)); then
  in_root apt-get install -y --no-install-recommends "${gpu_debs[@]}" >>"$work/logs/apt.log" 2>&1 || {
    tail -n 40 "$work/logs/apt.log" >&2
    fail "apt-get install of ${gpu_debs[*]} failed (log above)"
  }
  echo "--- hearth devices (after installing ${gpu_debs[*]})"
  devices=$(in_root hearth devices 2>&1) || fail "hearth devices failed: $devices"
  printf '%s\n' "$devices"
  for deb in "${gpu_debs[@]}"; do
    name=$(basename "$deb" | sed -E 's/^hearth-([a-z]+)_.*/\1/')
    if grep -q "libhearth-$name.so not found" <<<"$devices"; then
      fail "hearth devices does not find the installed libhearth-$name.so in /usr/lib/hearth"
    fi
  done
  lap "GPU module packages installed"
fi

# --- Purge: the keys and the state the packages made go, the models stay. An older broker locked
# the database through a hearth.db.lock beside it, which stays after an upgrade: purge removes it
# too (one is made here as that broker left it).
in_root install -o hearth -g hearth -m 0640 /dev/null /var/lib/hearth/hearth.db.lock
in_root apt-get purge -y hearth-broker hearth-node hearth-gateway \
  >>"$work/logs/apt.log" 2>&1 || fail "apt-get purge failed"
[[ ! -e $root/etc/hearth/auth && ! -e $root/etc/hearth/node.key && ! -e $root/var/lib/hearth/hearth.db ]] ||
  fail "purge left keys or the job database behind"
# Nothing the services made stays in the state folder (the database's -wal, -shm and .lock
# files, the gateway's database): only the models — the models folder and the node's model store
# (models pulled or copied from other nodes: gigabytes a reinstall should not download again).
left=$(cd "$root/var/lib/hearth" && find . -mindepth 1 -maxdepth 1 ! -name models ! -name store -printf '%P ')
[[ -z $left ]] || fail "purge left $left in /var/lib/hearth"
[[ -f $root/var/lib/hearth/models/stories260K.gguf ]] || fail "purge removed the models"
[[ -d $root/var/lib/hearth/store ]] || fail "purge removed the model store"
[[ ! -e $root/etc/systemd/system/multi-user.target.wants/hearth-broker.service ]] ||
  fail "purge left the broker's enable link"
lap "purged: keys, database and enable links gone, models kept"
echo "package-install: passed"
