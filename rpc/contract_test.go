package rpc_test

import (
	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc"
)

// rpc declares its own Handler so that it does not import the elector; these assignments
// stop compiling if either side's method set drifts. (An external test package may import
// dledger without creating an import cycle or a production dependency.)
var (
	_ dledger.Transport = (*rpc.Client)(nil)
	_ dledger.Handler   = rpc.Handler(nil)
	_ rpc.Handler       = dledger.Handler(nil)
)
