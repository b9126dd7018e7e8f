#!/usr/bin/env bash
# Installs every build and test dependency of hearth from Debian packages; with arguments, those
# packages instead (deploy/install-deps-aarch64.sh passes its own list).
# Idempotent: packages already present are left as they are. Needs root (or sudo).
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang clang-format libclang-rt-dev
  # engine
  libsentencepiece-dev nlohmann-json3-dev libpcre2-dev
  # wire, broker, node
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libsqlite3-dev sqlite3 libyaml-cpp-dev libspdlog-dev libfmt-dev
  # CLI
  libcli11-dev
  # gateway: HTTP (Boost.Beast, header-only) and TLS; wrk for its HTTP benchmark
  libboost-dev libssl-dev wrk
  # the quickstart and the gateway's tests speak HTTP with curl
  curl
  # Vulkan: headers, loader, shader compiler, and lavapipe (Vulkan on the CPU) for tests
  libvulkan-dev glslc mesa-vulkan-drivers vulkan-tools
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # the durability test watches the broker's fsyncs with strace
  strace
  # Debian packages: cpack's dpkg-shlibdeps, and the clean root tests/package-install.sh installs
  # them in
  dpkg-dev debootstrap
  # the dashboard's browser test (playwright-core drives Debian's Chromium) and `promtool check
  # metrics` on the gateway's /metrics (Debian's prometheus package)
  chromium prometheus
)

if [ $# -gt 0 ]; then
  packages=("$@")
else
  # The gateway's tests drive it with the official OpenAI client from npm: Node.js and npm, from
  # Debian unless the machine has them already (a newer Node.js from elsewhere is fine).
  command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
