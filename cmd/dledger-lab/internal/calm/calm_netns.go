package calm

import (
	"errors"
	"sync"

	"github.com/dledger-go/dledger/cmd/internal/harness"
)

// memberNet runs each member in its own network namespace (harness.MemberNet), so one
// member's links can be cut (the flap-link scenario): cutting members a and b apart discards
// b's packets in a's namespace and the reverse in b's, silently, as a dead switch port would.
// The bridge has an address, so the benchmark reaches every member's read-only status
// listener (--metrics) over it; a cut between members never hides one from the poller.
type memberNet struct{ *harness.MemberNet }

// newMemberNet builds the network for n members on 10.214.x, or says why it can not (the
// scenario is then skipped with that reason).
func newMemberNet(n int) (*memberNet, error) {
	mn, err := harness.NewMemberNet(n, "dc", "10.214")
	if err != nil {
		return nil, err
	}
	return &memberNet{mn}, nil
}

// close deletes everything newMemberNet made. The members must be stopped first.
func (m *memberNet) close() { m.Close() }

// cut isolates member i from every other member (not from the benchmark); heal undoes it.
// Each takes a few `ip` calls, which a loaded machine can stretch to hundreds of
// milliseconds, so they run at once and in the order that keeps the half-done state
// harmless: a cut first makes the others deaf to i, then i deaf to them; a heal first lets
// i hear them again, then them hear i. In between, i hears the group but nobody hears it:
// it can not disturb anyone, which is all a cut member should be able to do.
func (m *memberNet) cut(i int) error {
	return errors.Join(m.dropAll(i, true, "add"), m.dropAll(i, false, "add"))
}

func (m *memberNet) heal(i int) error {
	return errors.Join(m.dropAll(i, false, "del"), m.dropAll(i, true, "del"))
}

// dropAll adds or deletes, concurrently, the rules in every other member's namespace that
// discard packets from i (othersDeaf), or those in i's namespace that discard theirs.
func (m *memberNet) dropAll(i int, othersDeaf bool, op string) error {
	errs := make([]error, len(m.NS))
	var wg sync.WaitGroup
	for j := range m.NS {
		if j == i {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if othersDeaf {
				errs[j] = m.Drop(j, i, op)
			} else {
				errs[j] = m.Drop(i, j, op)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// place moves the cluster's members into the namespaces (harness.Cluster.InNamespaces).
func (m *memberNet) place(c *harness.Cluster) { c.InNamespaces(m.NS, m.IPs) }
