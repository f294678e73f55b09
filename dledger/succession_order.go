package dledger

import (
	"sync"
	"sync/atomic"
)

// joinedSuccessors is the order of succession of the peers idx, their ids ';'-separated, as
// strings.Join of successorIDs makes it, but one string per distinct order in the process
// (successorOrders): a leader computes its order for every pass it plans (nextRoundAt, quiet.go)
// and every heartbeat round, and the joined string (and the slice of ids under it) was the
// largest count of allocations in a 10,000-group crash (issue 29, halloc). The orders are
// few: permutations of a group's peer ids, which the groups of a host share.
func (e *Elector) joinedSuccessors(idx []int) string {
	if len(idx) == 0 {
		return ""
	}
	peers := e.ms.Peers()
	if len(idx) == 1 {
		return peers[idx[0]].ID
	}
	var buf [128]byte
	b := buf[:0]
	for k, i := range idx {
		if k > 0 {
			b = append(b, ';')
		}
		b = append(b, peers[i].ID...)
	}
	return successorOrders.intern(b)
}

// successorOrders is the process's orders of succession, each once. Bounded: past
// successorOrdersMax distinct orders a new one is its own string, as before.
var successorOrders internTable

const successorOrdersMax = 4096

type internTable struct {
	mu   sync.RWMutex
	m    map[string]string
	full atomic.Bool // successorOrdersMax reached: a new order is its own string, with no lock
}

// intern returns the table's string equal to b, adding it if there is room.
func (t *internTable) intern(b []byte) string {
	t.mu.RLock()
	s, ok := t.m[string(b)] // no copy for the lookup
	t.mu.RUnlock()
	if ok {
		return s
	}
	if t.full.Load() {
		return string(b) // as before the table, and no writer's lock per call
	}
	s = string(b)
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.m[s]; ok {
		return old
	}
	if len(t.m) < successorOrdersMax {
		if t.m == nil {
			t.m = map[string]string{}
		}
		t.m[s] = s
	}
	t.full.Store(len(t.m) >= successorOrdersMax)
	return s
}
