#!/usr/bin/env bash
# The tree's layering, checked: every #include "folder/..." of hearth's own code (tests beside the
# code excepted: a test may reach up to build what it checks) goes to a folder its component may
# depend on. The table below is what the folders' READMEs say; a new dependency is a line here
# and in that README, or it is a mistake. Exits 1 listing every include that breaks a rule.
set -euo pipefail
cd "$(dirname "$0")/.."

# component (longest prefix of a file's path wins) -> the components it may include.
allowed() {
  case $1 in
    common) echo "common" ;;
    schema) echo "common schema" ;;
    store) echo "common engine/io store" ;;
    pull) echo "common engine/io store pull" ;;
    client) echo "common schema client" ;;
    engine/io) echo "common engine/io" ;;
    engine/tokenizer) echo "common engine/io engine/tokenizer" ;;
    engine/import) echo "common engine/io engine/tokenizer engine/import" ;;
    engine) echo "common engine/io engine/tokenizer engine/import engine" ;;
    engine/convert) echo "common engine/io engine/tokenizer engine/import engine engine/convert" ;;
    fixtures) echo "common engine/io engine/tokenizer engine/import engine engine/convert fixtures" ;;
    backends) echo "common engine/io engine/tokenizer engine/import engine backends" ;;
    broker) echo "common schema broker" ;;
    gateway) echo "common schema client gateway" ;;
    node) echo "common schema engine/io engine/tokenizer engine/import engine backends store pull node" ;;
    tools) echo "common schema engine/io engine/tokenizer engine/import engine engine/convert fixtures backends broker node client gateway store pull tools" ;;
    *) echo "*" ;;  # tests/, bench/, fuzz/: anything
  esac
}

# Every include of every file, as "file include" lines; each checked by awk against the table.
rules=$(for c in common schema store pull client engine/io engine/tokenizer engine/import engine engine/convert fixtures backends broker node gateway tools; do
  echo "$c $(allowed "$c")"
done)
# Hearth's own sources: what git tracks, or (outside a checkout) every source below the root
# but the build folders.
sources() {
  git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' 2>/dev/null ||
    find . -path ./build -prune -o \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) -print | sed 's|^\./||'
}
sources | grep -v '_test\.cpp$' |
  xargs grep -H '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' |
  sed 's/^\([^:]*\):[^"]*"\([^"]*\)".*/\1 \2/' |
  awk -v rules="$rules" '
    # The component of a path: engine/<layer> for the engine layers, engine for the runtime
    # (engine/*.h, engine/models/, engine/cpu/), else the top folder; "." for a file at the root.
    function component(p,   parts, n) {
      n = split(p, parts, "/")
      if (n < 2) return "."
      if (parts[1] == "engine" && n > 2 &&
          (parts[2] == "io" || parts[2] == "tokenizer" || parts[2] == "import" || parts[2] == "convert"))
        return "engine/" parts[2]
      return parts[1]
    }
    BEGIN {
      n = split(rules, lines, "\n")
      for (i = 1; i <= n; i++) {
        m = split(lines[i], w, " ")
        known[w[1]] = 1
        for (j = 2; j <= m; j++) ok[w[1], w[j]] = 1
      }
    }
    {
      from = component($1); to = component($2)
      if (!(from in known) || to == ".") next
      if (!((from, to) in ok)) { print $1 " includes " $2 ": " from " may not depend on " to; bad = 1 }
    }
    END { exit bad }' && echo "layers: every include goes where its folder's README allows"
