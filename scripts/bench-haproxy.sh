#!/usr/bin/env bash
# Measures how fast the real HAProxy follows a leader change, for the shipped scripts/haproxy.cfg
# and the alternatives it was chosen over (BENCHMARKS.md, "HAProxy switch-over").
# It runs cmd/dledger's TestHAProxyShippedConfigFollowsFailovers with more rounds: a group of
# three real processes on loopback (the test's timings: heartbeat 100 ms), every variant in its
# own HAProxy in front of the same group at the same time, so every variant sees the very same
# failovers; each round fails the leader over by kill -9, then SIGTERM, then `dledger transfer`.
# For every variant and kind it prints the time from the new leader's election (its LEADER role
# event) to HAProxy marking it UP (HAProxy's own log, read from its stats socket), how long the
# leader backend had no server UP, and how long it had two or more UP, each as a median and the
# list. The assertions apply to the shipped configuration only.
#   rise2, slow-rise2, rise1 and old: other default-server lines (rise1 stands in for an
#     agent-check, which has no rise/fall: a single answer moves a server);
#   watch-api: the shipped checks plus a driver that follows every member's /v1/watch stream and
#     sets servers UP/DOWN through the runtime API at once (the test's startWatchDriver).
# Usage: scripts/bench-haproxy.sh [ROUNDS]   (default 10; needs haproxy on PATH)
set -euo pipefail
rounds=${1:-10}
cd "$(dirname "$0")/.."
command -v haproxy >/dev/null || { echo "bench-haproxy: haproxy is not on PATH (Debian: apt-get install haproxy)" >&2; exit 1; }
variants="rise2=default-server inter 100ms fall 1 rise 2 on-marked-down shutdown-sessions"
variants+=";fast-rise3=default-server inter 50ms fall 1 rise 3 on-marked-down shutdown-sessions"
variants+=";rise1=default-server inter 100ms fall 1 rise 1 on-marked-down shutdown-sessions"
variants+=";slow-rise2=default-server inter 500ms fall 1 rise 2 on-marked-down shutdown-sessions"
variants+=";old=default-server inter 500ms fall 2 rise 1"
DLEDGER_HAPROXY_ROUNDS=$rounds DLEDGER_HAPROXY_VARIANTS=$variants DLEDGER_HAPROXY_WATCH_DRIVER=1 \
  go test -count=1 -timeout 30m -run '^TestHAProxyShippedConfigFollowsFailovers$' -v ./cmd/dledger/ |
  sed -n 's/^ *haproxy_test.go:[0-9]*: //p; /^--- /p; /^ok /p; /^FAIL/p'
