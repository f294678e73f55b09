#!/usr/bin/env bash
# Calm benchmark: runs `dledger-lab calm` (faults that must not move leadership: flap-follower,
# flap-link, leader-resets, restart-loop, cpu-starved) against a given dledger binary and prints
# a markdown table of what each scenario counted. The target is 0 leader changes and 0 term
# increases everywhere; the numbers are reported, not judged (unless STRICT=1).
#
# Usage: [BIN=path/to/dledger] [DURATION=60s] [MEMBERS="3"] [PROFILES=lan] [SCENARIOS=all]
#        [STRICT=0] [OUT=file] scripts/bench-calm.sh
#   BIN        the members' binary (default: built from this tree). The lab command itself is
#              always built from this tree, so an older BIN can be measured.
#   DURATION   how long each scenario injects faults (default 60s; each also settles 2 x the
#              detection window, and start-up takes a second or two)
#   MEMBERS, PROFILES  space-separated group sizes and timing profiles (default "3", "lan")
#   SCENARIOS  all, or a comma-separated list (default all)
#   STRICT     1: exit 3 if any leader change, term increase, election or safety violation was counted
#   OUT        also write the report to this file
# Root is needed for flap-link (network namespaces), leader-resets (ss -K) and the cgroup form
# of cpu-starved; without it flap-link and leader-resets are skipped with the reason and
# cpu-starved falls back to a SIGSTOP duty cycle (50 ms stopped of every 100 ms).
# With the defaults the run takes about 6 minutes.
set -euo pipefail
duration=${DURATION:-60s}
members_set=${MEMBERS:-3}
profiles=${PROFILES:-lan}
scenarios=${SCENARIOS:-all}
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
harness=$work/dledger-lab
echo "building the lab command $harness and the members' dledger" >&2
CGO_ENABLED=0 go build -o "$harness" ./cmd/dledger-lab
CGO_ENABLED=0 go build -o "$work/dledger" ./cmd/dledger
bin=${BIN:-$work/dledger}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
[ -x "$bin" ] || { echo "BIN=$bin is not an executable" >&2; exit 2; }

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain 2>/dev/null)" ]; then
  commit="$commit (with uncommitted changes)"
fi
load_before=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')
started=$(date -u '+%Y-%m-%d %H:%M UTC')
t_start=$(date +%s)

broken=0
commands=()
: >"$work/lines"
: >"$work/notes"
for profile in $profiles; do
  for members in $members_set; do
    args=(calm --scenario "$scenarios" --members "$members" --duration "$duration" --profile "$profile" --binary "$bin")
    commands+=("dledger-lab ${args[*]}")
    echo "+ dledger-lab ${args[*]}" >&2
    rc=0
    "$harness" "${args[@]}" 2>&1 | tee "$work/run.log" >&2 || rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || { broken=$((broken + 1)); echo "exit $rc: dledger-lab ${args[*]}" >>"$work/notes"; }
    grep '^calm: scenario=' "$work/run.log" >>"$work/lines" || true
    # Skip reasons, cgroup fallbacks and anything counted beyond zero, verbatim.
    grep -E '^calm: [a-z-]+( skipped)?: ' "$work/run.log" | sed "s/^calm: /$profile $members: /" >>"$work/notes" || true
  done
done
elapsed=$(($(date +%s) - t_start))
load_after=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')

report=$work/report.md
{
  echo "| profile | members | scenario | run s | faults | leader changes | term increases | by the faulted member | elected | leaderless ms (max) | candidacies | max stall ms | method |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  awk '{
    delete f
    for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
    if (f["skipped"] == "1") {
      printf "| %s | %s | %s | skipped | | | | | | | | | |\n", f["profile"], f["members"], f["scenario"]
      next
    }
    m = f["method"]; gsub("_", " ", m)
    if (f["broken"] == "1") m = m " (broke off)"
    printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s (%s) | %s | %s | %s |\n",
      f["profile"], f["members"], f["scenario"], f["duration_s"], f["faults"], f["leader_changes"],
      f["term_increases"], f["faulted_term_increases"], f["elected"], f["leaderless_ms"], f["max_leaderless_ms"],
      f["candidacies"], f["max_stall_ms"], m
  }' "$work/lines"
  echo
  echo "Leader changes: changes of the (leader, term) a quorum of members reports; elected: \"becomes leader\""
  echo "log lines (also a leader that stepped down and won again in its own term); candidacies: members"
  echo "that gave up on the leader (a same-term probe that found it alive moves nothing); max stall: the"
  echo "longest a member that was never faulted went without answering a 2 ms status poll (a loaded host)."
  echo
  echo "- Members: $bin; harness and code: $commit"
  echo "- Date: $started; run time $((elapsed / 60)) min $((elapsed % 60)) s; load average before $load_before, after $load_after"
  echo "- Machine: $(nproc) cores; $(uname -sr); $(id -un)"
  echo "- Commands:"
  printf '  - `%s`\n' "${commands[@]}"
  if [ -s "$work/notes" ]; then
    echo
    echo '```'
    cat "$work/notes"
    echo '```'
  fi
} >"$report"
cat "$report"
[ -z "${OUT:-}" ] || cp "$report" "$OUT"

if [ "$broken" -ne 0 ]; then
  echo "$broken run(s) broke off; see above" >&2
  exit 1
fi
if [ "${STRICT:-0}" = 1 ] && awk '{
    for (i = 2; i <= NF; i++) { split($i, kv, "="); if ((kv[1] == "leader_changes" || kv[1] == "term_increases" || kv[1] == "violations" || kv[1] == "elected") && kv[2] + 0 > 0) bad = 1 }
  } END { exit !bad }' "$work/lines"; then
  echo "STRICT: leader changes, term increases, elections or violations were counted" >&2
  exit 3
fi
