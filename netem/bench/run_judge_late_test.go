//go:build linux

package bench

import (
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem"
)

func TestLatestDelayer(t *testing.T) {
	if got := latestDelayer(nil); got != "" {
		t.Errorf("no delayers: %q, want empty", got)
	}
	stats := map[string]netem.DelayerStats{
		"n1": {}, // impaired by loss alone: no delayer
		"n2": {LateCount: 10, LateP50: time.Millisecond, LateP99: 2 * time.Millisecond, LateMax: 3 * time.Millisecond, LateOver1ms: 4, LateOver2ms: 1},
		"n3": {LateCount: 8, LateP50: 100 * time.Microsecond, LateP99: 200 * time.Microsecond, LateMax: 300 * time.Microsecond},
	}
	want := "n2's delayer late p50 1.00 ms, p99 2.00 ms, max 3.00 ms; 4 of 10 releases over 1 ms, 1 over 2 ms"
	if got := latestDelayer(stats); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := latestDelayer(map[string]netem.DelayerStats{"n1": {}}); got != "" {
		t.Errorf("no release measured: %q, want empty", got)
	}
}
