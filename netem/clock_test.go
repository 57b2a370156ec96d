//go:build linux

package netem_test

import (
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem"
)

func TestMonotonicOffset(t *testing.T) {
	a, aErr, err := netem.MonotonicOffset()
	if err != nil {
		t.Fatal(err)
	}
	b, bErr, err := netem.MonotonicOffset()
	if err != nil {
		t.Fatal(err)
	}
	if aErr <= 0 || bErr <= 0 {
		t.Errorf("error bounds %v and %v, want both above 0", aErr, bErr)
	}
	// Unless the wall clock was stepped in between, both bracket the same
	// offset; NTP slews it by microseconds per second at most.
	if d := (a - b).Abs(); d > aErr+bErr+time.Millisecond {
		t.Errorf("two readings of the offset differ by %v, more than their error bounds %v and %v allow", d, aErr, bErr)
	}
}
