package bugs

import "github.com/dledger-go/dledger/memberstate"

// MemberState returns the member state an elector owns, which must be a *dledger.Elector. The
// simulator's checker reads term, vote, role and ledger from it between steps (it runs every
// elector on its one goroutine, so no step is in progress); nothing else may, and nothing may
// change it. Package dledger installs it at init.
var MemberState func(elector any) *memberstate.MemberState
