package protocol

// Host heartbeats (docs/protocol.md 4.1, "Host links"; section 12): a host of many groups
// sends each peer host one frame per interval on their host link, carrying its liveness
// table's changes (package dledger/liveness), whatever the number of groups. The header
// names no group: LocalID is the sending host's id and RemoteID the receiving host's (host
// ids are rpc addresses as the peers strings name them); Term and LeaderID are unused.

// RequestHostHeartBeat is a host heartbeat's request code. Ours, not DLedger's: a member
// without host links answers it UNSUPPORTED.
const RequestHostHeartBeat RequestCode = 59001

// MaxHostChanges bounds the change list of one host heartbeat or its answer: a longer list is
// a bad frame (out_of_range). A sender with more changes waiting splits them over several
// frames of the same Seq.
const MaxHostChanges = 1024

// HostChange is one change of a member of the sending host: its epoch after the change.
type HostChange struct {
	Group  string `msgpack:"g"`
	Member string `msgpack:"m"`
	Epoch  uint64 `msgpack:"e"`
}

// HostHeartBeatRequest is a liveness frame (liveness.Frame) from host LocalID to host
// RemoteID.
type HostHeartBeatRequest struct {
	Header      `msgpack:",inline"`
	Incarnation uint64       `msgpack:"inc"`
	Seq         uint64       `msgpack:"seq"`
	Changes     []HostChange `msgpack:"changes"`
	// Upto (issue 29, liveness.Frame.Upto): every change of the sender for the receiver up to
	// this epoch is in this frame or was acknowledged. 0 from a version before it.
	Upto uint64 `msgpack:"upto,omitempty"`
	// Sent and From (liveness.Frame.Sent, From): every change of the sender for the receiver
	// up to Sent is in one of its frames numbered From to Seq, or was acknowledged. 0 from a
	// version before them.
	Sent uint64 `msgpack:"sent,omitempty"`
	From uint64 `msgpack:"from,omitempty"`
}

// HostHeartBeatResponse is the answer (liveness.Ack): Code SUCCESS, the answering host's
// incarnation, the frame's Seq, and either Upto (the answering host's last epoch, for a frame
// with Upto) or, to a frame without it, the answering host's own changes not yet acknowledged.
// UNSUPPORTED from a member without host links; UNKNOWN_GROUP-style refusals do not apply.
type HostHeartBeatResponse struct {
	Header      `msgpack:",inline"`
	Incarnation uint64       `msgpack:"inc"`
	Seq         uint64       `msgpack:"seq"`
	Changes     []HostChange `msgpack:"changes"`
	// Upto (issue 29, liveness.Ack.Upto): the answering host's last epoch; 0 from a version
	// before it, or to a frame without Upto.
	Upto uint64 `msgpack:"upto,omitempty"`
}
