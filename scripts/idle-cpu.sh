#!/usr/bin/env bash
# Idle CPU per member: runs a 3-member group per given dledger binary on 127.0.0.1, waits for it
# to settle, then measures each member over DURATION seconds: its CPU time as a percentage of one
# core, and how many times a second its threads were switched out. Members use a group key, the
# lan profile and the binary's own GOMAXPROCS choice (the environment's GOMAXPROCS is removed).
#
# Usage: [DURATION=60] [ROUNDS=1] [BASE_PORT=34000] scripts/idle-cpu.sh LABEL=BINARY [LABEL=BINARY ...]
#   e.g. ROUNDS=5 DURATION=30 scripts/idle-cpu.sh before=/tmp/dledger-old after=/tmp/dledger-new
# ROUNDS=1: all groups at once, side by side. ROUNDS=N>1: each group alone, one after another,
# the order alternating round by round, N times; prints every measurement, then the median per
# binary and role. Alone is how a member runs; side by side, nine members on two cores each cost
# more (the machine is busier), so compare binaries only within one run, never across runs.
# Linux only (/proc). CPU time is the sum over the threads of the scheduler's on-CPU nanoseconds
# (/proc/PID/task/*/schedstat), exact where the tick accounting of /proc/PID/stat (10 ms a tick)
# is coarse. Thread switches count the wake-ups that set an idle member's cost; unlike the CPU
# time they hardly depend on how busy the machine is.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
secs=${DURATION:-60}
rounds=${ROUNDS:-1}
work=$(mktemp -d)
pids=()
cleanup() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for spec in "$@"; do
  [ -x "${spec#*=}" ] || { echo "idle-cpu: ${spec#*=} is not an executable" >&2; exit 2; }
done

# sample PID: "NS SWITCHES": nanoseconds the process's threads have run and how many times they
# were switched out (voluntary and not), or "-1 -1" if it is not running.
sample() {
  [ -d "/proc/$1/task" ] || { echo "-1 -1"; return; }
  # A thread may exit between the glob and the read: tolerate it (set -e and pipefail are on).
  { cat /proc/"$1"/task/*/schedstat || true; grep -h ctxt_switches /proc/"$1"/task/*/status || true; } 2>/dev/null |
    awk '/ctxt_switches/ { w += $2; next } { s += $1; n++ } END { printf "%.0f %.0f\n", (n ? s : -1), (n ? w : -1) }'
}

# measure LABEL=BINARY...: starts one group per argument at once, measures them together and
# stops them; prints "label member role cpu_percent switches_per_second" lines.
measure() {
  local base=${BASE_PORT:-34000} rows=() spec label bin peers http i r
  pids=()
  for spec in "$@"; do
    label=${spec%%=*} bin=${spec#*=}
    rm -rf "${work:?}/$label" && mkdir -p "$work/$label"
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
  declare -A before after
  for r in "${rows[@]}"; do
    set -- $r
    before[$3]=$(sample "$3")
    if [ "${before[$3]%% *}" -lt 0 ]; then
      echo "idle-cpu: $1 $2 is not running; its log:" >&2
      cat "$work/$1/$2.log" >&2
      exit 1
    fi
  done
  sleep "$secs"
  for r in "${rows[@]}"; do set -- $r; after[$3]=$(sample "$3"); done # all at once, then the roles
  for r in "${rows[@]}"; do
    set -- $r
    role=$(curl -s --max-time 2 "http://$4/v1/status" | sed -n 's/.*"role": *"\([A-Z]*\)".*/\1/p' | head -1 || true)
    if [ "${after[$3]%% *}" -lt 0 ]; then
      echo "$1 $2 exited - -"
      continue
    fi
    awk -v l="$1" -v m="$2" -v role="${role:-?}" -v b="${before[$3]}" -v a="${after[$3]}" -v s="$secs" \
      'BEGIN { split(b, x, " "); split(a, y, " ")
               printf "%s %s %s %.3f %.1f\n", l, m, role, 100 * (y[1] - x[1]) / 1e9 / s, (y[2] - x[2]) / s }'
  done
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  pids=()
}

echo "| binary | member | role | CPU, % of one core over ${secs} s | thread switches a second |"
echo "|---|---|---|---|---|"
if [ "$rounds" -le 1 ]; then
  measure "$@" >"$work/one" # not in a pipeline: the members' pids stay in this shell, for cleanup
  awk '{ printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }' "$work/one"
  exit 0
fi
specs=("$@")
for ((k = 0; k < rounds; k++)); do
  order=("${specs[@]}")
  if ((k % 2 == 1)); then # alternate the order so neither binary always runs first
    order=()
    for ((j = ${#specs[@]} - 1; j >= 0; j--)); do order+=("${specs[j]}"); done
  fi
  for spec in "${order[@]}"; do
    measure "$spec" >"$work/one"
    cat "$work/one" >>"$work/all"
    awk -v k=$((k + 1)) '{ printf "| %s (round %d) | %s | %s | %s | %s |\n", $1, k, $2, $3, $4, $5 }' "$work/one"
  done
done
echo
echo "Medians over $rounds rounds (followers pooled):"
echo
echo "| binary | role | CPU, % of one core | thread switches a second |"
echo "|---|---|---|---|"
for spec in "${specs[@]}"; do
  label=${spec%%=*}
  for role in LEADER FOLLOWER; do
    awk -v l="$label" -v r="$role" '$1 == l && $3 == r { c[++n] = $4; w[n] = $5 }
      function median(a, n,   i, j, t) { # insertion sort, then the middle (mawk has no asort)
        for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
        return (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2) }
      END { if (n) printf "| %s | %s | %.3f | %.1f |\n", l, r, median(c, n), median(w, n) }' "$work/all"
  done
done
