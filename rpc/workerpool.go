package rpc

import (
	"runtime"

	"github.com/panjf2000/gnet/v2/pkg/pool/goroutine"
)

// ReleaseGnetWorkerPool stops gnet's process-wide goroutine pool. The pool keeps a clock
// goroutine that wakes the process twice a second and a purger that wakes it every ten, which
// is a quarter of an idle follower's wake-ups (docs/design.md, "What an idle member costs").
// On Linux and the BSDs gnet uses the pool only to enroll connections that were dialled
// outside an engine (Client.Enroll, Engine.Register), which this package never does, so a
// process whose only gnet user is this package loses nothing. A process that enrolls
// connections itself must not call it: gnet would then fail to enroll them. On Windows,
// where gnet runs every connection on the pool, it does nothing. The dledger command calls
// it once the member serves; the library never calls it on its own.
func ReleaseGnetWorkerPool() {
	if runtime.GOOS == "windows" {
		return
	}
	goroutine.DefaultWorkerPool.Release()
}
