package rpc

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/rpc/secure"
)

// callStream sends heartbeats from cl (member id) to testSelf one after another, each as soon
// as the previous one is answered, until stop; it counts the answered calls and keeps the
// failed ones' errors.
type callStream struct {
	ok     atomic.Int64
	mu     sync.Mutex
	failed []error
	stop   chan struct{}
	done   chan struct{}
}

func streamCalls(cl *Client, id string) *callStream {
	cs := &callStream{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(cs.done)
		for term := int64(1); ; term++ {
			select {
			case <-cs.stop:
				return
			default:
			}
			ch := make(chan error, 1)
			req := hbRequest(1)
			req.LocalID, req.LeaderID = id, id
			cl.SendHeartBeat(testSelf, req, func(_ *protocol.HeartBeatResponse, err error) { ch <- err })
			if err := <-ch; err != nil {
				cs.mu.Lock()
				cs.failed = append(cs.failed, err)
				cs.mu.Unlock()
			} else {
				cs.ok.Add(1)
			}
		}
	}()
	return cs
}

// more waits until n more calls were answered.
func (cs *callStream) more(t *testing.T, n int64) {
	t.Helper()
	want := cs.ok.Load() + n
	eventually(t, "more calls answered", func() bool { return cs.ok.Load() >= want })
}

func (cs *callStream) end() []error {
	close(cs.stop)
	<-cs.done
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.failed
}

// TestRotationReplacesTheLinkBeforeClosingIt: a key rotation (docs/design.md, "Member keys")
// costs no link and no call, in both directions. The dialler n1 rotates its own key: its
// reload dials a replacement with the new key and retires the old connection once the new
// one is up, so when the listener then drops n1's old key it has no connection left to close
// (the old order closed it there, and n1 redialled: calls failed meanwhile). Then the
// listener rotates its key: n1's connection authenticated the listener's old key, and when n1
// drops it, n1 replaces that connection before the old one goes. A stream of calls sees no
// failure throughout.
func TestRotationReplacesTheLinkBeforeClosingIt(t *testing.T) {
	mk := newMemberKeys(t, testSelf, "n1")
	var reasons, n1Reasons reasonCounter
	spk, n1pk := mk.peerKeys(testSelf), mk.peerKeys("n1")
	s := memberServer(t, &fakeHandler{}, spk, &reasons)
	var connects atomic.Int32
	cl := memberClient(t, s.Addr(), "n1", n1pk, &n1Reasons, &connects)
	eventually(t, "n1 connected", func() bool { return cl.Connected(testSelf) && spk.Live() == 1 })
	stream := streamCalls(cl, "n1")
	stream.more(t, 10)
	reload := func(pk *PeerKeys, self string, key secure.StaticKey, trust *secure.Trust) int {
		t.Helper()
		next, err := pk.Identity().Next(key, trust, self)
		if err != nil {
			t.Fatal(err)
		}
		closed := pk.Reload(next)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := pk.AwaitReplacements(ctx); err != nil {
			t.Fatalf("replacements: %v", err)
		}
		return closed
	}

	// n1 rotates its key.
	oldN1, newN1 := mk.keys["n1"], mustStaticKey(t)
	both := mk.trustOf(map[string][]secure.PublicKey{"n1": {oldN1.Public(), newN1.Public()}})
	if c := reload(spk, testSelf, mk.keys[testSelf], both) + reload(n1pk, "n1", oldN1, both); c != 0 {
		t.Fatalf("step 1 closed %d", c)
	}
	if c := reload(n1pk, "n1", newN1, both); c != 0 {
		t.Fatalf("step 2: n1's own rotation closed %d (it replaces, it does not close)", c)
	}
	stream.more(t, 10)
	onlyNew := mk.trustOf(map[string][]secure.PublicKey{"n1": {newN1.Public()}})
	if c := reload(spk, testSelf, mk.keys[testSelf], onlyNew); c != 0 {
		t.Fatalf("step 3: the listener closed %d connections on n1's old key: n1 did not replace it first", c)
	}
	stream.more(t, 10)

	// The listener rotates its key; n1 drops the old one.
	oldS, newS := mk.keys[testSelf], mustStaticKey(t)
	both = mk.trustOf(map[string][]secure.PublicKey{"n1": {newN1.Public()}, testSelf: {oldS.Public(), newS.Public()}})
	reload(spk, testSelf, oldS, both)
	reload(n1pk, "n1", newN1, both)
	reload(spk, testSelf, newS, both) // the listener answers with its new key from now on
	stream.more(t, 10)
	final := mk.trustOf(map[string][]secure.PublicKey{"n1": {newN1.Public()}, testSelf: {newS.Public()}})
	if c := reload(n1pk, "n1", newN1, final); c != 1 {
		t.Fatalf("n1 dropping the listener's old key ended %d connections, want its one (replaced)", c)
	}
	reload(spk, testSelf, newS, final)
	stream.more(t, 10)
	if failed := stream.end(); len(failed) != 0 {
		t.Fatalf("%d calls failed during the rotations, the first: %v", len(failed), failed[0])
	}
	if n := connects.Load(); n != 3 {
		t.Fatalf("n1 connected %d times, want 3 (the first, and one replacement per rotation)", n)
	}
	eventually(t, "one connection left", func() bool { return spk.Live() == 1 && n1pk.Live() == 1 })
	for _, r := range []string{secure.ReasonUnknownKey, secure.ReasonWrongID, secure.ReasonBadKey} {
		if reasons.get(r)+n1Reasons.get(r) != 0 {
			t.Fatalf("counted %q failures", r)
		}
	}
}

func mustStaticKey(t *testing.T) secure.StaticKey {
	t.Helper()
	k, err := secure.GenerateStaticKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
