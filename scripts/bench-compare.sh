#!/usr/bin/env bash
# Side-by-side failover benchmark: our members against etcd 3.4 and ZooKeeper 3.8 from
# Debian's packages, 3 members each on 127.0.0.1 (`dledger-lab compare`).
#
# Usage: [TRIALS=20] [TRIALS_DEFAULTS=10] [OUT=FILE] scripts/bench-compare.sh [BINARY] [-- extra flags]
#   BINARY           the dledger executable to run as our members (default: built from this
#                    tree). The lab command is always built from this tree, so an older
#                    BINARY (before or after a change of the election core) can be measured.
#   TRIALS           trials per system at matched tolerance (default 20)
#   TRIALS_DEFAULTS  trials per system at each system's defaults (default 10)
#   OUT              also write the report (versions, machine, command, output) to this file
#   extra flags      passed to `dledger-lab compare`, e.g. -- --sets matched --idle 60s
#
# Installs what it needs with apt-get when run as root (etcd-server, zookeeper and the two
# Java libraries ZooKeeper's AdminServer and logging need); whatever it could not install is
# listed, and those systems are skipped by the benchmark (their rows say why).
# With the defaults the run takes about 10-12 minutes on a 2-core machine.
set -uo pipefail
cd "$(dirname "$0")/.."
trials=${TRIALS:-20}
trials_defaults=${TRIALS_DEFAULTS:-10}
member_bin=""
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  member_bin=$(realpath "$1") || { echo "no such binary: $1" >&2; exit 2; }
  shift
fi
[ "${1:-}" = "--" ] && shift

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 1. Install. Each package separately, so one failure does not hide the others.
packages=(etcd-server etcd-client zookeeper libservlet-api-java libslf4j-java)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
not_installed=()
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    echo "installing ${missing[*]}" >&2
    apt-get update -qq >/dev/null 2>&1 || echo "apt-get update failed; trying the cached package lists" >&2
    for p in "${missing[@]}"; do
      # policy-rc.d may be absent: keep the packaged services from starting (they would take
      # the default ports and add idle load); the benchmark runs its own members.
      if ! RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$p" >"$work/apt-$p.log" 2>&1; then
        not_installed+=("$p")
        echo "COULD NOT INSTALL $p:" >&2
        tail -3 "$work/apt-$p.log" | sed 's/^/  /' >&2
      fi
    done
  else
    not_installed=("${missing[@]}")
    echo "not root or no apt-get: cannot install ${missing[*]}" >&2
  fi
fi
# A packaged service that did start would share the machine (and the default ports).
if pgrep -x etcd >/dev/null 2>&1 || pgrep -f QuorumPeerMain >/dev/null 2>&1; then
  echo "warning: an etcd or ZooKeeper process is already running and will add load; stop it for clean numbers" >&2
fi

# 2. Build the lab command (and our members, unless BINARY was given).
harness=$work/dledger-lab
echo "building $harness" >&2
CGO_ENABLED=0 go build -o "$harness" ./cmd/dledger-lab || { echo "build failed" >&2; exit 1; }
if [ -z "$member_bin" ]; then
  member_bin=$work/dledger
  CGO_ENABLED=0 go build -o "$member_bin" ./cmd/dledger || { echo "build failed" >&2; exit 1; }
fi

# 3. Versions and machine.
version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo "not installed"; }
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$(git status --porcelain 2>/dev/null)" ] && commit="$commit (with uncommitted changes)"
report=$work/report
{
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); load average before $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- Machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores; $(uname -sr); $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  echo "- Ours: $member_bin (harness built from $commit)"
  echo "- etcd: Debian etcd-server $(version etcd-server) ($(etcd --version 2>/dev/null | sed -n 1p))"
  echo "- ZooKeeper: Debian zookeeper $(version zookeeper), libzookeeper-java $(version libzookeeper-java); $(java -version 2>&1 | sed -n 1p)"
  [ ${#not_installed[@]} -gt 0 ] && echo "- NOT INSTALLED: ${not_installed[*]}"
  echo "- Command: TRIALS=$trials TRIALS_DEFAULTS=$trials_defaults scripts/bench-compare.sh${1:+ -- $*}, which ran:"
  echo "  dledger-lab compare --binary $member_bin --trials $trials --trials-defaults $trials_defaults $*"
  echo
} >"$report"
cat "$report" >&2

# 4. Run.
rc=0
"$harness" compare --binary "$member_bin" --trials "$trials" --trials-defaults "$trials_defaults" "$@" \
  2>&1 | tee "$work/run.log" || rc=${PIPESTATUS[0]}
echo "- Finished $(date -u '+%H:%M UTC'); load average after $(cut -d' ' -f1-3 /proc/loadavg); exit status $rc" >>"$report"
if [ -n "${OUT:-}" ]; then
  { cat "$report"; echo; echo '```'; cat "$work/run.log"; echo '```'; } >"$OUT"
  echo "wrote $OUT" >&2
fi
[ ${#not_installed[@]} -gt 0 ] && echo "could not install: ${not_installed[*]} (see above); those systems were skipped" >&2
exit "$rc"
