#!/usr/bin/env python3
"""crash_cpu.py BINARY OUT: CPU of a 10,000-group crash's survivors (issue 29, BENCHMARKS.md "hcpu").

Run it beside `BINARY bench groups` (inside the same `flock /tmp/bench.lock`): it waits for the
three `BINARY server` processes, and at the first one's death (the bench's kill -9) sends the
others SIGUSR2 (a CPU profile when they run with DLEDGERCPUSIG=DIR,MS) and writes, every 5 ms for
3 s, the seconds since the death and each survivor's CPU (utime + stime) since then. The CPU at
the bench's crash_max_ms over its crash_groups is the CPU per election.
"""
import os
import signal
import sys
import time

binary, out = sys.argv[1], sys.argv[2]
tck = os.sysconf('SC_CLK_TCK')


def servers():
    found = []
    for p in os.listdir('/proc'):
        if not p.isdigit():
            continue
        try:
            cl = open(f'/proc/{p}/cmdline', 'rb').read().split(b'\0')
        except OSError:
            continue
        if len(cl) > 1 and cl[0].decode() == binary and cl[1] == b'server':
            found.append(int(p))
    return found


def stat(pid):
    try:
        s = open(f'/proc/{pid}/stat').read()
    except OSError:
        return None
    return s[s.rindex(')') + 2:].split()


def cpu(pid):
    f = stat(pid)
    return (int(f[11]) + int(f[12])) / tck if f else float('nan')


def dead(pid):
    f = stat(pid)
    return f is None or f[0] == 'Z'


start = time.time()
while len(pids := servers()) != 3:
    if time.time() - start > 600:
        sys.exit('no three hosts')
    time.sleep(0.05)
while not (gone := [p for p in pids if dead(p)]):
    time.sleep(0.002)
t0 = time.time()
survivors = [p for p in pids if p not in gone]
for p in survivors:
    try:
        os.kill(p, signal.SIGUSR2)
    except OSError:
        pass
c0 = {p: cpu(p) for p in survivors}
with open(out, 'w') as o:
    o.write(f'# kill seen {t0:.3f} dead {gone} survivors {survivors}\n')
    while (t := time.time() - t0) < 3.0:
        o.write('%.3f %s\n' % (t, ' '.join('%.2f' % (cpu(p) - c0[p]) for p in survivors)))
        time.sleep(0.005)
