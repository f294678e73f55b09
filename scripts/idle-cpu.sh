#!/usr/bin/env bash
# Idle CPU per member: runs one 3-member group per given dledger binary, all side by side on
# 127.0.0.1 (so the machine's noise hits every group alike), waits for them to settle, then
# reads each member's CPU time (utime + stime from /proc) over DURATION seconds and prints it as a
# percentage of one core, with the member's role. Members use a group key, the lan profile and
# the binary's own GOMAXPROCS choice (the environment's GOMAXPROCS is removed).
#
# Usage: [DURATION=60] [BASE_PORT=34000] scripts/idle-cpu.sh LABEL=BINARY [LABEL=BINARY ...]
#   e.g. scripts/idle-cpu.sh before=/tmp/dledger-old after=/tmp/dledger-new
# Linux only (/proc). The resolution is the kernel's clock tick (usually 10 ms of CPU), so use
# 60 s or more: 0.3 % of a core over 60 s is 18 ticks.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,11p' "$0" >&2; exit 2; }
secs=${DURATION:-60}
base=${BASE_PORT:-34000}
hz=$(getconf CLK_TCK)
work=$(mktemp -d)
pids=()
cleanup() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

declare -a rows=() # "label member pid http"
for spec in "$@"; do
  label=${spec%%=*} bin=${spec#*=}
  [ -x "$bin" ] || { echo "idle-cpu: $bin is not an executable" >&2; exit 2; }
  mkdir -p "$work/$label"
  "$bin" keygen "$work/$label/key" >/dev/null
  peers="n0-127.0.0.1:$base;n1-127.0.0.1:$((base + 1));n2-127.0.0.1:$((base + 2))"
  for i in 0 1 2; do
    http=127.0.0.1:$((base + 100 + i))
    env -u GOMAXPROCS "$bin" server --group idle --id "n$i" --peers "$peers" --data-dir "$work/$label/n$i" \
      --key-file "$work/$label/key" --http "$http" --log-level warn >"$work/$label/n$i.log" 2>&1 &
    pids+=($!)
    rows+=("$label n$i $! $http")
  done
  base=$((base + 1000))
done

sleep 10 # start-up and the first election are not idle
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo -1; }
declare -A before after
for r in "${rows[@]}"; do
  set -- $r
  before[$3]=$(ticks "$3")
  if [ "${before[$3]}" -lt 0 ]; then
    echo "idle-cpu: $1 $2 is not running; its log:" >&2
    cat "$work/$1/$2.log" >&2
    exit 1
  fi
done
sleep "$secs"
for r in "${rows[@]}"; do set -- $r; after[$3]=$(ticks "$3"); done # all at once, then the roles
echo "| binary | member | role | CPU, % of one core over ${secs} s |"
echo "|---|---|---|---|"
for r in "${rows[@]}"; do
  set -- $r
  role=$(curl -s --max-time 2 "http://$4/v1/status" | sed -n 's/.*"role": *"\([A-Z]*\)".*/\1/p' | head -1 || true)
  if [ "${after[$3]}" -lt 0 ]; then
    echo "| $1 | $2 | exited | - |"
    continue
  fi
  awk -v l="$1" -v m="$2" -v role="${role:-?}" -v d=$(( after[$3] - before[$3] )) -v hz="$hz" -v s="$secs" \
    'BEGIN { printf "| %s | %s | %s | %.2f |\n", l, m, role, 100 * d / hz / s }'
done
