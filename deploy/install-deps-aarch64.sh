#!/usr/bin/env bash
# Installs what the aarch64 preset (CMakePresets.json; cmake/aarch64-linux-gnu.cmake) needs on a
# Debian amd64 machine: the arm64 cross compilers, qemu's user-mode emulator to run the arm64
# tests, and the arm64 builds of the libraries hearth links, through multiarch
# (dpkg --add-architecture arm64). Run deploy/install-deps.sh first: the header-only and
# architecture-independent packages (nlohmann-json, CLI11, Boost's headers) come from there.
# Idempotent. Needs root (or sudo).
#
# Two -dev packages cannot be installed beside their amd64 versions (they are not
# "Multi-Arch: same"): sentencepiece and yaml-cpp. Their arm64 packages are unpacked into
# HEARTH_AARCH64_ROOT (default /opt/hearth-aarch64) instead, where the toolchain file looks.
set -euo pipefail

root=${HEARTH_AARCH64_ROOT:-/opt/hearth-aarch64}
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

packages=(
  crossbuild-essential-arm64 qemu-user
  libpcre2-dev:arm64 libzmq3-dev:arm64 cppzmq-dev:arm64 libmsgpack-cxx-dev:arm64
  libsqlite3-dev:arm64 libspdlog-dev:arm64 libfmt-dev:arm64 libssl-dev:arm64
  # pull/ (hearth pull's downloads; the node links it): configured with the rest
  libcurl4-openssl-dev:arm64
  libgtest-dev:arm64 libgmock-dev:arm64
  # sentencepiece's dependency (the library itself is unpacked below)
  libprotobuf-lite32:arm64
)
unpacked=(libsentencepiece-dev libsentencepiece0 libyaml-cpp-dev libyaml-cpp0.7)

if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $sudo dpkg --add-architecture arm64
  $sudo apt-get update -qq
fi

"$(dirname "$0")/install-deps.sh" "${packages[@]}"

if [ ! -f "$root/.unpacked" ] || [ "$(cat "$root/.unpacked")" != "${unpacked[*]}" ]; then
  echo "install-deps-aarch64: unpacking ${unpacked[*]} (arm64) into $root"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && apt-get download $(printf '%s:arm64 ' "${unpacked[@]}"))
  $sudo mkdir -p "$root"
  for deb in "$tmp"/*.deb; do $sudo dpkg-deb -x "$deb" "$root"; done
  # pkg-config files name /usr: point them at the unpacked copy.
  $sudo sed -i "s|^prefix=/usr\$|prefix=$root/usr|" "$root"/usr/lib/aarch64-linux-gnu/pkgconfig/*.pc
  echo "${unpacked[*]}" | $sudo tee "$root/.unpacked" >/dev/null
fi
echo "install-deps-aarch64: ready (cross compilers, qemu-aarch64, arm64 libraries; $root)"
