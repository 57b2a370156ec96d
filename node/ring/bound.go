package ring

import (
	"time"

	"github.com/bullylab/bullylab/node/election"
)

// MaxHops bounds the frames one run and its ELECTED take in a cluster of n
// members: 2n-1 RING_ELECTIONs and n ELECTEDs at most, and one resend for
// each member found down on each of the three passes.
func MaxHops(n int) int { return 3*n - 1 + 3*n }

// SLE2Bound is the time after the last fault within which every live node
// is Normal with the highest live node as leader, for a cluster of n
// members whose messages take at most d (see the package doc).
func SLE2Bound(cfg election.Config, n int, d time.Duration) time.Duration {
	stagger := election.MaxStaggerDelay(n, cfg.DetectionStagger, cfg.ElectionTimeout)
	runTimeout := RunTimeout(n, cfg.ElectionTimeout)
	detect := max(cfg.FailureTimeout+d+stagger, cfg.HeartbeatInterval+d, runTimeout)
	return detect + 2*time.Duration(MaxHops(n))*d + cfg.HeartbeatInterval + d
}
