//go:build linux

package rpc

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection, the dialled one and the accepted one,
// with small socket buffers, so that a write of a few hundred KiB must wait for the reader.
func tcpPair(t *testing.T) (dialled, accepted *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		got <- c
	}()
	d, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { d.Close(); a.Close() })
	for _, c := range []*net.TCPConn{d.(*net.TCPConn), a.(*net.TCPConn)} {
		c.SetWriteBuffer(16 << 10)
		c.SetReadBuffer(16 << 10)
	}
	return d.(*net.TCPConn), a.(*net.TCPConn)
}

// awaitRawWait returns once some goroutine waits in the poller inside rawSocket's op ("Read"
// or "Write"): the call found nothing to do and went to wait, which is the path under test.
func awaitRawWait(t *testing.T, op string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "runtime_pollWait") && strings.Contains(g, "rpc.(*rawSocket)."+op) {
				return
			}
		}
		runtime.Gosched()
	}
	t.Fatalf("no rawSocket.%s waited in the poller within 10 s", op)
}

// TestSocketIOReadsAndWrites: the raw socket carries bytes both ways, a read waits for data
// that has not arrived yet, a write larger than the socket buffers waits for the reader, a
// zero-length call does nothing, and the end of the stream is io.EOF, as net.Conn reports it.
func TestSocketIOReadsAndWrites(t *testing.T) {
	d, a := tcpPair(t)
	r, w := socketIO(d)
	if _, ok := r.(*rawSocket); !ok {
		t.Fatalf("a TCP connection got %T, not the raw socket", r)
	}
	if n, err := r.Read(nil); n != 0 || err != nil {
		t.Fatalf("zero-length read: %d, %v", n, err)
	}
	if n, err := w.Write(nil); n != 0 || err != nil {
		t.Fatalf("zero-length write: %d, %v", n, err)
	}
	readDone := make(chan []byte)
	go func() {
		b := make([]byte, 5)
		n, err := io.ReadFull(r, b)
		if err != nil {
			t.Errorf("read: %v", err)
		}
		readDone <- b[:n]
	}()
	awaitRawWait(t, "Read")
	if _, err := a.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if got := <-readDone; string(got) != "hello" {
		t.Fatalf("read %q", got)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<15) // 512 KiB
	writeDone := make(chan error)
	go func() {
		n, err := w.Write(big)
		if err == nil && n != len(big) {
			err = io.ErrShortWrite
		}
		writeDone <- err
	}()
	awaitRawWait(t, "Write") // the buffers are full and nobody reads yet
	received := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(a)
		received <- b
	}()
	if err := <-writeDone; err != nil {
		t.Fatalf("write: %v", err)
	}
	d.CloseWrite()
	if got := <-received; !bytes.Equal(got, big) {
		t.Fatalf("the peer received %d bytes, not the %d written", len(got), len(big))
	}
	a.Close()
	if n, err := r.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("read after the peer closed: %d, %v; want io.EOF", n, err)
	}
}

// TestSocketIOErrors: a reset keeps its errno on a read and on a write (the client tells a
// crashed peer by it; the write does not kill the process with SIGPIPE), and the connection's
// deadlines bound a read and a write that cannot go on.
func TestSocketIOErrors(t *testing.T) {
	d, a := tcpPair(t)
	r, w := socketIO(d)
	a.SetLinger(0) // close with a reset
	a.Close()
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after a reset: %v, want ECONNRESET", err)
	}
	var err error
	for i := 0; i < 100 && err == nil; i++ { // the first write after a reset may still be taken
		_, err = w.Write([]byte("x"))
	}
	if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("write after a reset: %v, want EPIPE or ECONNRESET", err)
	}
	if !strings.Contains(err.Error(), "write tcp "+d.LocalAddr().String()) {
		t.Fatalf("write error %q does not name the connection", err)
	}

	d, _ = tcpPair(t) // the peer never reads nor writes
	r, w = socketIO(d)
	d.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %v", err)
	}
	big := make([]byte, 1<<20) // more than the small buffers of both ends hold
	d.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := w.Write(big); !errors.Is(err, os.ErrDeadlineExceeded) || n >= len(big) {
		t.Fatalf("write past its deadline: %d of %d bytes, %v", n, len(big), err)
	}
}

// TestSocketIOCloseEndsWaits: closing the connection ends a read and a write that wait in the
// poller, with net.ErrClosed, as it ends those of a net.Conn.
func TestSocketIOCloseEndsWaits(t *testing.T) {
	for _, op := range []string{"Read", "Write"} {
		t.Run(op, func(t *testing.T) {
			d, _ := tcpPair(t) // the peer never reads nor writes
			r, w := socketIO(d)
			done := make(chan error)
			go func() {
				var err error
				if op == "Read" {
					_, err = r.Read(make([]byte, 1))
				} else {
					_, err = w.Write(make([]byte, 1<<20))
				}
				done <- err
			}()
			awaitRawWait(t, op)
			d.Close()
			if err := <-done; !errors.Is(err, net.ErrClosed) {
				t.Fatalf("%s ended by Close: %v, want net.ErrClosed", op, err)
			}
		})
	}
}

// TestSocketIOOtherConnsUnchanged: a connection that is not TCP is used as it is.
func TestSocketIOOtherConnsUnchanged(t *testing.T) {
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	if r, w := socketIO(c1); r != c1 || w != c1 {
		t.Fatalf("a pipe got %T and %T", r, w)
	}
}

// TestSocketIOAllocatesNothing: a read and a write of the raw socket allocate nothing: each
// direction's RawConn callback is made once per connection (issue 29, halloc: a closure per
// call was thousands of a host's allocations in a crash's elections).
func TestSocketIOAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("under the race detector the socket uses syscall.Read and Write, which allocate (rawsys_linux_race.go)")
	}
	d, a := tcpPair(t)
	r, w := socketIO(d)
	ar, aw := socketIO(a)
	msg, got := []byte("heartbeat"), make([]byte, 64)
	if a := testing.AllocsPerRun(100, func() {
		if _, err := w.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(ar, got[:len(msg)]); err != nil {
			t.Fatal(err)
		}
		if _, err := aw.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(r, got[:len(msg)]); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("a write and a read each way made %v allocations", a)
	}
}
