package daemon

import (
	"net/http"
	"testing"

	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/server"
	"github.com/dledger-go/dledger/server/adminclient"
)

// POST /v1/transfer's body names every reason TransferLeadership has (a client sorts its
// answers by them), keeps the lag of a transferee that is behind, and maps the codes to the
// HTTP statuses dledger transfer's exit codes rest on.
func TestTransferJSONNamesEveryReason(t *testing.T) {
	for _, r := range transferReasons {
		te := &server.TransferError{To: "n2", Reason: r.err, Code: protocol.CodeTakeLeadershipFailed, Term: 4, LeaderID: "n0", Behind: 50}
		out, code := transferJSON(server.TransferResult{}, te)
		if out.Reason != r.name || out.Code != protocol.CodeTakeLeadershipFailed.String() || out.Behind != 50 ||
			out.Term != 4 || out.LeaderID != "n0" || out.Error == "" || code != protocol.CodeTakeLeadershipFailed {
			t.Errorf("%v: %+v code %v", r.err, out, code)
		}
	}
	if out, code := transferJSON(server.TransferResult{Term: 5, LeaderID: "n2"}, nil); code != protocol.CodeSuccess ||
		out != (adminclient.TransferJSON{Code: "SUCCESS", Term: 5, LeaderID: "n2"}) {
		t.Errorf("success: %+v %v", out, code)
	}
	for c, want := range map[protocol.ResponseCode]int{protocol.CodeSuccess: http.StatusOK,
		protocol.CodeUnknownMember: http.StatusBadRequest, protocol.CodeNotLeader: http.StatusConflict,
		protocol.CodeFallBehindTooMuch: http.StatusConflict, protocol.CodeTimeout: http.StatusGatewayTimeout,
		protocol.CodeTakeLeadershipFailed: http.StatusBadGateway} {
		if got := transferHTTPStatus(c); got != want {
			t.Errorf("%v: HTTP %d, want %d", c, got, want)
		}
	}
}
