package main

import (
	"net"
	"time"
)

// sdNotify tells the service manager about the server's state, as systemd's sd_notify(3) does
// for a Type=notify unit: one datagram to the unix socket systemd names in NOTIFY_SOCKET (a
// path, or an abstract socket when it starts with '@', which package net understands). It does
// nothing when socket is "" (not run by systemd, or not Type=notify).
func sdNotify(socket, state string) error {
	if socket == "" {
		return nil
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: socket, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer conn.Close()
	// A datagram to a live socket is delivered or refused at once; the deadline only guards
	// against a full receive queue of a manager that stopped reading.
	conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, err = conn.Write([]byte(state))
	return err
}
