package node

import (
	"fmt"
	"time"

	"github.com/bullylab/bullylab/node/bully"
	"github.com/bullylab/bullylab/node/election"
)

// AlgorithmBully names the Bully election (package bully), the default.
const AlgorithmBully = "bully"

// Algorithms lists the names NewElection accepts.
func Algorithms() []string { return []string{AlgorithmBully} }

// NewElection returns the Machine of the election algorithm named algorithm
// ("" for AlgorithmBully), restored from the State a previous incarnation
// persisted (nil on first boot). It is the one place the runtime picks an
// algorithm; everything else sees only election.Machine.
func NewElection(algorithm string, cfg election.Config, restored *election.State, now time.Duration) (election.Machine, error) {
	switch algorithm {
	case "", AlgorithmBully:
		m, err := bully.NewElector(cfg, restored, now)
		if err != nil {
			return nil, err // not a nil *bully.Elector in a non-nil interface
		}
		return m, nil
	}
	return nil, fmt.Errorf("unknown election algorithm %q (known: %v)", algorithm, Algorithms())
}
