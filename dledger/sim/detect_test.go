package sim

import (
	"testing"
	"time"
)

// TestWithinIncludesBothBounds: WIN's bounds are windows the rule reaches (the floor on a quiet
// link, the ceiling on a slow one), so both are inside.
func TestWithinIncludesBothBounds(t *testing.T) {
	lo, hi := 300*time.Millisecond, 600*time.Millisecond
	for _, c := range []struct {
		w    time.Duration
		want bool
	}{{lo - 1, false}, {lo, true}, {hi, true}, {hi + 1, false}} {
		if got := within(c.w, lo, hi); got != c.want {
			t.Errorf("within(%v, %v, %v) = %v, want %v", c.w, lo, hi, got, c.want)
		}
	}
}
