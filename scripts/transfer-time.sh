#!/usr/bin/env bash
# Measures leadership transfer time on loopback: request to SUCCESS (the transferee has won
# its election and answered), over N transfers rotating through a `dledger dev` group.
# Usage: scripts/transfer-time.sh [N] [profile]
set -euo pipefail
n=${1:-20}; profile=${2:-lan}
cd "$(dirname "$0")/.."
bin=$(mktemp -d)/dledger
go build -o "$bin" ./cmd/dledger
"$bin" dev --profile "$profile" --base-port 23911 >/dev/null 2>&1 &
dev=$!
trap 'kill $dev 2>/dev/null; wait $dev 2>/dev/null' EXIT
http=127.0.0.1:24911,127.0.0.1:24912,127.0.0.1:24913
for _ in $(seq 1 300); do "$bin" status --http $http 2>/dev/null | grep -q LEADER && break; sleep 0.1; done
sleep 1 # the leader hears every follower's ledger before the first transfer
out=$(mktemp)
for i in $(seq 1 "$n"); do
  to="n$(( i % 3 ))"
  "$bin" transfer --http 127.0.0.1:24911 --to "$to" | tee -a "$out" || true
  sleep 0.5 # let the new leader's heartbeats reach everyone before the next transfer
done
grep -o '([0-9.]* ms)' "$out" | tr -d '(ms)' | sort -n | awk '{a[NR]=$1} END {
  if (NR == 0) { print "transfer: no successful transfers"; exit 1 }
  printf "transfer: n=%d p50_ms=%.1f p90_ms=%.1f max_ms=%.1f\n", NR, a[int(NR*0.5+0.5)], a[int(NR*0.9+0.5)], a[NR] }'
