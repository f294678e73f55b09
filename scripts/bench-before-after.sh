#!/usr/bin/env bash
# Before/after failover benchmark: two dledger binaries measured by `dledger bench failover`,
# interleaved in chunks (CHUNK trials of the old one, then CHUNK of the new one, and again) so
# that the machine's noise, which on a shared 2-core machine comes and goes over minutes, hits
# both alike; the order within a pair alternates (old-new, new-old, ...) so neither binary
# always runs on the machine the other just left. Prints one markdown row per binary, group
# size and scenario, with nearest-rank percentiles over all of that binary's trials (with 50
# trials, p99 is the slowest trial).
#
# Usage: [TRIALS=50] [CHUNK=10] [MEMBERS="3 5"] [SCENARIOS="crash pause cold-start"]
#        [PROFILE=lan] [OUT=file] scripts/bench-before-after.sh OLD_BINARY NEW_BINARY
# The harness is the NEW binary's `bench failover`; OLD_BINARY only runs as the members
# (--binary), so a binary from before a change of the election core can be measured.
# With the defaults the run takes about 25 minutes on a 2-core machine.
set -euo pipefail
[ $# -eq 2 ] || { sed -n '2,11p' "$0" >&2; exit 2; }
old=$1 new=$2
trials=${TRIALS:-50}; chunk=${CHUNK:-10}
members_set=${MEMBERS:-3 5}; scenarios=${SCENARIOS:-crash pause cold-start}; profile=${PROFILE:-lan}
for b in "$old" "$new"; do
  [ -x "$b" ] || { echo "bench-before-after: $b is not an executable" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# rows prints the markdown row of one binary's trial lines ("trial i/n: X ms ..." or FAILED).
rows() { # label members scenario file
  awk -v l="$1" -v m="$2" -v s="$3" '
    /^trial [0-9]+\/[0-9]+: +[0-9.]+ ms/ { v[n++] = $3 + 0; if ($0 ~ /needless=[1-9]/) needless++ ; next }
    /^trial [0-9]+\/[0-9]+: FAILED/ { failed++ }
    END {
      if (n == 0) { printf "| %s | %s | %s | 0 | - | - | - | - | %d | %d |\n", m, s, l, failed, needless; exit }
      for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
      split("0.5 0.9 0.99", q, " ")
      for (k = 1; k <= 3; k++) { r = int(q[k] * n); if (r < q[k] * n) r++; p[k] = v[r - 1] }
      printf "| %s | %s | %s | %d | %.1f | %.1f | %.1f | %.1f | %d | %d |\n", m, s, l, n, p[1], p[2], p[3], v[n - 1], failed, needless + 0
    }' "$4"
}

{
  echo "before: $old ($("$old" version 2>/dev/null | head -1 || echo '?'))"
  echo "after:  $new ($("$new" version 2>/dev/null | head -1 || echo '?'))"
  echo "machine: $(nproc) cores, load before $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "command: TRIALS=$trials CHUNK=$chunk scripts/bench-before-after.sh OLD NEW (profile $profile)"
  echo
  echo "| members | scenario | binary | trials | p50 ms | p90 ms | p99 ms | max ms | failed | needless |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
} | tee -a "${OUT:-/dev/null}"
for members in $members_set; do
  for scenario in $scenarios; do
    : >"$work/old" ; : >"$work/new"
    order="old new"
    for ((done_ = 0; done_ < trials; done_ += chunk)); do
      n=$((trials - done_ < chunk ? trials - done_ : chunk))
      for side in $order; do
        bin=$old; [ "$side" = new ] && bin=$new
        rc=0
        "$new" bench failover --binary "$bin" --members "$members" --trials "$n" --scenario "$scenario" \
          --profile "$profile" >>"$work/$side" 2>&1 || rc=$?
        case $rc in
        0 | 1) ;; # 1: some trials failed; their lines say so
        130) echo "bench-before-after: interrupted" >&2; exit 130 ;;
        *) echo "trial 0/0: FAILED: exit $rc" >>"$work/$side" ;; # the run itself failed
        esac
      done
      [ "$order" = "old new" ] && order="new old" || order="old new"
    done
    { rows before "$members" "$scenario" "$work/old"; rows after "$members" "$scenario" "$work/new"; } | tee -a "${OUT:-/dev/null}"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "${OUT:-/dev/null}"
