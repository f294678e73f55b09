#!/usr/bin/env bash
# Many groups per host (issue 29): builds dledger once and runs `dledger bench groups` for each
# group count, three host processes on 127.0.0.1, each a member of every group, then prints the
# summaries as the markdown table of BENCHMARKS.md ("Many groups per host").
#
# Usage: [GROUPS_SET="1 100 1000"] [RUNS=1] [IDLE=10s] [BIN=path] scripts/bench-groups.sh
#   GROUPS_SET  group counts, in order (add 10000 where the machine allows: a few minutes)
#   RUNS        runs per group count (each on fresh hosts and data dirs)
#   IDLE        the idle window over which CPU is measured
#   BIN         a dledger binary to measure instead of building this checkout
# The hosts' logs of a failed run are kept and their path printed; the script goes on with the
# next group count and exits 1 at the end.
set -euo pipefail
groups_set=${GROUPS_SET:-1 100 1000}
runs=${RUNS:-1}
idle=${IDLE:-10s}
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin=${BIN:-}
if [ -z "$bin" ]; then
  bin=$work/dledger
  echo "building $bin" >&2
  CGO_ENABLED=0 go build -o "$bin" ./cmd/dledger
fi
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$(git status --porcelain 2>/dev/null)" ] && commit="$commit (with uncommitted changes)"

failures=0
: >"$work/summaries"
for n in $groups_set; do
  args=(bench groups --groups "$n" --runs "$runs" --idle "$idle")
  echo "+ dledger ${args[*]}" >&2
  rc=0
  "$bin" "${args[@]}" 2>&1 | tee "$work/run.log" >&2 || rc=${PIPESTATUS[0]}
  [ "$rc" -ne 0 ] && failures=$((failures + 1))
  grep '^bench-groups: groups=' "$work/run.log" >>"$work/summaries" || true
done

echo
echo "Code: $commit; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "| groups | idle CPU, 3 hosts (% of a core) | per member (us/s) | RSS per host (MiB) | fds per host | cold start p50 / p99 ms | crash: groups moved | crash p50 / p99 ms | other groups' term changes | balance dev % steady / 10 s after rejoin | rejoin: within 5 % after (ms) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
awk '{
  delete f
  for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
  printf "| %s | %s | %s | %s | %s | %s / %s | %s | %s / %s | %s | %s / %s | %s |\n", f["groups"], f["idle_cpu_pct"],
    f["idle_us_per_member_s"], f["rss_mib_per_host"], f["fds_per_host"], f["cold_p50_ms"], f["cold_p99_ms"],
    f["crash_groups"], f["crash_p50_ms"], f["crash_p99_ms"], f["other_term_changes"], f["balance_max_dev_pct"],
    f["balance_rejoin_max_dev_pct"], f["rejoin_balanced_ms"]
}' "$work/summaries"
[ "$failures" -eq 0 ] || { echo "$failures group counts failed (logs kept, see above)" >&2; exit 1; }
