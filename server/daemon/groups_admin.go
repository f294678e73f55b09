package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/dledger-go/dledger/server"
	"github.com/dledger-go/dledger/server/adminclient"
)

// Members added and removed at run time (DLedger's addDLedgerServer and removeDLedgerServer):
//
//	PUT    /v1/groups/{group}/{id}  {"group":G,"selfId":ID,"peers":"n0-host:port;...","preferredLeaderIds":"n1"}
//	DELETE /v1/groups/{group}/{id}
//
// The body is a configs: entry of the host's file as JSON (group and selfId may be left out:
// the path names them), checked by the same rules (server.ParseHostMembers; peers that differ
// from those of a member of its group already on the host, by server.Host.AddGroup). Nothing is
// written but the new member's data dir: a member added at run time that should come back
// after a restart must also be added to the host's config file. Both need the admin token.

// SetHost lets the admin API add members to h and remove them: an added member's config and
// options are what config makes of its entry (the process's shared settings with the entry's
// group, id, peers and preferred leaders, and the options every member of the process gets;
// config also refuses an entry the process cannot serve, e.g. one whose own address is not
// the host's). Without a host those routes answer 501.
func (d *Daemon) SetHost(h Host, config EntryConfig) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.host, d.entryConfig = h, config
}

// EntryConfig makes a configs: entry a member's Config and options (SetHost).
type EntryConfig func(server.HostMember) (server.Config, []server.Option, error)

// hostFor returns the host and entry config, or answers 501.
func (d *Daemon) hostFor(w http.ResponseWriter) (Host, EntryConfig, bool) {
	d.mu.Lock()
	h, c := d.host, d.entryConfig
	d.mu.Unlock()
	if h == nil {
		writeJSON(w, http.StatusNotImplemented, errorJSON{Error: "this process adds and removes no members (it serves no host)"})
		return nil, nil, false
	}
	return h, c, true
}

// addMember serves PUT /v1/groups/{group}/{id}: the member is built, started and served, or
// nothing changes.
func (d *Daemon) addMember(w http.ResponseWriter, r *http.Request) {
	if !d.authorized(w, r) {
		return
	}
	h, config, ok := d.hostFor(w)
	if !ok {
		return
	}
	group, id := r.PathValue("group"), r.PathValue("id")
	entry, err := readEntry(r, group, id)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			badBody(w, err, `a configs: entry {"peers":"n0-host:port;...","preferredLeaderIds":"n1"}`)
			return
		}
		badRequest(w, "%v", err)
		return
	}
	if h.Member(group, id) != nil {
		writeJSON(w, http.StatusConflict, errorJSON{Error: fmt.Sprintf("member %s of group %s is already on this host", id, group)})
		return
	}
	cfg, opts, err := config(entry)
	if err != nil {
		badRequest(w, "%v", err)
		return
	}
	s, err := h.AddGroup(cfg, opts...)
	if err != nil {
		if h.Member(group, id) != nil { // added meanwhile by another request
			writeJSON(w, http.StatusConflict, errorJSON{Error: err.Error()})
			return
		}
		writeJSON(w, http.StatusUnprocessableEntity, errorJSON{Error: err.Error()})
		return
	}
	if err := s.Start(); err != nil { // a failed Start released the member (Server.Start)
		writeJSON(w, http.StatusInternalServerError, errorJSON{Error: "start: " + err.Error()})
		return
	}
	d.log.Info("member added", zapGroup(group, id)...)
	st := s.Status()
	writeJSON(w, http.StatusCreated, adminclient.GroupJSON{Group: group, SelfID: id, Role: st.Role.String(), Term: st.Term, LeaderID: st.LeaderID})
}

// removeMember serves DELETE /v1/groups/{group}/{id}: the member stops as at a process's stop
// (a leader hands over first) and leaves the host; the other members go on.
func (d *Daemon) removeMember(w http.ResponseWriter, r *http.Request) {
	if !d.authorized(w, r) {
		return
	}
	h, _, ok := d.hostFor(w)
	if !ok {
		return
	}
	group, id := r.PathValue("group"), r.PathValue("id")
	s := h.Member(group, id)
	if s == nil {
		writeJSON(w, http.StatusNotFound, errorJSON{Error: fmt.Sprintf("no member %s of group %s on this host", id, group)})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.StopTimeout())
	defer cancel()
	if err := h.RemoveGroup(ctx, group, id); err != nil {
		writeJSON(w, http.StatusInternalServerError, errorJSON{Error: err.Error()})
		return
	}
	d.log.Info("member removed", zapGroup(group, id)...)
	st := s.Status()
	writeJSON(w, http.StatusOK, adminclient.GroupJSON{Group: group, SelfID: id, Role: st.Role.String(), Term: st.Term, LeaderID: st.LeaderID})
}

// readEntry reads a PUT's body, a configs: entry as JSON, and checks it as the host's file
// would be (server.ParseHostMembers: JSON is YAML). Group and selfId, if given, must be the
// path's.
func readEntry(r *http.Request, group, id string) (server.HostMember, error) {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	if err != nil {
		return server.HostMember{}, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || raw == nil {
		return server.HostMember{}, fmt.Errorf("bad JSON: want a configs: entry as an object (%v)", err)
	}
	for _, k := range []struct{ key, want string }{{"group", group}, {"selfId", id}} {
		v, ok := raw[k.key]
		if !ok {
			raw[k.key], _ = json.Marshal(k.want)
			continue
		}
		var got string
		if json.Unmarshal(v, &got) != nil || got != k.want {
			return server.HostMember{}, fmt.Errorf("%s %s: the path names %q", k.key, v, k.want)
		}
	}
	body, _ := json.Marshal(map[string]any{"configs": []any{raw}})
	ms, err := server.ParseHostMembers(strings.NewReader(string(body)), "request body")
	if err != nil {
		return server.HostMember{}, err
	}
	return ms[0], nil
}

// drain serves POST /v1/drain: the host's Drain, bounded by the write timeout.
func (d *Daemon) drain(w http.ResponseWriter, r *http.Request) {
	if !d.authorized(w, r) {
		return
	}
	h, _, ok := d.hostFor(w)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), d.cfg.WriteTimeout-time.Second)
	defer cancel()
	if err := h.Drain(ctx); err != nil {
		writeJSON(w, http.StatusInternalServerError, errorJSON{Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"drained": true})
}

// undrain serves POST /v1/undrain: a drained host takes leadership again (its peers' balancers
// hand it its share back).
func (d *Daemon) undrain(w http.ResponseWriter, r *http.Request) {
	if !d.authorized(w, r) {
		return
	}
	h, _, ok := d.hostFor(w)
	if !ok {
		return
	}
	h.Undrain()
	writeJSON(w, http.StatusOK, map[string]bool{"drained": false})
}
