package rpc

import (
	"net"
	"time"
)

// Socket options for every rpc connection, dialled (Client) or accepted (Server). A peer can
// vanish without closing (power loss, a partition that drops packets); these make the kernel
// give up on it in seconds rather than after TCP's default of about 15 minutes for data in
// flight or never for an idle connection.
const (
	// tcpKeepAlive is the idle time before the first probe and the time between probes;
	// tcpKeepAliveCount probes go unanswered before the kernel drops an idle connection
	// (within tcpUserTimeout on Linux, see below). Members exchange heartbeats every few
	// hundred milliseconds, so probes are sent only on connections nobody uses (a
	// follower's outbound ones), one packet every 5 s.
	tcpKeepAlive      = 5 * time.Second
	tcpKeepAliveCount = 3
	// tcpUserTimeout (TCP_USER_TIMEOUT, Linux) bounds how long sent data may stay
	// unacknowledged, and an unanswered keep-alive too, before the kernel drops the
	// connection: 10 s, far above any round trip a member can work with (the heartbeat
	// interval is 200 ms), and far below the default of about 15 minutes. A dead idle
	// connection is found 5 s (first probe) to 10 s after its last packet.
	tcpUserTimeout = 10 * time.Second
)

// keepAliveConfig is the dialler's keep-alive setting.
var keepAliveConfig = net.KeepAliveConfig{Enable: true, Idle: tcpKeepAlive,
	Interval: tcpKeepAlive, Count: tcpKeepAliveCount}
