package dledger

import (
	"github.com/dledger-go/dledger/dledger/internal/bugs"
	"github.com/dledger-go/dledger/memberstate"
)

// The simulator's checker tests switch deliberate bugs on through dledger/internal/bugs, so
// the Elector's public API has no test switch. Two transitions read e.bugs (becomeFollower and
// endTakeLeadership), the schedule's list of deadlines (deadlines) and the follower timeout's
// seam (followerTimeout, adaptive.go); no decision table does.
func init() {
	bugs.Set = func(elector any, b bugs.Bugs) {
		e := elector.(*Elector)
		e.mu.Lock()
		defer e.mu.Unlock()
		e.bugs = b
	}
	bugs.MemberState = func(elector any) *memberstate.MemberState { return elector.(*Elector).ms }
}
