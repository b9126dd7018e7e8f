#!/usr/bin/env bash
# Installs hearth's dependencies from Debian packages.
#   deploy/install-deps.sh --build   what building and running hearth needs: the compilers, the
#                                    libraries' -dev packages, Vulkan's headers and shader
#                                    compiler, Node.js for the dashboard, GoogleTest (the release
#                                    preset configures the tests too), curl. The quickstart's set.
#   deploy/install-deps.sh           that, and what the tests and benchmarks need (tests/run.sh).
#   deploy/install-deps.sh PKG...    those packages instead (deploy/install-deps-aarch64.sh).
# Idempotent: packages already present are left as they are. Needs root (or sudo).
set -euo pipefail

build_packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config
  # engine
  libsentencepiece-dev nlohmann-json3-dev libpcre2-dev
  # wire, broker, node
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libsqlite3-dev libyaml-cpp-dev libspdlog-dev libfmt-dev
  # CLI
  libcli11-dev
  # pull/: downloads models (Hugging Face, Ollama's registry, URLs) over HTTP(S)
  libcurl4-openssl-dev
  # gateway: HTTP (Boost.Beast, header-only) and TLS
  libboost-dev libssl-dev
  # the Vulkan backend module: headers, loader and shader compiler (built where they are found)
  libvulkan-dev glslc
  # the release preset configures the tests (HEARTH_TESTS), which needs GoogleTest found
  libgtest-dev libgmock-dev
  # the quickstart speaks HTTP with curl
  curl
)
test_packages=(
  # the fuzz preset (clang and libFuzzer) and the format check
  clang clang-format libclang-rt-dev
  # sqlite3 to look into databases; wrk for the gateway's HTTP benchmark
  sqlite3 wrk
  # lavapipe (Vulkan on the CPU) for the Vulkan tests, and vulkaninfo
  mesa-vulkan-drivers vulkan-tools
  libbenchmark-dev
  # the durability test watches the broker's fsyncs with strace
  strace
  # tests/lan-copy.sh: the link's throughput beside a copy between nodes, its round trip, and
  # its 0.5 ms delay where the kernel has no netem (tests/netns-delay.cpp: an NFQUEUE rule)
  iperf3 iputils-ping iptables
  # the pull and model_flow tests' fake Hugging Face Hub and Ollama registry (tests/fake-model-source.py)
  python3
  # Debian packages: cpack's dpkg-shlibdeps, and the clean root tests/package-install.sh installs
  # them in
  dpkg-dev debootstrap
  # the dashboard's browser test (playwright-core drives Debian's Chromium)
  chromium
)

promtool=false
case "${1:-}" in
  --build)
    packages=("${build_packages[@]}")
    ;;
  "")
    packages=("${build_packages[@]}" "${test_packages[@]}")
    promtool=true
    ;;
  *)
    packages=("$@")
    ;;
esac
if [ $# -eq 0 ] || [ "${1:-}" = --build ]; then
  # The dashboard is bundled with esbuild from npm at build time (and the gateway's tests drive
  # it with the official OpenAI client from npm): Node.js and npm, from Debian unless the machine
  # has them already (a newer Node.js from elsewhere is fine).
  command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
updated=false

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  updated=true
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The tests check the gateway's /metrics with `promtool check metrics` (and the Grafana folder's
# files with promtool). Debian ships promtool only in the prometheus package, whose installation
# enables and starts a Prometheus server (prometheus.service) on the machine: the tests need the
# tool, not a server. So the package is downloaded and only its promtool (a program that needs
# nothing but libc) unpacked into /usr/local/bin.
if $promtool && ! command -v promtool >/dev/null 2>&1; then
  $updated || $sudo apt-get update -qq
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root prometheus)
  dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/root"
  $sudo install -m 0755 "$tmp/root/usr/bin/promtool" /usr/local/bin/promtool
  echo "install-deps: promtool from the prometheus package in /usr/local/bin (no server installed)"
fi
