package daemon

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/rpc/secure"
	"github.com/dledger-go/dledger/server"
	"github.com/dledger-go/dledger/server/adminclient"
)

// The membership routes (issue 31; docs/protocol.md section 13):
//
//	GET  /v1/membership                the configuration as this member holds it (both listeners)
//	POST /v1/membership/add            {"id":"n3","addr":"host:port"}: add a non-voter
//	                                   (with "key":"BASE64", its public key: issue 32)
//	POST /v1/membership/promote        {"id":"n3"}: make it a voter once caught up
//	POST /v1/membership/remove         {"id":"n2"}: remove a member
//	POST /v1/membership/force-recover  {"survivors":["n0"]}: forced recovery
//
// A change goes to the leader. A member that does not lead refuses it (409, reason
// not-leader) with the leader's id and the admin address that leader advertises (learned
// over the members' authenticated rpc connections, as GET /v1/members does), and the client
// asks there: forwarding would make this member send the bearer token it was given to another
// address, and the answer of a change the leader made is the leader's to give.

// changeWait bounds how long a change's answer may take beyond the elector's own bound.
const changeWait = time.Second

// membershipReadRoute adds GET /v1/membership.
func (m *member) membershipReadRoute(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/membership", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, m.membershipJSON(time.Now()))
	})
}

// membershipWriteRoutes adds the changes, which need the admin token.
func (m *member) membershipWriteRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/membership/{op}", func(w http.ResponseWriter, r *http.Request) {
		if !m.authorized(w, r) {
			return
		}
		op := r.PathValue("op")
		var body adminclient.MembershipChangeJSON
		fields := map[string]any{}
		want := `{"id":"n3"}`
		switch op {
		case adminclient.OpAdd:
			fields["id"], fields["addr"], fields["key"], want = &body.ID, &body.Addr, &body.Key, `{"id":"n3","addr":"host:port"}`
		case adminclient.OpPromote, adminclient.OpRemove:
			fields["id"] = &body.ID
		case adminclient.OpForceRecover:
			fields["survivors"], want = &body.Survivors, `{"survivors":["n0"]}`
		default:
			writeJSON(w, http.StatusNotFound, errorJSON{Error: "no membership operation " + op + " (add, promote, remove, force-recover)"})
			return
		}
		if err := decodeBody(r, fields); err != nil {
			badBody(w, err, want)
			return
		}
		if bad := checkChange(op, body); bad != "" {
			writeJSON(w, http.StatusBadRequest, adminclient.MembershipErrorJSON{Error: bad, Reason: adminclient.ReasonBadRequest})
			return
		}
		m.change(w, r, op, body)
	})
}

// checkChange refuses a body that names nothing valid before the member is asked.
func checkChange(op string, b adminclient.MembershipChangeJSON) string {
	if op == adminclient.OpForceRecover {
		if len(b.Survivors) == 0 {
			return `"survivors" is required: the surviving voters, this member included`
		}
		for _, id := range b.Survivors {
			if err := memberstate.ValidateID(id); err != nil {
				return "survivors: " + err.Error()
			}
		}
		return ""
	}
	if err := memberstate.ValidateID(b.ID); err != nil {
		return `"id": ` + err.Error()
	}
	if op == adminclient.OpAdd {
		if _, err := memberstate.ParsePeers(b.ID + "-" + b.Addr); err != nil {
			return `"addr": ` + err.Error()
		}
		if b.Key != "" {
			if _, err := secure.ParsePublicKey(b.Key); err != nil {
				return `"key": ` + err.Error() + " (the line dledger keygen --member prints: ID KEY)"
			}
		}
	}
	return ""
}

// change asks the member for the change and writes its answer.
func (m *member) change(w http.ResponseWriter, r *http.Request, op string, b adminclient.MembershipChangeJSON) {
	bound := m.s.Config().Election.ChangeBound()
	if op == adminclient.OpForceRecover {
		bound = m.s.Config().Election.ForceBound()
	}
	ctx, cancel := context.WithTimeout(r.Context(), bound+changeWait)
	defer cancel()
	var err error
	switch op {
	case adminclient.OpAdd:
		if b.Key != "" {
			k, _ := secure.ParsePublicKey(b.Key) // checkChange parsed it
			_, err = m.s.AddNonVoterWithKey(ctx, b.ID, b.Addr, k)
		} else {
			_, err = m.s.AddNonVoter(ctx, b.ID, b.Addr)
		}
	case adminclient.OpPromote:
		_, err = m.s.Promote(ctx, b.ID)
	case adminclient.OpRemove:
		_, err = m.s.RemoveMember(ctx, b.ID)
	case adminclient.OpForceRecover:
		_, err = m.s.ForceConfiguration(ctx, b.Survivors)
	}
	if err == nil {
		m.logger().Info("membership change made through the admin API", zap.String("op", op), zap.String("id", b.ID),
			zap.Strings("survivors", b.Survivors), zap.String("remote", r.RemoteAddr))
		writeJSON(w, http.StatusOK, m.membershipJSON(time.Now()))
		return
	}
	code, out := m.changeError(r.Context(), err)
	writeJSON(w, code, out)
}

// changeReasons names each refusal in MembershipErrorJSON.Reason, with its HTTP status: 409
// refused in this state, 400 a change that can never be made as asked.
var changeReasons = []struct {
	err    error
	reason string
	status int
}{
	{dledger.ErrNotLeader, adminclient.ReasonNotLeader, http.StatusConflict},
	{server.ErrLeaderHandsOver, adminclient.ReasonLeaderHandsOver, http.StatusConflict},
	{server.ErrChangeInFlight, adminclient.ReasonChangeInProgress, http.StatusConflict},
	{server.ErrMemberExists, adminclient.ReasonMemberExists, http.StatusConflict},
	{dledger.ErrUnknownMember, adminclient.ReasonNotAMember, http.StatusConflict},
	{server.ErrAlreadyVoter, adminclient.ReasonAlreadyVoter, http.StatusConflict},
	{server.ErrNotCaughtUp, adminclient.ReasonNotCaughtUp, http.StatusConflict},
	{server.ErrLastVoter, adminclient.ReasonLastVoter, http.StatusConflict},
	{server.ErrNoConfigStore, adminclient.ReasonNoConfigStore, http.StatusConflict},
	{server.ErrRemoved, adminclient.ReasonRemoved, http.StatusConflict},
	{server.ErrJoining, adminclient.ReasonJoining, http.StatusConflict},
	{server.ErrOldQuorumAlive, adminclient.ReasonOldQuorumAlive, http.StatusConflict},
	{server.ErrInvalidChange, adminclient.ReasonBadRequest, http.StatusBadRequest},
	{server.ErrForceInvalid, adminclient.ReasonBadRequest, http.StatusBadRequest},
	{server.ErrStopped, adminclient.ReasonStopped, http.StatusServiceUnavailable},
	{server.ErrOutcomeUnknown, adminclient.ReasonOutcomeUnknown, http.StatusGatewayTimeout},
}

// changeError is a refused change's status and body; on not-leader and leader-hands-over it
// names the member to ask and, when that member advertised one, its admin address.
func (m *member) changeError(ctx context.Context, err error) (int, adminclient.MembershipErrorJSON) {
	out := adminclient.MembershipErrorJSON{Error: err.Error(), Reason: adminclient.ReasonRefused}
	code := http.StatusConflict
	for _, c := range changeReasons {
		if errors.Is(err, c.err) {
			out.Reason, code = c.reason, c.status
			break
		}
	}
	var me *server.MembershipError
	if errors.As(err, &me) {
		out.LeaderID, out.Term, out.Epoch = me.LeaderID, me.Term, int64(me.Config.Epoch)
	}
	if out.LeaderID != "" && (out.Reason == adminclient.ReasonNotLeader || out.Reason == adminclient.ReasonLeaderHandsOver) {
		out.LeaderAdmin = m.adminAddrOf(ctx, out.LeaderID)
	}
	return code, out
}

// adminAddrOf is the admin address member id advertises, asked over the rpc connections, or
// "" when it has not told within 2 x membersTimeout. A follower's own connection to its leader
// may be waiting out a redial back-off (the leader's heartbeats come on the leader's
// connection), so a request that finds it down is asked again until the time is up.
func (m *member) adminAddrOf(ctx context.Context, id string) string {
	ctx, cancel := context.WithTimeout(ctx, 2*membersTimeout)
	defer cancel()
	if !m.webState().probes.acquire(ctx) {
		return ""
	}
	defer m.webState().probes.release()
	for {
		for _, p := range m.members(ctx) {
			if p.ID == id && p.AdminAddr != "" {
				return p.AdminAddr
			}
		}
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(membersRetry):
		}
	}
}

// membersRetry is how long adminAddrOf waits before it asks again.
const membersRetry = 50 * time.Millisecond

// membershipJSON is GET /v1/membership: the configuration, with the leader's view of each
// member (alive, ledger, caught up) on the leader.
func (m *member) membershipJSON(now time.Time) adminclient.MembershipJSON {
	st := m.s.FullStatus()
	ms := st.Membership
	out := adminclient.MembershipJSON{Group: st.Group, SelfID: st.SelfID, Role: st.Role.String(), Term: st.Term,
		LeaderID: st.LeaderID, Epoch: int64(ms.Epoch), Members: []adminclient.MembershipMemberJSON{},
		Removed: ms.Removed}
	out.Source, out.Warning = m.s.ConfigurationSource()
	if ms.Pending != nil && st.Role == protocol.LEADER {
		out.Pending = pendingJSON(ms, *ms.Pending)
	}
	peers := map[string]dledger.PeerStatus{}
	for _, p := range st.Peers {
		peers[p.ID] = p
	}
	quorum, haveQuorum := quorumLedger(ms.Voters, peers)
	add := func(ps []memberstate.Peer, kind string) {
		for _, p := range ps {
			j := adminclient.MembershipMemberJSON{ID: p.ID, Addr: p.Addr, Kind: kind, Self: p.ID == st.SelfID}
			if ps, ok := peers[p.ID]; ok && st.Role == protocol.LEADER {
				alive, known := ps.Alive || j.Self, ps.LedgerSet || j.Self && st.LedgerKnown
				term, index, ack := ps.Ledger.Term, ps.Ledger.Index, msAgo(ps.LastAck, now)
				j.Alive, j.LedgerKnown, j.LedgerEndTerm, j.LedgerEndIndex, j.LastAckMsAgo = &alive, &known, &term, &index, &ack
				if haveQuorum {
					caught := known && !ledgerBefore(ps.Ledger, quorum)
					j.CaughtUp = &caught
				}
			}
			out.Members = append(out.Members, j)
		}
	}
	add(ms.Voters, adminclient.KindVoter)
	add(ms.NonVoters, adminclient.KindNonVoter)
	return out
}

// pendingJSON describes the change in flight: what the pending configuration changes in the
// committed one.
func pendingJSON(ms server.Membership, next dledger.Configuration) *adminclient.MembershipChangeJSON {
	out := &adminclient.MembershipChangeJSON{Epoch: int64(next.Epoch)}
	committed := dledger.Configuration{Voters: ms.Voters, NonVoters: ms.NonVoters}
	for _, p := range append(append([]memberstate.Peer{}, next.Voters...), next.NonVoters...) {
		switch {
		case !committed.IsMember(p.ID):
			out.Op, out.ID, out.Addr = adminclient.OpAdd, p.ID, p.Addr
		case next.IsVoter(p.ID) && !committed.IsVoter(p.ID):
			out.Op, out.ID = adminclient.OpPromote, p.ID
		}
	}
	for _, p := range append(append([]memberstate.Peer{}, ms.Voters...), ms.NonVoters...) {
		if !next.IsMember(p.ID) {
			out.Op, out.ID = adminclient.OpRemove, p.ID
		}
	}
	return out
}

// quorumLedger is the newest ledger end a quorum of voters has reached, as the leader knows
// their ledgers (the leader's own included): the majority-th newest. false when the leader
// does not know enough of them.
func quorumLedger(voters []memberstate.Peer, peers map[string]dledger.PeerStatus) (memberstate.LedgerEnd, bool) {
	var ends []memberstate.LedgerEnd
	for _, v := range voters {
		if p, ok := peers[v.ID]; ok && (p.LedgerSet || p.Self) {
			ends = append(ends, p.Ledger)
		}
	}
	need := len(voters)/2 + 1
	if len(ends) < need {
		return memberstate.LedgerEnd{}, false
	}
	sort.Slice(ends, func(i, j int) bool { return ledgerBefore(ends[j], ends[i]) }) // newest first
	return ends[need-1], true
}

// ledgerBefore: a's ledger is older than b's (the vote's comparison: term, then index).
func ledgerBefore(a, b memberstate.LedgerEnd) bool {
	return a.Term < b.Term || a.Term == b.Term && a.Index < b.Index
}

// peerKind is member p's kind in the configuration m: voter, non-voter, or "" for a member
// only a pending configuration or a join hint names.
func peerKind(m server.Membership, p dledger.PeerStatus) string {
	c := dledger.Configuration{Voters: m.Voters, NonVoters: m.NonVoters}
	switch {
	case c.IsVoter(p.ID):
		return adminclient.KindVoter
	case c.IsMember(p.ID):
		return adminclient.KindNonVoter
	}
	return ""
}
