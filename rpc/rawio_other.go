//go:build !linux

package rpc

import (
	"io"
	"net"
)

// socketIO returns the connection as it is: the raw-syscall path is Linux only (rawio_linux.go).
func socketIO(c net.Conn) (io.Reader, io.Writer) { return c, c }

// unreadBytes is 0 off Linux: a connection whose reader is behind is judged by what it read.
func unreadBytes(net.Conn) int { return 0 }
