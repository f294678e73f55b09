package server

import (
	"sync"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// peerClients is a member's own transport (server.New, or a host with PerMemberLinks) as one
// rpc.Client per peer, so that the peer set can change while the member runs (issue 31,
// docs/protocol.md section 13): a member added to the group gets a client of its own, dialled
// at once; a member removed has its client closed, and with it its connection and goroutines.
// The members that stay keep their connections untouched, so a change never costs the
// leader a heartbeat. Each client has the goroutines one peer of a shared client had: no cost
// is added per peer.
type peerClients struct {
	opts rpc.ClientOptions // the template: every option but Peers

	mu      sync.RWMutex
	clients map[string]*rpc.Client // peer id -> its client
	addrs   map[string]string      // peer id -> the address its client dials
	closed  bool
	// closing counts the clients setPeers dropped that are still closing (Close waits for them).
	closing sync.WaitGroup
}

// newPeerClients dials every peer of opts.Peers, each with a client of its own.
func newPeerClients(opts rpc.ClientOptions) (*peerClients, error) {
	pc := &peerClients{opts: opts, clients: map[string]*rpc.Client{}, addrs: map[string]string{}}
	pc.opts.Peers = nil
	if _, err := pc.setPeers(opts.Peers); err != nil {
		pc.Close()
		return nil, err
	}
	return pc, nil
}

// setPeers makes the peer set peers (id -> address, this member not included): a peer that is
// new, or whose address changed, gets a new client; a peer no longer listed has its client
// closed, on a goroutine of its own: Close waits for the client's goroutines, and setPeers may
// be running on one of them (the removed member's own heartbeat answer commits its removal,
// and the elector's MembersChanged re-wires the transport from that callback: a synchronous
// Close there waited for itself). It returns the ids whose clients were created.
func (pc *peerClients) setPeers(peers map[string]string) (added []string, err error) {
	var stale []*rpc.Client
	defer func() {
		for _, cl := range stale {
			go func() {
				defer pc.closing.Done()
				cl.Close()
			}()
		}
	}()
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.closed {
		return nil, rpc.ErrClosed
	}
	for id, cl := range pc.clients {
		if addr, ok := peers[id]; !ok || addr != pc.addrs[id] {
			stale = append(stale, cl)
			pc.closing.Add(1)
			delete(pc.clients, id)
			delete(pc.addrs, id)
		}
	}
	for id, addr := range peers {
		if pc.clients[id] != nil {
			continue
		}
		o := pc.opts
		o.Peers = map[string]string{id: addr}
		cl, err := rpc.NewClient(o)
		if err != nil {
			return added, err
		}
		pc.clients[id], pc.addrs[id] = cl, addr
		added = append(added, id)
	}
	return added, nil
}

// client is peer id's client, or nil and why there is none.
func (pc *peerClients) client(id string) (*rpc.Client, error) {
	pc.mu.RLock()
	defer pc.mu.RUnlock()
	if pc.closed {
		return nil, rpc.ErrClosed
	}
	if cl := pc.clients[id]; cl != nil {
		return cl, nil
	}
	return nil, rpc.ErrUnknownPeer
}

func (pc *peerClients) SendVote(to string, req *protocol.VoteRequest, done func(*protocol.VoteResponse, error)) {
	cl, err := pc.client(to)
	if err != nil {
		done(nil, err)
		return
	}
	cl.SendVote(to, req, done)
}

func (pc *peerClients) SendHeartBeat(to string, req *protocol.HeartBeatRequest, done func(*protocol.HeartBeatResponse, error)) {
	cl, err := pc.client(to)
	if err != nil {
		done(nil, err)
		return
	}
	cl.SendHeartBeat(to, req, done)
}

func (pc *peerClients) SendLeadershipTransfer(to string, req *protocol.LeadershipTransferRequest,
	done func(*protocol.LeadershipTransferResponse, error)) {
	cl, err := pc.client(to)
	if err != nil {
		done(nil, err)
		return
	}
	cl.SendLeadershipTransfer(to, req, done)
}

func (pc *peerClients) SendMetadata(to string, req *protocol.MetadataRequest, done func(*protocol.MetadataResponse, error)) {
	cl, err := pc.client(to)
	if err != nil {
		done(nil, err)
		return
	}
	cl.SendMetadata(to, req, done)
}

// Kick makes peer's client dial at once if it is backing off; unknown peers are ignored.
func (pc *peerClients) Kick(peer string) {
	if cl, _ := pc.client(peer); cl != nil {
		cl.Kick(peer)
	}
}

// Connected reports whether the connection to peer is up.
func (pc *peerClients) Connected(peer string) bool {
	cl, _ := pc.client(peer)
	return cl != nil && cl.Connected(peer)
}

// Close closes every client; later calls and setPeers fail with rpc.ErrClosed.
func (pc *peerClients) Close() error {
	pc.mu.Lock()
	cls := pc.clients
	pc.clients, pc.addrs, pc.closed = map[string]*rpc.Client{}, map[string]string{}, true
	pc.mu.Unlock()
	for _, cl := range cls {
		cl.Close()
	}
	pc.closing.Wait()
	return nil
}

// currentPeers is the members the transport reaches now (this one included).
func (s *Server) currentPeers() []memberstate.Peer {
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	return s.peers
}
