#!/usr/bin/env bash
# The documents say only what the binaries do: every --flag that README.md and the folders'
# READMEs (and deploy/'s scripts and units) give to `hearth SUBCOMMAND [SUB]`, `hearth-broker`,
# `hearth-node` or `hearth-gateway` is one that command's --help lists. Usage: doc-flags.sh
# BUILD_DIR. Exits 1 naming each flag a document uses and the binary does not know.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1
declare -A help_of  # command line -> its --help text
bad=0
checked=0

help_text() {  # the --help of "hearth jobs prune" etc., cached
  local cmd=$1
  if [[ -z ${help_of[$cmd]+x} ]]; then
    local bin=${cmd%% *} args=""
    [[ $cmd == *" "* ]] && args=${cmd#* }
    # shellcheck disable=SC2086
    help_of[$cmd]=$("$build/$bin" $args --help 2>&1 || true)
  fi
  printf '%s' "${help_of[$cmd]}"
}

binary_path() {
  case $1 in
    hearth) echo tools/hearth ;;
    hearth-broker) echo broker/hearth-broker ;;
    hearth-node) echo node/hearth-node ;;
    hearth-gateway) echo gateway/hearth-gateway ;;
  esac
}

files=(README.md */README.md deploy/*.sh deploy/*.service)
# Every line that runs one of the binaries: the command words, then its flags.
while IFS=: read -r file line; do
  # Each pipeline part, `|` and `;` split, starting at the binary's name.
  while read -r part; do
    [[ $part =~ (^|[/ ])(hearth(-broker|-node|-gateway)?)[[:space:]](.*)$ ]] || \
      [[ $part =~ (^|[/ ])(hearth(-broker|-node|-gateway)?)$ ]] || continue
    name=${BASH_REMATCH[2]}
    rest=${BASH_REMATCH[4]:-}
    cmd="$(binary_path "$name")"
    # hearth's subcommand and sub-subcommand: leading lower-case words that --help knows.
    if [[ $name == hearth ]]; then
      for word in $rest; do
        [[ $word =~ ^[a-z]+$ ]] || break
        sub=$(help_text "$cmd $word")
        # A subcommand has a help of its own; a word that is not one gets an error or the
        # parent's help.
        if [[ $sub != "$(help_text "$cmd")" ]] && ! grep -qi "error" <<<"$sub"; then
          cmd="$cmd $word"
          continue
        fi
        break
      done
    fi
    [[ -x $build/${cmd%% *} ]] || continue  # not built here (hearth-gateway without Boost)
    for flag in $(grep -oE -- '(^|[[:space:]])--[a-z][a-z0-9-]*' <<<"$rest" | tr -d ' \t'); do
      checked=$((checked + 1))
      if ! grep -qE -- "${flag}([^a-z0-9-]|$)" <<<"$(help_text "$cmd")"; then
        echo "$file:$line: $cmd has no $flag (from: $part)"
        bad=1
      fi
    done
  done < <(grep -n '' "$file" | sed -n "${line}p" | cut -d: -f2- | tr '|;' '\n\n')
done < <(grep -nE '(^|[/ `])hearth(-broker|-node|-gateway)?[[:space:]]' "${files[@]}" | cut -d: -f1,2)

echo "doc-flags: $checked flags checked"
exit $bad
