#!/usr/bin/env bash
# Failover benchmark: builds dledger once, runs `dledger bench failover` over the standard set
# (3 and 5 members x crash, pause, cold-start x the lan and dledger profiles) with real member
# processes on 127.0.0.1, and writes BENCHMARKS.md (table, machine, commands, anchors).
#
# Usage: [TRIALS=20] [TRIALS_DLEDGER=4] [OUT=BENCHMARKS.md] scripts/bench-failover.sh
#   TRIALS          trials per configuration for the lan profile (default 20)
#   TRIALS_DLEDGER  trials per configuration for the dledger profile (default 4): its detection
#                   window is 6 s and the settle window 12 s, so a trial takes ~15-25 s
#   PROFILES, MEMBERS, SCENARIOS  narrow the set (defaults: "lan dledger", "3 5",
#                   "crash pause cold-start")
#   OUT             where to write the report (default BENCHMARKS.md in the repository root)
#   COMMIT          what was measured, when not run from a git checkout
# With the defaults the whole run takes about 13-14 minutes on a 2-core machine.
#
# BENCHMARKS.md is regenerated down to the line "<!-- analysis -->"; everything after that
# line (the hand-written explanation of the numbers) is kept from the previous file.
set -euo pipefail
trials=${TRIALS:-20}
trials_dledger=${TRIALS_DLEDGER:-4}
profiles=${PROFILES:-lan dledger}
members_set=${MEMBERS:-3 5}
scenarios=${SCENARIOS:-crash pause cold-start}
cd "$(dirname "$0")/.."
out=${OUT:-BENCHMARKS.md}
marker='<!-- analysis -->'

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin=$work/dledger
echo "building $bin" >&2
# Static, as shipped (the container image too): it starts faster (BENCHMARKS.md, "Start-up").
CGO_ENABLED=0 go build -o "$bin" ./cmd/dledger

commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
if [ -z "${COMMIT:-}" ] && [ -n "$(git status --porcelain 2>/dev/null)" ]; then
  commit="$commit (with uncommitted changes)"
fi
model=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || true)
load_before=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')
started=$(date -u '+%Y-%m-%d %H:%M UTC')
t_start=$(date +%s)

# run_one appends a configuration's summary (or its failure) to $work/summaries and its
# round breakdown to $work/breakdowns, and prints the run as it goes.
failures=0
commands=()
run_one() { # profile members scenario trials
  local args=(bench failover --members "$2" --trials "$4" --scenario "$3" --profile "$1")
  commands+=("dledger ${args[*]}")
  echo "+ dledger ${args[*]}" >&2
  local log=$work/run.log rc=0
  "$bin" "${args[@]}" 2>&1 | tee "$log" >&2 || rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then
    failures=$((failures + 1))
    echo "# exit $rc: dledger ${args[*]}" >>"$work/breakdowns"
  fi
  grep '^bench: scenario=' "$log" | tail -1 >>"$work/summaries" || true
  grep '^bench: vote rounds' "$log" | tail -1 | sed "s/^bench: /$1 $2 $3: /" >>"$work/breakdowns" || true
}

: >"$work/summaries"
: >"$work/breakdowns"
for profile in $profiles; do
  n=$trials
  [ "$profile" = dledger ] && n=$trials_dledger
  for members in $members_set; do
    for scenario in $scenarios; do
      run_one "$profile" "$members" "$scenario" "$n"
    done
  done
done
elapsed=$(( $(date +%s) - t_start ))
load_after=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')

# table turns summary lines (k=v fields) into markdown rows.
table() {
  awk '{
    delete f
    for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
    rejoin = (f["scenario"] == "cold-start") ? "-" : f["rejoin_changes"]
    printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f + %.0f + %.0f | %s | %s | %s | %s | %s |\n",
      f["profile"], f["members"], f["scenario"], f["trials"], f["p50_ms"], f["p90_ms"], f["p99_ms"], f["max_ms"],
      f["detect_ms"], f["mean_detect_phase_ms"], f["mean_elect_phase_ms"], f["mean_spread_phase_ms"],
      f["mean_rounds"], f["mean_term_delta"], f["needless_changes"], rejoin, f["failed"]
  }' "$1"
}

# p50 looks up one configuration's median for the comparison with the anchors.
p50() { # profile members scenario
  awk -v p="$1" -v m="$2" -v s="$3" '$0 ~ "profile="p" " && $0 ~ "members="m" " && $0 ~ "scenario="s" " {
    for (i = 2; i <= NF; i++) if ($i ~ /^p50_ms=/) { sub(/p50_ms=/, "", $i); print $i } }' "$work/summaries" | head -1
}

analysis=$work/analysis
if [ -f "$out" ] && grep -qx "$marker" "$out"; then
  sed -n "/^$marker\$/,\$p" "$out" | tail -n +2 >"$analysis"
else
  printf '\n## Why the numbers are what they are\n\n(not written yet)\n' >"$analysis"
fi

{
  cat <<EOF
# Failover benchmarks

Time from a fault to the moment a quorum of the live members reports the same new leader,
measured from outside by \`dledger bench failover\`: the members are real \`dledger server\`
processes on 127.0.0.1, and the benchmark polls each live member's \`GET /v1/status\` every
2 ms over a kept-alive connection (the resolution is one poll period plus one round trip).

- **crash**: \`kill -9\` of the leader at a random point of its heartbeat cycle; afterwards it
  is restarted on its data dir and the group is left to settle (one leader, everyone following)
  before the next trial.
- **pause**: \`SIGSTOP\` of the leader (a silent failure: its sockets stay open, calls to it time
  out instead of failing), \`SIGCONT\` after the trial.
- **cold-start**: all members started at once on fresh data dirs; measured from the first
  process start.

After the agreement the benchmark keeps watching for twice the detection window and counts
every further leader as a needless change; rejoin counts leader changes caused by the failed
member coming back (docs/protocol.md L2 says there should be none). Phases are means from the members' own
info logs: *detect* = fault to the first "becomes candidate" (cold start: to a quorum of members
serving, the earliest any election can end), *elect* = to "becomes leader", *spread* = to the
quorum agreement seen by the benchmark.
Rounds are vote rounds of the live members per trial (\`dledger_elections_total\`).

## Results

| profile | members | scenario | trials | p50 ms | p90 ms | p99 ms | max ms | detection window ms | phases: detect + elect + spread ms | rounds | term +Δ | needless | rejoin | failed |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
EOF
  table "$work/summaries"
  cat <<EOF

Percentiles are nearest-rank over the trials, so with fewer than 100 trials p99 is the maximum.
Profiles (docs/protocol.md 6.1): **lan** (our default) heartbeat 200 ms x leak 3 = 600 ms detection
window, re-vote delay [100, 300) ms, vote round at most 300 ms + rand(300 ms); **dledger** (Java
DLedger's defaults) heartbeat 2000 ms x 3 = 6 s, re-vote delay [300, 1000) ms, vote round at most
2000 ms + rand(1000 ms).

## Machine and command

- CPU: ${model:-unknown}, $(nproc) cores; $(uname -sr); $(go version | sed 's/^go version //')
- Date: $started; total run time $((elapsed / 60)) min $((elapsed % 60)) s; load average
  before ${load_before}, after ${load_after} (other work shared the machine)
- Code: $commit
- Command: \`TRIALS=$trials TRIALS_DLEDGER=$trials_dledger scripts/bench-failover.sh\`, which built
  the binary once (\`CGO_ENABLED=0 go build -o \$BIN ./cmd/dledger\`) and ran, in this order:

\`\`\`
EOF
  printf '%s\n' "${commands[@]}"
  cat <<EOF
\`\`\`

Vote rounds by result and the answers candidates received, summed over each configuration's
trials:

\`\`\`
EOF
  cat "$work/breakdowns"
  cat <<EOF
\`\`\`

## Published anchors

| system | setting | leader failover | source |
|---|---|---|---|
| Java DLedger in RocketMQ | defaults (2 s heartbeat x 3) | "about 10 s" after killing the leader | RocketMQ DLedger quick start (apache/rocketmq docs/cn/dledger/quick_start.md) |
| etcd | defaults: heartbeat 100 ms, election timeout 1000 ms | ~1-2 s (one randomized election timeout, [1, 2) x 1000 ms) | etcd tuning guide |
| Raft paper, Figure 16 | 5 servers, election timeouts 150-155 ms | median 287 ms | Ongaro & Ousterhout, USENIX ATC 2014, section 9.3 |
| this project, dledger profile | kill -9, 3 / 5 members | p50 $(p50 dledger 3 crash) / $(p50 dledger 5 crash) ms | table above |
| this project, lan profile | kill -9, 3 / 5 members | p50 $(p50 lan 3 crash) / $(p50 lan 5 crash) ms | table above |
| this project, lan profile | SIGSTOP, 3 / 5 members | p50 $(p50 lan 3 pause) / $(p50 lan 5 pause) ms | table above |

$marker
EOF
  cat "$analysis"
} >"$out"
echo "wrote $out ($((elapsed / 60)) min $((elapsed % 60)) s)" >&2
if [ "$failures" -ne 0 ]; then
  echo "$failures configuration(s) had failed trials; see $out" >&2
  exit 1
fi
