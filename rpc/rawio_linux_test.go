//go:build linux

package rpc

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection: the dialled one and the accepted one.
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
	return d.(*net.TCPConn), a.(*net.TCPConn)
}

// TestSocketIOReadsAndWrites: the raw socket carries bytes both ways, waits for data that has
// not arrived yet, writes more than the socket buffers hold (the would-block path), and
// reports the end of the stream as io.EOF, as net.Conn does.
func TestSocketIOReadsAndWrites(t *testing.T) {
	d, a := tcpPair(t)
	r, w := socketIO(d)
	if _, ok := r.(rawSocket); !ok {
		t.Fatalf("a TCP connection got %T, not the raw socket", r)
	}
	// A read that must wait: the bytes are sent only once the reader is (about to be) blocked.
	readDone := make(chan []byte)
	go func() {
		b := make([]byte, 5)
		n, err := io.ReadFull(r, b)
		if err != nil {
			t.Errorf("read: %v", err)
		}
		readDone <- b[:n]
	}()
	if _, err := a.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if got := <-readDone; string(got) != "hello" {
		t.Fatalf("read %q", got)
	}
	// 8 MiB is far more than loopback's socket buffers: the write must wait for the reader.
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<19)
	received := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(a)
		received <- b
	}()
	if n, err := w.Write(big); err != nil || n != len(big) {
		t.Fatalf("write: %d of %d bytes, %v", n, len(big), err)
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

// TestSocketIOErrors: a reset keeps its errno (the client tells a crashed peer by it), the
// connection's deadlines bound a read and a write that cannot go on, and closing the
// connection ends a read that is waiting.
func TestSocketIOErrors(t *testing.T) {
	d, a := tcpPair(t)
	r, _ := socketIO(d)
	a.SetLinger(0) // close with a reset
	a.Close()
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after a reset: %v, want ECONNRESET", err)
	}

	d, _ = tcpPair(t) // the peer never reads nor writes
	r, w := socketIO(d)
	d.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %v", err)
	}
	big := make([]byte, 64<<20) // more than the socket buffers of both ends hold
	d.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := w.Write(big); !errors.Is(err, os.ErrDeadlineExceeded) || n == 0 || n == len(big) {
		t.Fatalf("write past its deadline: %d of %d bytes, %v", n, len(big), err)
	}

	d, _ = tcpPair(t)
	r, _ = socketIO(d)
	d.SetReadDeadline(time.Time{})
	readErr := make(chan error)
	go func() {
		_, err := r.Read(make([]byte, 1))
		readErr <- err
	}()
	d.Close()
	if err := <-readErr; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read ended by Close: %v, want net.ErrClosed", err)
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
