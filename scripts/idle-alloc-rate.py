#!/usr/bin/env python3
# Allocation rate over a `dledger bench groups` idle window (BENCHMARKS.md, "What a settled host
# allocates"), from DLEDGERPPROF's <pid>-mem.tsv (the allocs column: bytes allocated since the
# process started, sampled every 250 ms). Usage: idle-alloc-rate.py DIR..., each DIR holding
# the profiles of one run and the bench's output as out.txt:
#   DLEDGERPPROF=DIR,50 dledger bench groups --groups 10000 ... > DIR/out.txt
# The window starts cold_max_ms + idle_settle_ms after the first process start (the bench's
# out.txt; the hosts start within a few ms of each other) and lasts 10 s, cut short before the
# crash's sustained allocation if that comes first. The three first hosts only (a fourth,
# the restarted host, runs on its own clock).
import sys, glob, re
def load(f):
    rows=[]
    with open(f) as fh:
        hdr=fh.readline().split()
        if 'allocs' not in hdr: return []
        c=hdr.index('allocs'); r=hdr.index('rss'); g=hdr.index('goal'); l=hdr.index('live')
        for line in fh:
            p=line.split()
            if not p or p[0]=='peak' or len(p)!=len(hdr): continue
            rows.append((float(p[0]),int(p[c]),int(p[r]),int(p[g]),int(p[l])))
    return rows
def at(rows,t):
    best=None
    for row in rows:
        if row[0]<=t: best=row
    return best
def sustained(rows,i):  # 2 s from rows[i], every half second over 2 MiB
    t=rows[i][0]
    for k in range(4):
        a,b=at(rows,t+0.5*k-0.01),at(rows,t+0.5*(k+1)-0.01)
        if not a or not b or b[0]<t+0.5*(k+1)-0.3 or (b[1]-a[1])/1048576<=2.0: return False
    return True
for d in sys.argv[1:]:
    out=open(d+'/out.txt').read()
    m=re.search(r'cold_max_ms=([0-9.]+).*idle_settle_ms=([0-9.]+)',out)
    start=(float(m.group(1))+float(m.group(2)))/1000+0.25
    end=start+9.75
    files=sorted(glob.glob(d+'/*-mem.tsv'), key=lambda f: int(f.split('/')[-1].split('-')[0]))[:3]
    for f in files:
        rows=load(f)
        e=end
        for i in range(1,len(rows)):
            if rows[i][0]>start and (rows[i][1]-rows[i-1][1])/1048576>1.0 and sustained(rows,i):
                e=min(e,rows[i-1][0]); break
        ra,rb=at(rows,start),at(rows,e)
        if not ra or not rb or rb[0]-ra[0]<5 or rows[-1][0]<e: print(d,f.split('/')[-1],'window not covered'); continue
        mb=(rb[1]-ra[1])/1e6/(rb[0]-ra[0])
        print("%s %s window %.2f-%.2f s: %.3f MB/s allocated; rss %.1f MiB, goal %.1f MiB, live %.1f MiB at its end" % (d,f.split('/')[-1],ra[0],rb[0],mb,rb[2]/1048576,rb[3]/1048576,rb[4]/1048576))
