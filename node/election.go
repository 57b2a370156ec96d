package node

import (
	"fmt"
	"time"

	"github.com/bullylab/bullylab/node/bully"
	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/node/ring"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// The election algorithms NewElection accepts, by name: the names of
// wire.Type.Algorithm.
const (
	// AlgorithmBully names the Bully election (package bully), the default.
	AlgorithmBully = wire.AlgorithmBully
	// AlgorithmRing names the ring election (package ring).
	AlgorithmRing = wire.AlgorithmRing
)

// Algorithms lists the names NewElection accepts.
func Algorithms() []string { return []string{AlgorithmBully, AlgorithmRing} }

// AlgorithmName returns the name of algorithm as NewElection takes it:
// AlgorithmBully for "".
func AlgorithmName(algorithm string) string {
	if algorithm == "" {
		return AlgorithmBully
	}
	return algorithm
}

// NewElection returns the Machine of the election algorithm named algorithm
// ("" for AlgorithmBully), restored from the State a previous incarnation
// persisted (nil on first boot). It is the one place the runtime picks an
// algorithm; everything else sees only election.Machine.
func NewElection(algorithm string, cfg election.Config, restored *election.State, now time.Duration) (election.Machine, error) {
	switch AlgorithmName(algorithm) {
	case AlgorithmBully:
		m, err := bully.NewElector(cfg, restored, now)
		if err != nil {
			return nil, err // not a nil *bully.Elector in a non-nil interface
		}
		return m, nil
	case AlgorithmRing:
		m, err := ring.NewElector(cfg, restored, now)
		if err != nil {
			return nil, err
		}
		return m, nil
	}
	return nil, fmt.Errorf("unknown election algorithm %q (known: %v)", algorithm, Algorithms())
}

// UnreachableReporter is implemented by Machines that want to hear of
// frames the transport dropped because their peer could not be reached
// (RefusalUnreachable), besides the refused ones (Machine.Refused): the
// ring passes its frame on to the next member.
type UnreachableReporter interface {
	Unreachable(now time.Duration, peer uuid.UUID, t wire.Type, epoch uint64)
}
