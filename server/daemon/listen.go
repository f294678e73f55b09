package daemon

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
)

// HTTP limits for the admin and metrics listeners. A client that trickles its request
// (slowloris) is cut off by the read timeouts, one that opens many connections by the
// connection bound, and none of it touches the elector or the rpc port.
const (
	httpMaxHeaderBytes = 8 << 10
	httpIdleTimeout    = 60 * time.Second
	// httpMaxConns bounds open connections per listener; the next ones wait in the kernel's
	// accept queue until one closes.
	httpMaxConns = 128
)

// Variables only so that the slowloris test need not wait seconds.
var (
	httpReadHeaderTimeout = 5 * time.Second
	httpReadTimeout       = 10 * time.Second
)

// httpEndpoint is one HTTP listener of the process (the admin API or the read-only metrics one).
type httpEndpoint struct {
	name string // "admin" or "metrics", for errors and logs
	addr string // configured address
	srv  *http.Server
	ln   net.Listener
	tls  *tls.Config // nil: plain HTTP
}

// newHTTPEndpoint hardens srv's limits; writeTimeout must cover the slowest handler (a
// transfer waits up to its bound for the answer).
func newHTTPEndpoint(name, addr string, h http.Handler, writeTimeout time.Duration, log *zap.Logger) *httpEndpoint {
	return &httpEndpoint{name: name, addr: addr, srv: &http.Server{
		Handler:           h,
		MaxHeaderBytes:    httpMaxHeaderBytes,
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       httpIdleTimeout,
		ErrorLog:          zap.NewStdLog(log.Named("http." + name)),
	}}
}

// listen opens the socket (Start reports a port in use before anything else runs).
func (e *httpEndpoint) listen() error {
	ln, err := net.Listen("tcp", e.addr)
	if err != nil {
		return fmt.Errorf("%s http listen %s: %w", e.name, e.addr, err)
	}
	e.ln = &limitListener{Listener: ln, slots: make(chan struct{}, httpMaxConns)}
	if e.tls != nil {
		// The handshake runs in the connection's own goroutine, bounded by the server's read
		// timeouts; a connection held in it holds its slot like any other.
		e.ln = tls.NewListener(e.ln, e.tls)
	}
	return nil
}

func (e *httpEndpoint) serve() { go e.srv.Serve(e.ln) }

func (e *httpEndpoint) close() {
	if e != nil && e.ln != nil {
		e.ln.Close()
	}
}

func (e *httpEndpoint) shutdown(ctx context.Context) error {
	if e == nil || e.ln == nil {
		return nil
	}
	err := e.srv.Shutdown(ctx)
	e.ln.Close() // listened but never served: Shutdown does not know it
	if err != nil {
		return fmt.Errorf("%s http: %w", e.name, err)
	}
	return nil
}

// boundAddr is the listening address after listen, or "".
func (e *httpEndpoint) boundAddr() string {
	if e == nil || e.ln == nil {
		return ""
	}
	return e.ln.Addr().String()
}

// limitListener admits at most cap(slots) connections at a time: Accept waits for a slot,
// and a connection gives its slot back when closed.
type limitListener struct {
	net.Listener
	slots chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

type limitConn struct {
	net.Conn
	release func()
	once    sync.Once
}

// Close gives the slot back, once however often it is called.
func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// isLoopback reports whether a listen address can only be reached from this host.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
