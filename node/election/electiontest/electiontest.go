// Package electiontest holds what the tests of every election algorithm
// and of node's simulator share, so that a seed names the same cluster in
// each of them. It is for tests only.
package electiontest

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/google/uuid"
)

// SortedIDs returns n version-4 UUIDs drawn from rng, sorted ascending, so
// that index order is election priority order (election.Less).
func SortedIDs(rng *rand.Rand, n int) []uuid.UUID {
	ids := make([]uuid.UUID, n)
	for i := range ids {
		var b [16]byte
		for j := 0; j < 16; j += 8 {
			v := rng.Uint64()
			for k := range 8 {
				b[j+k] = byte(v >> (8 * k))
			}
		}
		b[6] = b[6]&0x0f | 0x40
		b[8] = b[8]&0x3f | 0x80
		ids[i] = uuid.UUID(b)
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return ids
}

// Config is election.DefaultConfig with the short timeouts the simulations
// run with.
func Config() election.Config {
	cfg := election.DefaultConfig()
	cfg.HeartbeatInterval = 50 * time.Millisecond
	cfg.FailureTimeout = 200 * time.Millisecond
	cfg.ElectionTimeout = 100 * time.Millisecond
	return cfg
}
