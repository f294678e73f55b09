package adminclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
)

// A group's configuration and its changes while it runs (issue 31; docs/protocol.md section
// 13): the member's GET /v1/membership, and the leader's POST /v1/membership/add, /promote and
// /remove, which `dledger members list|add|promote|remove` call. The names follow etcd's
// clientv3 (MemberList, MemberAdd, MemberPromote, MemberRemove); AddMember and RemoveMember
// (groups.go) are another thing: a host's own members of many groups.

// Kinds of a member in MembershipMemberJSON.Kind.
const (
	KindVoter    = "voter"     // counted in every quorum; may campaign and lead
	KindNonVoter = "non-voter" // follows the leader, counted in no quorum, never campaigns
)

// MembershipJSON is the body of GET /v1/membership and the answer of a change: the group's
// configuration as this member holds it (durably).
type MembershipJSON struct {
	Group    string `json:"group"`
	SelfID   string `json:"selfId"`
	Role     string `json:"role"`
	Term     int64  `json:"term"`
	LeaderID string `json:"leaderId"`
	// Epoch numbers the configuration: every change agreed by a quorum makes it one higher.
	Epoch   int64                  `json:"epoch"`
	Members []MembershipMemberJSON `json:"members"`
	// Pending is the change the leader is making, if any (on the leader; absent elsewhere and
	// when none is in flight). At most one change is in flight at a time.
	Pending *MembershipChangeJSON `json:"pending,omitempty"`
	// Source says where this member's configuration came from when it started: "durable" (its
	// data dir: a configuration it was told of, which wins over --peers), "initial" (--peers),
	// or "join" (--join: it waits to learn the configuration from the leader).
	Source string `json:"source,omitempty"`
	// Warning is a disagreement the member started with, such as a --peers that contradicts
	// its newer durable configuration (the durable one is in force).
	Warning string `json:"warning,omitempty"`
	// Removed: this member is not in the configuration it holds (it was removed): it does not
	// campaign or vote.
	Removed bool `json:"removed,omitempty"`
}

// MembershipMemberJSON is one member of the configuration. The ledger and liveness fields are
// the leader's view (absent on any other member): whether a non-voter has caught up is what
// decides whether it may be promoted.
type MembershipMemberJSON struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
	Kind string `json:"kind"` // KindVoter or KindNonVoter
	Self bool   `json:"self"`
	// On the leader only:
	Alive          *bool  `json:"alive,omitempty"`
	LedgerKnown    *bool  `json:"ledgerKnown,omitempty"`
	LedgerEndTerm  *int64 `json:"ledgerEndTerm,omitempty"`
	LedgerEndIndex *int64 `json:"ledgerEndIndex,omitempty"`
	LastAckMsAgo   *int64 `json:"lastAckMsAgo,omitempty"` // -1: never
	// CaughtUp: the member's ledger is at least the quorum's (a non-voter may be promoted).
	CaughtUp *bool `json:"caughtUp,omitempty"`
}

// MembershipChangeJSON is one change: the body of POST /v1/membership/{op} (Op from the path)
// and Pending of MembershipJSON.
type MembershipChangeJSON struct {
	Op   string `json:"op,omitempty"` // add, promote or remove
	ID   string `json:"id"`
	Addr string `json:"addr,omitempty"` // add only
	// Key, add only: the new member's public key (base64), for a group that authenticates with
	// member keys: the configuration carries it, so every member trusts it (issue 32).
	Key string `json:"key,omitempty"`
	// Epoch, in Pending: the epoch the change will have once agreed.
	Epoch int64 `json:"epoch,omitempty"`
	// Survivors: force-recover only, the surviving voters (the member asked included).
	Survivors []string `json:"survivors,omitempty"`
}

// Operations of POST /v1/membership/{op}.
const (
	OpAdd     = "add"
	OpPromote = "promote"
	OpRemove  = "remove"
	// OpForceRecover is forced recovery (POST /v1/membership/force-recover {"survivors":[...]}):
	// the survivors become the configuration, refused if any other voter answers.
	OpForceRecover = "force-recover"
)

// MembershipErrorJSON is a refused change's body: Error in words, Reason for programs (one of
// the Reason* below), and on not-leader the leader as this member knows it, with its admin
// address when it advertised one, so a client can ask it there.
type MembershipErrorJSON struct {
	Error       string `json:"error"`
	Reason      string `json:"reason"`
	LeaderID    string `json:"leaderId,omitempty"`
	LeaderAdmin string `json:"leaderAdmin,omitempty"`
	Term        int64  `json:"term,omitempty"`
	Epoch       int64  `json:"epoch,omitempty"`
}

// MembershipErrorJSON.Reason values, one per server.MembershipError reason.
const (
	ReasonMemberExists     = "member-exists"      // add: the id (or its address) is already a member
	ReasonNotAMember       = "not-a-member"       // promote, remove: no such member
	ReasonAlreadyVoter     = "already-voter"      // promote: it votes already
	ReasonLastVoter        = "last-voter"         // remove: a group needs a voter
	ReasonChangeInProgress = "change-in-progress" // another change is in flight
	ReasonNotCaughtUp      = "not-caught-up"      // promote: its ledger is behind the quorum's, or unknown
	ReasonNoQuorum         = "no-quorum"          // the old configuration's quorum did not agree in time
	ReasonBadRequest       = "bad-request"        // an id or address that is not valid
	// ReasonLeaderHandsOver: remove of the leader itself: it hands over first; LeaderID and
	// LeaderAdmin name its successor, which makes the change.
	ReasonLeaderHandsOver = "leader-hands-over"
	ReasonNoConfigStore   = "no-config-store" // the member's store cannot keep a configuration
	ReasonRemoved         = "removed"         // the member asked was removed from the group
	ReasonJoining         = "joining"         // the member asked is joining and knows no configuration yet
	// ReasonOldQuorumAlive: forced recovery refused, a voter outside the survivors answered.
	ReasonOldQuorumAlive = "old-quorum-alive"
	// ReasonNotLeader: asked a member that does not lead; LeaderID and LeaderAdmin say where.
	// (ReasonNotLeader, ReasonOutcomeUnknown and ReasonStopped are the transfer's names too.)
)

// MembershipError is a change that did not happen, or whose outcome is unknown: the member's
// answer (Result) when there was one, else the transport's error or an *HTTPError.
type MembershipError struct {
	// Kind is ErrRefused (nothing changed), ErrNotSent or ErrOutcomeUnknown (no answer in
	// time: the change may still be agreed; read GET /v1/membership later).
	Kind   error
	Status int
	Result MembershipErrorJSON
	Err    error
}

func (e *MembershipError) Error() string {
	switch {
	case e.Result.Error != "":
		return e.Result.Error
	case e.Err != nil:
		return e.Err.Error()
	}
	return e.Kind.Error()
}

// Unwrap is the kind and the cause.
func (e *MembershipError) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

// MemberList is GET /v1/membership: the configuration as the member holds it (ask the leader
// for who has caught up).
func (c *Client) MemberList(ctx context.Context) (MembershipJSON, error) {
	var m MembershipJSON
	err := c.get(ctx, "/v1/membership", &m)
	return m, err
}

// MemberAdd asks the leader to add member id at rpc address addr as a non-voter.
func (c *Client) MemberAdd(ctx context.Context, id, addr string) (MembershipJSON, error) {
	return c.change(ctx, OpAdd, MembershipChangeJSON{ID: id, Addr: addr})
}

// MemberAddWithKey is MemberAdd with the new member's public key (base64), for a group that
// authenticates with member keys: every member trusts it once it stores the change.
func (c *Client) MemberAddWithKey(ctx context.Context, id, addr, key string) (MembershipJSON, error) {
	return c.change(ctx, OpAdd, MembershipChangeJSON{ID: id, Addr: addr, Key: key})
}

// MemberPromote asks the leader to make non-voter id a voter (once its ledger has caught up).
func (c *Client) MemberPromote(ctx context.Context, id string) (MembershipJSON, error) {
	return c.change(ctx, OpPromote, MembershipChangeJSON{ID: id})
}

// MemberRemove asks the leader to remove member id (a leader removing itself hands over
// first).
func (c *Client) MemberRemove(ctx context.Context, id string) (MembershipJSON, error) {
	return c.change(ctx, OpRemove, MembershipChangeJSON{ID: id})
}

// ForceRecover is forced recovery on the member asked: survivors (it included) become the
// group's voters, when a quorum is lost for good. The member refuses (ReasonOldQuorumAlive) if
// a voter outside survivors answers it.
func (c *Client) ForceRecover(ctx context.Context, survivors []string) (MembershipJSON, error) {
	return c.change(ctx, OpForceRecover, MembershipChangeJSON{Survivors: survivors})
}

// change is POST /v1/membership/{op}: nil error only when the change is agreed and in force;
// otherwise a *MembershipError.
func (c *Client) change(ctx context.Context, op string, body MembershipChangeJSON) (MembershipJSON, error) {
	status, raw, err := c.send(ctx, http.MethodPost, "/v1/membership/"+op, body)
	if err != nil {
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
			return MembershipJSON{}, &MembershipError{Kind: ErrOutcomeUnknown, Err: err}
		}
		if errors.Is(err, ErrBadAddress) || status == 0 {
			return MembershipJSON{}, &MembershipError{Kind: ErrNotSent, Err: err}
		}
		return MembershipJSON{}, &MembershipError{Kind: ErrRefused, Status: status, Err: err}
	}
	if status == http.StatusOK {
		var m MembershipJSON
		if err := json.Unmarshal(raw, &m); err != nil {
			return m, &MembershipError{Kind: ErrOutcomeUnknown, Status: status, Err: fmt.Errorf("bad answer: %v", err)}
		}
		return m, nil
	}
	var res MembershipErrorJSON
	if json.Unmarshal(raw, &res) != nil || res.Reason == "" {
		return MembershipJSON{}, &MembershipError{Kind: ErrRefused, Status: status, Err: httpError(status, raw)}
	}
	kind := ErrRefused
	if res.Reason == ReasonOutcomeUnknown || status == http.StatusGatewayTimeout {
		kind = ErrOutcomeUnknown
	}
	return MembershipJSON{}, &MembershipError{Kind: kind, Status: status, Result: res}
}
