package harness

import (
	"context"
	"time"
)

// Failpoint is one kind of fault, in the shape of etcd's robustness Failpoint: its name, whether
// this machine can inject it, and the injection. The lab's scenarios are Failpoints; adding a
// fault is adding one.
type Failpoint interface {
	// Name is the fault's name on the command line and in the report lines.
	Name() string
	// Available says why the fault can not be injected here (nil: it can): a missing
	// privilege or tool. The scenario is then skipped with that reason.
	Available() error
	// Inject injects the fault into the group again and again until end or ctx ends, and
	// leaves every member running, resumed and connected.
	Inject(ctx context.Context, end time.Time) error
}
