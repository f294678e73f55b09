package rpc

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/rpc/secure"
)

// The client side uses net.Conn with two goroutines per connected peer (a reader and a
// writer) rather than gnet. A member has only a few peers, so a few goroutines cost nothing,
// and blocking-style I/O gives us dial timeouts, write deadlines and reconnection in
// straight-line code, free of gnet's client pitfalls (no Dial/Enroll from callbacks, none after
// Stop, a specific balancer for Register). Once connected, the reader and writer go through
// socketIO, which on Linux reads and writes the socket with raw system calls (rawio_linux.go).

// ClientOptions configure a Client. Zero values take the documented defaults.
type ClientOptions struct {
	// Peers maps member id to host:port. It should not contain the member itself (the
	// elector votes for itself without the network).
	Peers map[string]string
	// Auth is peer authentication: the group key, group and this member's id, or Insecure.
	Auth Auth
	// CallTimeout bounds each call (default 1 s): done gets ErrTimeout if no answer came,
	// as soon as the deadline passes.
	CallTimeout time.Duration
	// TransferTimeout replaces CallTimeout for leadership transfers (default 5 s): the
	// transferee answers only after catching up (leadershipTransferWaitTimeout) and winning
	// its election.
	TransferTimeout time.Duration
	// DialTimeout bounds one connection attempt, the handshake included (default 500 ms).
	DialTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the delay between connection attempts to a peer
	// that is down (defaults 50 ms and 1 s), with jitter. It doubles after each failure: a
	// refused dial, or a connection that ended before it carried an answer or lasted
	// ReconnectMax; after any other connection the peer is redialled at once and the delay
	// starts over from ReconnectMin. A dial
	// that timed out (nothing answered: the network between us is down) is retried after
	// ReconnectMin without doubling, since the peer saw nothing of it and the dial timeout
	// already paces the attempts: a peer behind a partition that heals is found within
	// about DialTimeout.
	ReconnectMin, ReconnectMax time.Duration
	// OnPeerGone, if set, is called (on the peer's connection goroutine; it must not block)
	// when a connection to the peer was closed by the other end and the redial made at once
	// was refused: nothing listens on the peer's port, so its process is not running (a crash,
	// a stop). A redial that the peer resets (its port caught closing) is repeated at once, up
	// to three times, and is neither reported nor counted as an authentication failure. A cut
	// link causes neither a close nor a refusal, and a peer that restarted accepts the redial,
	// so neither is reported. dledger.Elector.PeerGone acts on it.
	OnPeerGone func(peer string)
	// OnPeerConnected, if set, is called (on the peer's connection goroutine, after the hello
	// is written and before anything else is sent) each time a connection to the peer is up
	// and ready for calls; calls made from it go out on that connection. While it runs, that
	// connection's writer and timeout sweep wait, and so does Close, so it must not block for
	// long. dledger.Elector.PeerReachable acts on it (it may wait for the elector's lock, held
	// at most for a vote's fsync): a group starting at once retries its first round as soon
	// as the members it needs are connected.
	OnPeerConnected func(peer string)
	// MaxFrameSize bounds a frame body in either direction (default DefaultMaxFrameSize; with
	// Auth.Keys at most secure.MaxMessageLen, sealed).
	MaxFrameSize int
	// SendQueue is how many frames may wait for one peer's writer (default 256); beyond it
	// calls fail at once with ErrOverloaded. Only what waits takes memory.
	SendQueue int
	// Logger receives the client's logs (default: none). Bad-frame lines are rate-limited.
	Logger *zap.Logger
	// Hooks count bad frames from peers and failed calls.
	Hooks
}

func (o *ClientOptions) setDefaults() {
	if o.CallTimeout <= 0 {
		o.CallTimeout = time.Second
	}
	if o.TransferTimeout <= 0 {
		o.TransferTimeout = 5 * time.Second
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 500 * time.Millisecond
	}
	if o.ReconnectMin <= 0 {
		o.ReconnectMin = 50 * time.Millisecond
	}
	if o.ReconnectMax < o.ReconnectMin {
		o.ReconnectMax = max(time.Second, o.ReconnectMin)
	}
	if o.MaxFrameSize <= 0 {
		o.MaxFrameSize = DefaultMaxFrameSize
	}
	if o.SendQueue <= 0 {
		o.SendQueue = 256
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
}

// Client sends requests to peers; it implements dledger.Transport. Every Send method returns
// without waiting for the network and calls done exactly once: synchronously when the call
// can not start (unknown peer, peer down, queue full, client closed), otherwise later from
// one of the client's two goroutines for that peer's connection (the reader, with the
// answer; the writer, on a timeout, a failed connection or Close). So done must be quick and
// must not block (it may call Send again, but not Close, which waits for those goroutines).
// The request is encoded before Send returns and is not kept; the response passed to done
// is the caller's.
type Client struct {
	opts      ClientOptions
	obs       *observer
	maxBody   int              // a frame body on the wire
	maxPlain  int              // a body we encode (sealed, it grows by secure.Overhead)
	hello     bool             // send a METADATA request as every connection's first frame
	peers     map[string]*peer // fixed at construction; read without locks
	ctx       context.Context  // cancelled by Close: stops dials, waits and connections
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	callPool  sync.Pool
}

// NewClient checks the options and starts connecting to every peer in the background. Calls
// to a peer fail with ErrPeerDown until its connection is up (see Connected).
func NewClient(opts ClientOptions) (*Client, error) {
	for id, addr := range opts.Peers {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("rpc: NewClient: peer %s: bad address %q: %w", id, addr, err)
		}
		if opts.Auth.secure() && (id == "" || len(id) > secure.MaxIDLen) {
			return nil, fmt.Errorf("rpc: NewClient: peer id %q must be 1 to %d bytes", id, secure.MaxIDLen)
		}
	}
	if err := opts.Auth.check(); err != nil {
		return nil, err
	}
	opts.setDefaults()
	cl := &Client{
		opts:  opts,
		obs:   newObserver(opts.Logger, opts.Hooks),
		hello: opts.Auth.Group != "" && opts.Auth.SelfID != "" || opts.Auth.Host != "",
		peers: make(map[string]*peer, len(opts.Peers)),
	}
	cl.maxBody, cl.maxPlain = bodyLimits(opts.MaxFrameSize, opts.Auth.secure())
	cl.callPool.New = func() any { return new(call) }
	cl.ctx, cl.cancel = context.WithCancel(context.Background())
	for id, addr := range opts.Peers {
		p := &peer{cl: cl, id: id, addr: addr,
			sendq: sendQueue{limit: opts.SendQueue, sig: make(chan struct{}, 1)}, pending: make(map[uint64]*call), kick: make(chan struct{}, 1),
			swap: make(chan struct{}, 1)}
		cl.peers[id] = p
		cl.wg.Add(1)
		go p.run()
	}
	return cl, nil
}

// Close fails every pending call with ErrClosed, closes the connections and waits for the
// client's goroutines. Later calls fail at once with ErrClosed.
func (cl *Client) Close() error {
	cl.closeOnce.Do(func() {
		for _, p := range cl.peers {
			p.mu.Lock()
			p.closed = true
			p.setUsable()
			p.mu.Unlock()
		}
		cl.cancel()
		cl.wg.Wait()
	})
	return nil
}

// Connected reports whether the connection to peer id is up.
func (cl *Client) Connected(id string) bool {
	p := cl.peers[id]
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.connected
}

// Stats returns running totals.
func (cl *Client) Stats() Stats { return cl.obs.stats() }

// Kick makes the client dial peer at once if it is waiting to redial it: the caller has just
// seen the peer connect to it, so the peer is up and a back-off (up to ReconnectMax) would only
// delay the first request to it (a new leader's first heartbeat to a member that started
// after it, say). Unknown peers are ignored. It never blocks.
func (cl *Client) Kick(peer string) {
	if p := cl.peers[peer]; p != nil {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// SendVote sends a VoteRequest to peer to.
func (cl *Client) SendVote(to string, req *protocol.VoteRequest, done func(*protocol.VoteResponse, error)) {
	send(cl, voteMethod, to, req, done)
}

// SendHeartBeat sends a HeartBeatRequest to peer to.
func (cl *Client) SendHeartBeat(to string, req *protocol.HeartBeatRequest, done func(*protocol.HeartBeatResponse, error)) {
	send(cl, heartBeatMethod, to, req, done)
}

// SendLeadershipTransfer sends a LeadershipTransferRequest to peer to. The transferee answers
// after its election, so this call waits up to TransferTimeout rather than CallTimeout.
func (cl *Client) SendLeadershipTransfer(to string, req *protocol.LeadershipTransferRequest, done func(*protocol.LeadershipTransferResponse, error)) {
	send(cl, transferMethod, to, req, done)
}

// SendMetadata asks peer to for its status (for tools; not part of dledger.Transport).
func (cl *Client) SendMetadata(to string, req *protocol.MetadataRequest, done func(*protocol.MetadataResponse, error)) {
	send(cl, metadataMethod, to, req, done)
}
