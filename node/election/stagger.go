package election

import (
	"math/bits"
	"time"
)

// StaggerDelay is the extra failure-detection delay of a node with rank
// members between it and the node it watches: rank x stagger, capped at
// electionTimeout. Past the cap staggering buys nothing: the highest
// survivor, detecting at rank 0, has begun its election within one
// ElectionTimeout, and every later node would only wait longer to hear of
// it (250 nodes would otherwise wait seconds). The cap is also how much
// the stagger adds to an algorithm's SLE2 bound.
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
// term the stagger adds to an SLE2 bound.
func MaxStaggerDelay(n int, stagger, electionTimeout time.Duration) time.Duration {
	// Between a node and the one it watches lie at most n-2 others.
	return StaggerDelay(n-2, stagger, electionTimeout)
}

// AskSpread is how long after its first ELECTION a Bully node with higher
// members above it sends its last: it asks them in waves of 1, 2, 4, ...
// members, one step apart, so ceil(log2(higher+1)) waves (a first wave of
// two, on a silent leader, needs no more). 0 with a step of 0 (every
// ELECTION at once) or one member to ask.
func AskSpread(higher int, step time.Duration) time.Duration {
	if higher <= 1 || step <= 0 {
		return 0
	}
	return time.Duration(bits.Len(uint(higher))-1) * step
}

// MaxAskSpread is the largest AskSpread in a cluster of n members: a node
// may have every other member above it.
func MaxAskSpread(n int, step time.Duration) time.Duration {
	return AskSpread(n-1, step)
}
