package dledger

// confBehind says whether member i (of ms.Peers) has not reported storing this leader's newest
// configuration, or knowing its committed one: it is then never quiet (quiet.go), since only
// an explicit heartbeat carries a configuration, and a change proposed while the followers are
// quiet would otherwise wait for QuietRefresh and time out (issue 31 on a host with a liveness
// table; TestHostGroupsChangeMembersApart in package server).
func (e *Elector) confBehind(i int) bool {
	if i >= len(e.mem.acks) {
		return true
	}
	a := e.mem.acks[i]
	return !a.known || a.highest.less(e.mem.highest()) || a.commited.less(e.mem.committed.version())
}
