package bully

import "time"

// WaitFactor multiplies ElectionTimeout to give the time a node that was
// answered or halted waits for a COORDINATOR before it starts over. The node
// that answered needs up to one ElectionTimeout to learn that nobody above it
// is alive and up to one more to halt the nodes below it; the third covers
// message delays and one REJECT round.
const WaitFactor = 3

// StaggerDelay is the extra failure-detection delay of a node with rank
// members between it and the node it watches: rank x stagger, capped at
// electionTimeout. Past the cap staggering buys nothing: the highest
// survivor, detecting at rank 0, has finished its HALT round within one
// ElectionTimeout, and every later node would only wait longer to be
// halted (250 nodes would otherwise wait seconds). The cap is also how
// much the stagger adds to the SLE2 bound.
func StaggerDelay(rank int, stagger, electionTimeout time.Duration) time.Duration {
	if rank <= 0 || stagger <= 0 {
		return 0
	}
	if time.Duration(rank) > electionTimeout/stagger {
		return electionTimeout
	}
	return min(time.Duration(rank)*stagger, electionTimeout)
}

// MaxStaggerDelay is the largest StaggerDelay in a cluster of n members: the
// term the stagger adds to the SLE2 bound (see the package doc).
func MaxStaggerDelay(n int, stagger, electionTimeout time.Duration) time.Duration {
	// Between a node and the one it watches lie at most n-2 others.
	return StaggerDelay(n-2, stagger, electionTimeout)
}
