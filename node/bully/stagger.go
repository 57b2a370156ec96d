package bully

import (
	"time"

	"github.com/bullylab/bullylab/node/election"
)

// WaitFactor multiplies ElectionTimeout to give the time a node that was
// answered or halted waits for a COORDINATOR before it starts over. The node
// that answered needs up to one ElectionTimeout to learn that nobody above it
// is alive and up to one more to halt the nodes below it; the third covers
// message delays and one REJECT round.
const WaitFactor = 3

// StaggerDelay is election.StaggerDelay: rank x stagger, capped at
// electionTimeout. With Bully the cap is where the highest survivor,
// detecting at rank 0, has finished its HALT round.
func StaggerDelay(rank int, stagger, electionTimeout time.Duration) time.Duration {
	return election.StaggerDelay(rank, stagger, electionTimeout)
}

// MaxStaggerDelay is election.MaxStaggerDelay, the term the stagger adds
// to the SLE2 bound (see the package doc).
func MaxStaggerDelay(n int, stagger, electionTimeout time.Duration) time.Duration {
	return election.MaxStaggerDelay(n, stagger, electionTimeout)
}

// MaxAskSpread is election.MaxAskSpread: the longest a node of a cluster of
// n takes to send its last ELECTION after its first (see the package doc).
func MaxAskSpread(n int, stagger time.Duration) time.Duration {
	return election.MaxAskSpread(n, stagger)
}
