#!/usr/bin/env bash
# Measures leadership transfer time on loopback over N transfers in a 3-member `dledger dev`
# group. Each transfer goes from the current leader to another member (the next one after it),
# never to the leader itself: a self-transfer answers SUCCESS at once (~2 ms) and would drag the
# percentiles down. The time is from the request to the SUCCESS answer, as `dledger transfer`
# prints it: the answer comes when the transferee has won its election at term+1 and replied,
# so it includes the transferee's catch-up check and one vote round, not only a message.
# Failed transfers (any other answer, or no answer) are counted and listed apart; they are not
# in the percentiles.
# Usage: scripts/transfer-time.sh [N] [profile]
# Ports: rpc RPC_BASE..+2 (default 23911), HTTP HTTP_BASE..+2 (default RPC_BASE + 1000).
set -euo pipefail
n=${1:-20}; profile=${2:-lan}
rpc_base=${RPC_BASE:-23911}; http_base=${HTTP_BASE:-$((rpc_base + 1000))}
cd "$(dirname "$0")/.."
work=$(mktemp -d)
bin=$work/dledger
# Static, as shipped (the container image too): it starts faster (BENCHMARKS.md, "Start-up").
CGO_ENABLED=0 go build -o "$bin" ./cmd/dledger
"$bin" dev --profile "$profile" --base-port "$rpc_base" --http-base-port "$http_base" >"$work/dev.log" 2>&1 &
dev=$!
trap 'kill $dev 2>/dev/null; wait $dev 2>/dev/null; rm -rf "$work"' EXIT
http=127.0.0.1:$http_base,127.0.0.1:$((http_base + 1)),127.0.0.1:$((http_base + 2))

# leader prints "ID TERM" of the member reporting itself LEADER, only if exactly one does.
leader() {
  "$bin" status --http "$http" 2>/dev/null | awk '$2 == "LEADER" { n++; id = $1; term = $3 }
    END { if (n == 1) print id, term }' || true
}
# await_leader waits up to 10 s for a single leader and prints "ID TERM".
await_leader() {
  local l
  for _ in $(seq 1 100); do l=$(leader); [ -n "$l" ] && { echo "$l"; return 0; }; sleep 0.1; done
  echo "transfer-time: no single leader within 10 s; dev log: $work/dev.log" >&2; return 1
}

await_leader >/dev/null
sleep 1 # the leader hears every follower's ledger before the first transfer
ok=$work/ok; failed=$work/failed; self=$work/self; : >"$ok"; : >"$failed"; : >"$self"
for _ in $(seq 1 "$n"); do
  l=$(await_leader) # set -e ends the run here if no leader appears
  read -r from term <<<"$l"
  to="n$(( (${from#n} + 1) % 3 ))"
  # Asked of the leader itself, so a stale view cannot turn the request into a forwarded one.
  if line=$("$bin" transfer --http "127.0.0.1:$((http_base + ${from#n}))" --to "$to" 2>&1); then
    # A real hand-over answers with term+1; SUCCESS at the same term means $to already led.
    if [[ $line =~ term=([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -gt "$term" ]; then
      echo "$from@$term -> $line" | tee -a "$ok"
    else
      echo "$from@$term -> $line (already leader: not counted)" | tee -a "$self"
    fi
  else
    echo "$from@$term -> FAILED: $line" | tee -a "$failed"
  fi
  sleep 0.5 # let the new leader's heartbeats reach everyone before the next transfer
done
nfail=$(wc -l <"$failed")
if [ -s "$self" ]; then echo "transfer: $(wc -l <"$self") request(s) found the target already leading (not counted)"; fi
grep -o '([0-9.]* ms)' "$ok" | tr -d '(ms)' | sort -n | awk -v nfail="$nfail" '{a[NR]=$1} END {
  if (NR == 0) { printf "transfer: no successful transfers (failed=%d)\n", nfail; exit 1 }
  printf "transfer: n=%d failed=%d p50_ms=%.1f p90_ms=%.1f max_ms=%.1f (request to SUCCESS, no self-transfers)\n",
    NR, nfail, a[int(NR*0.5+0.5)], a[int(NR*0.9+0.5)], a[NR] }'
if [ "$nfail" -gt 0 ]; then
  echo "failed transfers (not in the percentiles):"
  sed 's/^/  /' "$failed"
fi
