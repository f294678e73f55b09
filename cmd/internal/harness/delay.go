package harness

import (
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DelayNet puts a one-way delay on the links between members, in user space, where the kernel
// has no netem (this machine's has none: "Specified qdisc kind is unknown"). Every ordered pair
// (i, j) gets a proxy on a loopback port of its own; member i is told (its own --peers) that j
// is at that port, and j listens (--listen) on its real address behind all of them. Bytes from
// i to j wait delay(i, j) + U(-jitter, +jitter), and bytes from j to i on the same connection
// delay(j, i) + jitter; within a connection nothing overtakes (a delivery time never moves
// earlier than the previous one's), as TCP over a jittery link behaves: a late segment holds
// back the ones behind it. Delays can change while the group runs (SetDelay), so a link can
// turn slow and fast again. Loopback only; the benchmark's status polls go to the members
// directly, undelayed.
type DelayNet struct {
	n      int
	listen []string          // member j's real rpc address (--listen)
	proxy  [][]string        // proxy[i][j]: where i reaches j
	delay  [][]atomic.Uint64 // delay[i][j]: base (low 32 bits, microseconds) and jitter (high 32)
	lns    []net.Listener

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	done  chan struct{}
}

// NewDelayNet makes the proxies for n members, every link without delay until SetDelay;
// Cluster.UseDelayNet starts the members behind them. Close ends it.
func NewDelayNet(n int) (*DelayNet, error) {
	ports, err := FreePorts(n + n*(n-1))
	if err != nil {
		return nil, err
	}
	d := &DelayNet{n: n, conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	for j := range n {
		d.listen = append(d.listen, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[j])))
	}
	next := n
	d.proxy = make([][]string, n)
	d.delay = make([][]atomic.Uint64, n)
	for i := range n {
		d.proxy[i] = make([]string, n)
		d.delay[i] = make([]atomic.Uint64, n)
		for j := range n {
			if i == j {
				continue
			}
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[next]))
			next++
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				d.Close()
				return nil, err
			}
			d.lns = append(d.lns, ln)
			d.proxy[i][j] = addr
			go d.accept(ln, i, j)
		}
	}
	return d, nil
}

// Listen is the address member j binds (--listen).
func (d *DelayNet) Listen(j int) string { return d.listen[j] }

// Peers is member i's --peers: itself at the address it binds (Listen), every other member j
// at the proxy of (i, j).
func (d *DelayNet) Peers(i int, ids []string) string {
	parts := make([]string, d.n)
	for j := range d.n {
		addr := d.proxy[i][j]
		if j == i {
			addr = d.listen[i]
		}
		parts[j] = ids[j] + "-" + addr
	}
	return strings.Join(parts, ";")
}

// SetDelay sets the one-way delay of the bytes from member i to member j: base + U(-jitter,
// +jitter), never below zero. It applies to bytes read from then on.
func (d *DelayNet) SetDelay(i, j int, base, jitter time.Duration) {
	d.delay[i][j].Store(uint64(base.Microseconds()) | uint64(jitter.Microseconds())<<32)
}

// SetAll sets every link's delay.
func (d *DelayNet) SetAll(base, jitter time.Duration) {
	for i := range d.n {
		for j := range d.n {
			if i != j {
				d.SetDelay(i, j, base, jitter)
			}
		}
	}
}

func (d *DelayNet) draw(i, j int) time.Duration {
	v := d.delay[i][j].Load()
	base, jit := time.Duration(v&0xffffffff)*time.Microsecond, time.Duration(v>>32)*time.Microsecond
	if jit > 0 {
		base += time.Duration(rand.Int64N(int64(2*jit))) - jit
	}
	return max(base, 0)
}

// Close stops the proxies and cuts every connection through them.
func (d *DelayNet) Close() {
	select {
	case <-d.done:
		return
	default:
	}
	close(d.done)
	for _, ln := range d.lns {
		ln.Close()
	}
	d.mu.Lock()
	for c := range d.conns {
		c.Close()
	}
	d.mu.Unlock()
}

func (d *DelayNet) track(c net.Conn) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.done:
		c.Close()
		return false
	default:
	}
	d.conns[c] = struct{}{}
	return true
}

func (d *DelayNet) untrack(c net.Conn) {
	d.mu.Lock()
	delete(d.conns, c)
	d.mu.Unlock()
	c.Close()
}

// accept serves the proxy of (i, j): each connection from i goes on to j's real address.
func (d *DelayNet) accept(ln net.Listener, i, j int) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		go d.serve(in, i, j)
	}
}

func (d *DelayNet) serve(in net.Conn, i, j int) {
	if !d.track(in) {
		return
	}
	defer d.untrack(in)
	out, err := net.DialTimeout("tcp", d.listen[j], time.Second)
	if err != nil {
		return // as a refused connect: i sees its connection closed
	}
	if !d.track(out) {
		return
	}
	defer d.untrack(out)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); d.pipe(in, out, i, j) }()
	go func() { defer wg.Done(); d.pipe(out, in, j, i) }()
	wg.Wait()
}

// chunk is what one read returned, and when it may be written on.
type chunk struct {
	b   []byte
	due time.Time
}

// pipe copies src to dst, each chunk delayed by draw(from, to), in order. Either side's end
// closes both.
func (d *DelayNet) pipe(src, dst net.Conn, from, to int) {
	q := make(chan chunk, 4096)
	go func() {
		defer close(q)
		var last time.Time
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				due := time.Now().Add(d.draw(from, to))
				if due.Before(last) {
					due = last
				}
				last = due
				select {
				case q <- chunk{b: buf[:n], due: due}:
				case <-d.done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		if w := time.Until(c.due); w > 0 {
			time.Sleep(w)
		}
		if _, err := dst.Write(c.b); err != nil {
			break
		}
	}
	src.Close()
	dst.Close()
}
