#!/bin/sh
# Installs the npm packages of a folder with a package-lock.json (exactly, no install scripts) into
# a folder of the build, so that the source tree stays clean: cmake/npm-ci.sh SOURCE_DIR INSTALL_DIR.
# Run by the dashboard's build (dashboard/CMakeLists.txt) and the ctest fixtures of the npm-driven
# tests (tests/openai, tests/dashboard); does nothing when that lock is installed already, so
# the network is needed once per lockfile.
set -eu
src=$1
dst=$2
mkdir -p "$dst"
if [ -f "$dst/node_modules/.package-lock.json" ] && cmp -s "$src/package-lock.json" "$dst/package-lock.json"; then
  echo "npm-ci: $dst is up to date"
  exit 0
fi
command -v npm >/dev/null 2>&1 || { echo "npm-ci: npm is not installed (deploy/install-deps.sh installs it)" >&2; exit 1; }
cp "$src/package.json" "$src/package-lock.json" "$dst/"
cd "$dst"
npm ci --no-audit --no-fund --ignore-scripts
