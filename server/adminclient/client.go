// Package adminclient is the client of a dledger member's HTTP admin API (and of its read-only
// listener, which serves the same reads): status, members, leadership transfer, ledger reports,
// the watch stream and the long poll, with the JSON bodies both sides share. `dledger status`,
// `dledger transfer`, `dledger watch` and the test harness read the API through it; it imports
// nothing of the member, so a tool can use it without linking the elector.
package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// maxBody bounds an answer's body: a status of a large group is a few kilobytes.
const maxBody = 1 << 20

// Client asks one member. The zero HTTP uses http.DefaultClient; its Timeout (or the
// context's deadline) bounds each call.
type Client struct {
	// Addr is the member's address: host:port, or a URL (http://host:port, https://...). A
	// host:port is asked over HTTPS when HTTP's transport has a TLS config (HTTPClient), else
	// over plain HTTP.
	Addr string
	// HTTP sends the requests; nil means http.DefaultClient.
	HTTP *http.Client
	// Token is the admin bearer token (the member's --admin-token-file), sent on the calls
	// that change the election (Transfer, ReportLedger, AddMember, RemoveMember); "" sends none.
	Token string
	// Group and SelfID, if Group is set, name one member of a process that serves many (a
	// host of groups): the member's calls go to its routes under /v1/groups/{group}/{id}/
	// (groups.go). Empty: the process's one member, at the single-member routes.
	Group, SelfID string
}

// New is a client of the member at addr.
func New(addr string) *Client { return &Client{Addr: addr} }

// URL is path on the member (under its /v1/groups/{group}/{id}/ when Group is set).
func (c *Client) URL(path string) string {
	path = c.memberPath(path)
	if strings.HasPrefix(c.Addr, "http://") || strings.HasPrefix(c.Addr, "https://") {
		return strings.TrimSuffix(c.Addr, "/") + path
	}
	if c.usesTLS() {
		return "https://" + c.Addr + path
	}
	return "http://" + c.Addr + path
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// HTTPError is an answer other than the one asked for: its status, and the member's message
// (the "error" of its JSON body, else the body as text).
type HTTPError struct {
	Status  int
	Message string
}

func (e *HTTPError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("HTTP %d", e.Status)
	}
	return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message)
}

// httpError reads a refused answer's message. The member's JSON encoder does not escape "<",
// but a proxy's might: the message is decoded, not shown as JSON.
func httpError(status int, raw []byte) *HTTPError {
	msg := strings.TrimSpace(string(raw))
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	if status == http.StatusBadRequest && strings.Contains(msg, plainToHTTPS) {
		msg += " (the member serves HTTPS: ask it at https://host:port, with --cacert FILE naming the CA of its certificate)"
	}
	return &HTTPError{Status: status, Message: msg}
}

// ErrNoMembersRoute: the member has no GET /v1/members (it is older than this client).
var ErrNoMembersRoute = errors.New("no /v1/members (a member older than this tool: list every address)")

// ErrBadAddress: Client.Addr does not make a URL (no request was sent).
var ErrBadAddress = errors.New("bad member address")

func (c *Client) newRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.URL(path), body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadAddress, err)
	}
	return req, nil
}

// get decodes the JSON answer of GET path into v; an answer other than 200 is an *HTTPError.
func (c *Client) get(ctx context.Context, path string, v any) error {
	req, err := c.newRequest(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return httpError(resp.StatusCode, raw)
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(v)
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody)) // drain, so the connection is reused
	if err != nil {
		return fmt.Errorf("bad %s JSON: %v", path, err)
	}
	return nil
}

// Status is the member's GET /v1/status.
func (c *Client) Status(ctx context.Context) (StatusJSON, error) {
	var st StatusJSON
	err := c.get(ctx, "/v1/status", &st)
	return st, err
}

// Members is the group as the member sees it (GET /v1/members), in the peers string's order;
// ErrNoMembersRoute from a member without the route.
func (c *Client) Members(ctx context.Context) ([]MemberJSON, error) {
	var ms []MemberJSON
	err := c.get(ctx, "/v1/members", &ms)
	if he := (*HTTPError)(nil); errors.As(err, &he) && he.Status == http.StatusNotFound {
		return nil, ErrNoMembersRoute
	}
	return ms, err
}

// WaitLeader is the long poll GET /v1/leader?wait=WAIT&index=INDEX: the member's latest role
// event at once when its seq is not index (index 0: the latest event now), else once the next
// event comes or after wait (the member cuts it to 5 minutes) with the latest unchanged. The
// answer's Index is the next poll's index. The HTTP client's timeout must exceed wait.
func (c *Client) WaitLeader(ctx context.Context, wait time.Duration, index uint64) (LeaderWaitJSON, error) {
	var lw LeaderWaitJSON
	err := c.get(ctx, fmt.Sprintf("/v1/leader?wait=%s&index=%d", wait, index), &lw)
	return lw, err
}

// send is one request with a JSON body and the bearer token: the answer's status and body.
func (c *Client) send(ctx context.Context, method, path string, body any) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := c.newRequest(ctx, method, path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	return resp.StatusCode, raw, err
}

// ReportLedger is PUT /v1/ledger: the co-located application's ledger end.
func (c *Client) ReportLedger(ctx context.Context, endTerm, endIndex int64) error {
	status, raw, err := c.send(ctx, http.MethodPut, "/v1/ledger", LedgerJSON{EndTerm: &endTerm, EndIndex: &endIndex})
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return httpError(status, raw)
	}
	return nil
}

// Transfer errors, for errors.Is: every error Transfer returns is one of them.
var (
	// ErrRefused: a definite no, nothing changed (the reason is in TransferError.Result, or
	// the HTTPError of an answer that was not a transfer's: 401, 400, ...).
	ErrRefused = errors.New("transfer refused")
	// ErrNotSent: the request could not be sent (refused connection, bad address): nothing
	// was asked. It is a refusal too (errors.Is(err, ErrRefused) holds).
	ErrNotSent = fmt.Errorf("%w: no transfer was asked", ErrRefused)
	// ErrOutcomeUnknown: no answer in time (the client's timeout, or the member's own 504 or
	// reason outcome-unknown): the transfer may still happen; look at who leads later.
	ErrOutcomeUnknown = errors.New("transfer outcome unknown")
)

// TransferError is a transfer that did not happen (or may not have).
type TransferError struct {
	// Kind is ErrRefused, ErrNotSent or ErrOutcomeUnknown.
	Kind error
	// Status is the answer's HTTP status; 0 when none came.
	Status int
	// Result is the member's answer when it was a transfer's (Result.Code != ""): its Reason
	// and Error say why.
	Result TransferJSON
	// Err is the cause without a transfer's answer: the transport's error, or an *HTTPError.
	Err error
}

func (e *TransferError) Error() string {
	switch {
	case e.Result.Code != "" && e.Result.Error != "":
		return fmt.Sprintf("%v: %s", e.Kind, e.Result.Error)
	case e.Result.Code != "":
		return fmt.Sprintf("%v: %s", e.Kind, e.Result.Code)
	case e.Err != nil:
		return fmt.Sprintf("%v: %v", e.Kind, e.Err)
	}
	return e.Kind.Error()
}

// Unwrap is the kind and the cause.
func (e *TransferError) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

// Transfer is POST /v1/transfer {"to":to}: hand leadership to member to (any member may be
// asked: a follower forwards to the leader). nil error only on SUCCESS; otherwise a
// *TransferError whose Kind says whether the transfer was refused (nothing changed) or its
// outcome is unknown (a timeout after the request may have reached the member: it goes on).
// The result is the member's answer whenever there was one.
func (c *Client) Transfer(ctx context.Context, to string) (TransferJSON, error) {
	status, raw, err := c.send(ctx, http.MethodPost, "/v1/transfer", TransferRequestJSON{To: to})
	if err != nil {
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
			return TransferJSON{}, &TransferError{Kind: ErrOutcomeUnknown, Status: status, Err: err}
		}
		if status == 0 {
			return TransferJSON{}, &TransferError{Kind: ErrNotSent, Err: err}
		}
		return TransferJSON{}, &TransferError{Kind: ErrRefused, Status: status, Err: err}
	}
	var res TransferJSON
	if json.Unmarshal(raw, &res) != nil || res.Code == "" {
		// Not an answer to the transfer (401, 400, ...).
		return TransferJSON{}, &TransferError{Kind: ErrRefused, Status: status, Err: httpError(status, raw)}
	}
	switch {
	case res.Code == CodeSuccess:
		return res, nil
	case res.Reason == ReasonOutcomeUnknown || status == http.StatusGatewayTimeout:
		return res, &TransferError{Kind: ErrOutcomeUnknown, Status: status, Result: res}
	}
	return res, &TransferError{Kind: ErrRefused, Status: status, Result: res}
}
