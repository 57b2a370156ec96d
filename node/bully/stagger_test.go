package bully

import (
	"testing"
	"time"
)

// StaggerDelay is the doc's min(rank x DetectionStagger, ElectionTimeout).
func TestStaggerDelayCap(t *testing.T) {
	for _, c := range []struct {
		rank             int
		stagger, timeout time.Duration
		want             time.Duration
	}{
		{0, time.Second, time.Second, 0},
		{-1, time.Second, time.Second, 0},
		{3, 0, time.Second, 0},
		{3, 10 * time.Millisecond, time.Second, 30 * time.Millisecond},
		{248, 50 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond},
		{999, 1<<63 - 1, time.Second, time.Second}, // no overflow
	} {
		if got := StaggerDelay(c.rank, c.stagger, c.timeout); got != c.want {
			t.Errorf("StaggerDelay(%d, %v, %v) = %v, want %v", c.rank, c.stagger, c.timeout, got, c.want)
		}
	}
}
