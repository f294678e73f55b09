#!/usr/bin/env bash
# Mutation testing of the elector and the member state with gremlins (pinned below): every
# covered mutant of dledger/ and memberstate/ (a flipped comparison, a changed operator ...) must
# make a test fail. A mutant that survives is either a missing test or an equivalent mutant, one
# that cannot change behaviour; the equivalent ones are named, each with its reason, in
# scripts/mutation-equivalents.tsv, and are not reported again.
#
#   scripts/mutation.sh                      every package, every covered mutant (slow: see below)
#   scripts/mutation.sh dledger memberstate  some packages (dledger means the package itself;
#                                            dledger/sim, dledger/driver, dledger/dledgertest,
#                                            dledger/liveness are packages of their own)
#   scripts/mutation.sh --diff origin/main   only the lines changed since the merge base with
#                                            origin/main (what .ci/run does); nothing to do when
#                                            no code of these packages changed
#
# gremlins calls every mutant of a case expression NOT COVERED (Go's cover profile has no block
# for one) and never runs it; this script runs those itself (run_case_mutant, below).
#
# Prints gremlins' own summary per package (killed, lived, efficacy, time), then every survivor
# that is not a listed equivalent, keyed like the equivalents file:
#   path <TAB> enclosing function <TAB> mutator <TAB> the mutated line's text
# and exits 1 if there is one. Keys hold no line numbers, so they survive edits elsewhere in the
# file; an edit of the mutated line itself asks again whether the mutant is equivalent.
#
# The machine this grew on has 2 cores shared with other work: one worker by default
# (MUTATION_WORKERS), tests on one CPU each, and a generous timeout (MUTATION_TIMEOUT_COEFFICIENT
# times the package's own test time). Measured there, one worker, gremlins' own run (the case
# expressions add a few minutes): memberstate 5 min, dledger 11 min, dledger/sim 20 min,
# dledger/driver and dledger/dledgertest under half a minute each.
# MUTATION_BUDGET=SECONDS bounds the whole run (CI: a change that rewrites much of a package
# could otherwise take longer than CI may): when it runs out, gremlins is stopped, the mutants
# tested so far are still judged, and the run says how far it got.
set -euo pipefail
cd "$(dirname "$0")/.."

GREMLINS_VERSION=v0.6.0
workers=${MUTATION_WORKERS:-1}
coefficient=${MUTATION_TIMEOUT_COEFFICIENT:-10}
equivalents=scripts/mutation-equivalents.tsv
all_packages=(memberstate dledger dledger/driver dledger/dledgertest dledger/liveness dledger/sim)

base=""
packages=()
while [ $# -gt 0 ]; do
  case "$1" in
    --diff) base=${2:?--diff needs a git ref}; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) packages+=("${1%/}"); shift ;;
  esac
done
[ ${#packages[@]} -gt 0 ] || packages=("${all_packages[@]}")

# In --diff mode, only packages whose non-test code changed since the merge base. A checkout
# without the base (or without git) has no diff to test: that is not a failure.
if [ -n "$base" ]; then
  if ! git rev-parse --verify -q "$base^{commit}" >/dev/null 2>&1; then
    echo "mutation: no git ref $base here: no diff to mutate, skipping"
    exit 0
  fi
  changed=$(git diff --merge-base "$base" --name-only -- "${packages[@]}" | grep '\.go$' | grep -v '_test\.go$' || true)
  selected=()
  for p in "${packages[@]}"; do
    for f in $changed; do
      # f belongs to package p when it sits directly in p's directory
      if [ "$(dirname "$f")" = "$p" ]; then selected+=("$p"); break; fi
    done
  done
  if [ ${#selected[@]} -eq 0 ]; then
    echo "mutation: no code of ${packages[*]} changed since the merge base with $base: nothing to mutate"
    exit 0
  fi
  packages=("${selected[@]}")
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/dledger-mutation.XXXXXX")
trap 'rm -rf "$work"' EXIT

# gremlins, at the pinned version, from the module proxy, cached between runs.
tooldir=${XDG_CACHE_HOME:-$HOME/.cache}/dledger-tools/gremlins-$GREMLINS_VERSION
if [ ! -x "$tooldir/gremlins" ]; then
  echo "mutation: installing gremlins $GREMLINS_VERSION"
  GOBIN="$tooldir" GOFLAGS=-mod=mod go install "github.com/go-gremlins/gremlins/cmd/gremlins@$GREMLINS_VERSION"
fi

# gremlins v0.6.0 matches the paths of `git diff --merge-base REF` (relative to the repository)
# against the paths of the files it mutates (relative to the package it was given), so a diff
# never matches a package below the root and every mutant is skipped. A git shim that adds
# --relative=PACKAGE to that one command makes the two agree.
real_git=$(command -v git || true)
mkdir -p "$work/shim"
cat >"$work/shim/git" <<'EOF'
#!/bin/sh
if [ "$1" = diff ] && [ -n "$MUTATION_DIFF_RELATIVE" ]; then
  exec "$MUTATION_REAL_GIT" "$@" --relative="$MUTATION_DIFF_RELATIVE"
fi
exec "$MUTATION_REAL_GIT" "$@"
EOF
chmod +x "$work/shim/git"

# key PATH LINE MUTATOR: the equivalents file's key of a mutant.
key() {
  local path=$1 line=$2 mutator=$3 fn text
  fn=$(awk -v l="$line" '
    NR > l { exit }
    /^func / { f = $0; sub(/^func (\([^)]*\) )?/, "", f); sub(/[^A-Za-z0-9_].*/, "", f); next }
    /^(var|const|type) / { f = "(top level)" }
    /^}/ && NR < l { f = "(top level)" }
    END { print (f == "" ? "(top level)" : f) }' "$path")
  text=$(sed -n "${line}p" "$path" | tr '\t' ' ' | sed -E 's/  +/ /g; s/^ //; s/ $//')
  printf '%s\t%s\t%s\t%s' "$path" "$fn" "$mutator" "$text"
}

# in_case PATH LINE: whether the line is a case expression (or the second line of one).
in_case() {
  local a b
  a=$(sed -n "${2}p" "$1" | sed -E 's/^[[:space:]]+//')
  b=$(sed -n "$(( $2 > 1 ? $2 - 1 : 1 ))p" "$1" | sed -E 's/^[[:space:]]+//; s/[[:space:]]*(\/\/.*)?$//')
  [[ $a == case\ * ]] || { [[ $b == case\ * ]] && [[ $b != *: ]]; }
}

# run_case_mutant PKG PATH LINE COL MUTATOR: applies gremlins' mutation of the operator at
# LINE:COL (byte column) to the copy of the module and runs the package's tests; prints killed,
# lived or viable (the mutant does not build).
run_case_mutant() {
  local pkg=$1 path=$2 line=$3 col=$4 mutator=$5 src="$work/src" out rc=0
  if [ ! -d "$src" ]; then
    mkdir -p "$src"
    tar --exclude=./.git -cf - . | tar -xf - -C "$src"
  fi
  cp "$path" "$work/orig.go"
  LC_ALL=C awk -v l="$line" -v c="$col" -v m="$mutator" '
    NR == l {
      two = substr($0, c, 2); one = substr($0, c, 1); op = (two ~ /^(<=|>=|==|!=|\+\+|--)$/) ? two : one
      r = ""
      if (m == "CONDITIONALS_BOUNDARY") { r = (op == "<") ? "<=" : (op == "<=") ? "<" : (op == ">") ? ">=" : (op == ">=") ? ">" : "" }
      if (m == "CONDITIONALS_NEGATION") { r = (op == "==") ? "!=" : (op == "!=") ? "==" : (op == "<") ? ">=" : (op == "<=") ? ">" : (op == ">") ? "<=" : (op == ">=") ? "<" : "" }
      if (m == "ARITHMETIC_BASE") { r = (op == "+") ? "-" : (op == "-") ? "+" : (op == "*") ? "/" : (op == "/") ? "*" : (op == "%") ? "*" : "" }
      if (m == "INVERT_NEGATIVES") { r = (op == "-") ? "+" : "" }
      if (m == "INCREMENT_DECREMENT") { r = (op == "++") ? "--" : (op == "--") ? "++" : "" }
      if (r == "") { print "mutation: no " m " operator at " l ":" c > "/dev/stderr"; exit 3 }
      $0 = substr($0, 1, c - 1) r substr($0, c + length(op))
    }
    { print }' "$work/orig.go" >"$src/$path" || { cp "$work/orig.go" "$src/$path"; echo viable; return; }
  out=$(cd "$src" && timeout 300 go test -count=1 -failfast -cpu 1 "./$pkg" 2>&1) || rc=$?
  cp "$work/orig.go" "$src/$path"
  if [ "$rc" -eq 0 ]; then echo lived
  elif grep -qE '\[build failed\]|\[setup failed\]' <<<"$out"; then echo viable
  else echo killed
  fi
}

budget=${MUTATION_BUDGET:-0}
started=$(date +%s)
over_budget=""
known=$(grep -v '^#' "$equivalents" | grep -v '^[[:space:]]*$' | cut -f1-4 || true)
survivors=0
used_keys=""
for p in "${packages[@]}"; do
  [ -d "$p" ] || { echo "mutation: no package directory $p" >&2; exit 2; }
  # The package alone: its sub-packages are runs of their own.
  exclude=()
  for sub in $(cd "$p" && find . -mindepth 2 -name '*.go' -exec dirname {} \; | sed 's|^\./||' | cut -d/ -f1 | sort -u); do
    exclude+=(--exclude-files "^$sub/")
  done
  diffargs=()
  [ -n "$base" ] && diffargs=(--diff "$base")
  log="${MUTATION_LOGS:-$work}/$(echo "$p" | tr / _).log" # MUTATION_LOGS=DIR keeps gremlins' logs
  echo
  echo "== gremlins $GREMLINS_VERSION on ./$p${base:+ (lines changed since the merge base with $base)}: $workers worker(s)"
  start=$(date +%s)
  limit=()
  if [ "$budget" -gt 0 ]; then
    left=$(( budget - (start - started) ))
    if [ "$left" -le 0 ]; then over_budget+=" $p (not started)"; continue; fi
    # --foreground: the signal goes to gremlins alone, which lets the tests in flight finish
    # (a test killed under it would be reported LIVED) and then stops.
    limit=(timeout --foreground -s INT -k 120 "$left")
  fi
  # TMPDIR: gremlins' copies of the module go under $work, removed on exit even if it is stopped.
  rc=0
  if [ -n "${MUTATION_REUSE_LOGS:-}" ] && [ -s "$log" ]; then
    echo "  (gremlins' log reused: $log)"
  else
  TMPDIR="$work" MUTATION_REAL_GIT="$real_git" MUTATION_DIFF_RELATIVE="$p" PATH="$work/shim:$PATH" \
    "${limit[@]}" "$tooldir/gremlins" unleash --workers "$workers" --test-cpu 1 --timeout-coefficient "$coefficient" \
    "${exclude[@]}" "${diffargs[@]}" "./$p" >"$log" 2>&1 || rc=$?
  fi
  results=$(grep -E '^ *(KILLED|LIVED|TIMED OUT|NOT VIABLE) ' "$log" || true)
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    over_budget+=" $p (stopped after $(printf '%s\n' "$results" | grep -c .) mutants)"
  elif [ "$rc" -ne 0 ]; then
    echo "mutation: gremlins failed on ./$p:" >&2; tail -20 "$log" >&2; exit 2
  fi
  grep -E '^(Killed|Timed out|Test efficacy|Mutator coverage|Mutation testing completed)' "$log" | sed 's/^/  /' || true
  echo "  wall time: $(( $(date +%s) - start )) s"
  # "      LIVED CONDITIONALS_BOUNDARY at vote.go:123:45"
  while IFS=$'\t' read -r mutator file line; do
    k=$(key "$p/$file" "$line" "$mutator")
    if printf '%s\n' "$known" | grep -qxF -- "$k"; then
      used_keys+="$k"$'\n'
      continue
    fi
    survivors=$((survivors + 1))
    printf 'SURVIVOR %s:%s\n  %s\n' "$p/$file" "$line" "$k"
  done < <(printf '%s\n' "$results" | sed -nE 's/^ *LIVED ([A-Z_]+) at ([^:]+):([0-9]+):[0-9]+$/\1\t\2\t\3/p')

  # gremlins takes coverage from Go's cover profile, whose blocks never include a case
  # expression of a switch (only the statements after the colon), so it calls every mutant of
  # a case NOT COVERED and never runs it: the rows of the decision tables, of all things. This
  # script runs those itself, with the same mutation, on a copy of the module.
  cases=$(sed -nE 's/^ *NOT COVERED ([A-Z_]+) at ([^:]+):([0-9]+):([0-9]+)$/\1\t\2\t\3\t\4/p' "$log" | while IFS=$'\t' read -r m f l c; do
    if in_case "$p/$f" "$l"; then printf '%s\t%s\t%s\t%s\n' "$m" "$f" "$l" "$c"; fi
  done)
  if [ -n "$cases" ]; then
    ck=0 cl=0 cv=0 cstart=$(date +%s)
    while IFS=$'\t' read -r mutator file line col; do
      if [ "$budget" -gt 0 ] && [ $(( $(date +%s) - started )) -ge "$budget" ]; then
        over_budget+=" $p (case expressions stopped after $((ck + cl + cv)))"; break
      fi
      case $(run_case_mutant "$p" "$p/$file" "$line" "$col" "$mutator") in
        killed) ck=$((ck + 1)); continue ;;
        viable) cv=$((cv + 1)); continue ;;
      esac
      cl=$((cl + 1))
      k=$(key "$p/$file" "$line" "$mutator")
      if printf '%s\n' "$known" | grep -qxF -- "$k"; then
        used_keys+="$k"$'\n'
        continue
      fi
      survivors=$((survivors + 1))
      printf 'SURVIVOR %s:%s (case expression)\n  %s\n' "$p/$file" "$line" "$k"
    done <<<"$cases"
    echo "  case expressions (NOT COVERED to gremlins, run here): killed $ck, lived $cl, not viable $cv, $(( $(date +%s) - cstart )) s"
  fi
done

listed=$(printf '%s' "$used_keys" | grep -c . || true)
echo
echo "mutation: $survivors survivor(s) not listed as equivalent; $listed listed equivalent mutant(s) survived as expected"
if [ -n "$over_budget" ]; then
  echo "mutation: the budget of $budget s ran out:$over_budget; run scripts/mutation.sh${base:+ --diff $base} without MUTATION_BUDGET for the rest"
fi
if [ -z "$base" ] && [ "${packages[*]}" = "${all_packages[*]}" ]; then
  # A full run sees every mutant: an entry that matched none is stale (its line changed).
  while IFS= read -r k; do
    [ -n "$k" ] || continue
    printf '%s\n' "$used_keys" | grep -qxF -- "$k" || printf 'STALE equivalent (no such surviving mutant now): %s\n' "$k"
  done <<<"$known"
fi
[ "$survivors" -eq 0 ]
