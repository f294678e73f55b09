package metrics

import (
	"testing"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A member's membership series follow its configuration, and the host counts each member once,
// under its current kind, until it leaves: the host's series have no group label whatever the
// number of groups.
func TestMembershipSeriesAndHostCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	host, err := NewHostMembership(reg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewMembership(reg, "g1", "n0", host)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewMembership(nil, "g2", "n0", host) // a member without series of its own
	if err != nil {
		t.Fatal(err)
	}
	if b.own != nil || unsafe.Sizeof(*b) > 48 {
		t.Errorf("a member without series keeps %+v, %d bytes (a host's thousands: the 48-byte class)", b.own, unsafe.Sizeof(*b))
	}
	kinds := func(k string) float64 { return testutil.ToFloat64(host.kinds.WithLabelValues(k)) }
	a.Set(0, 3, 0, KindVoter)
	b.Set(0, 0, 0, KindJoining)
	b.Set(2, 3, 1, KindNonVoter)
	if kinds(KindVoter) != 1 || kinds(KindNonVoter) != 1 || kinds(KindJoining) != 0 {
		t.Fatalf("host counts voter %v non-voter %v joining %v", kinds(KindVoter), kinds(KindNonVoter), kinds(KindJoining))
	}
	a.Set(3, 3, 1, KindVoter)
	if got := testutil.ToFloat64(a.own.epoch); got != 3 {
		t.Fatalf("epoch %v", got)
	}
	if got := testutil.ToFloat64(a.own.members.WithLabelValues(KindNonVoter)); got != 1 {
		t.Fatalf("non-voters %v", got)
	}
	b.Set(3, 4, 0, KindVoter)
	a.Set(4, 3, 0, KindRemoved)
	if kinds(KindVoter) != 1 || kinds(KindNonVoter) != 0 || kinds(KindRemoved) != 1 {
		t.Fatalf("after promote and remove: voter %v non-voter %v removed %v", kinds(KindVoter), kinds(KindNonVoter), kinds(KindRemoved))
	}
	a.Unregister()
	b.Unregister()
	for _, k := range memberKinds {
		if kinds(k) != 0 {
			t.Fatalf("%s still counts %v after every member left", k, kinds(k))
		}
	}
	if n, _ := testutil.GatherAndCount(reg, "dledger_configuration_epoch"); n != 0 {
		t.Fatalf("%d epoch series left after Unregister", n)
	}
}
