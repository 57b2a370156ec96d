package bully

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/google/uuid"
)

// sortedIDs returns n version-4 UUIDs drawn from rng, sorted ascending, so
// that index order is Bully priority order. Node's simulator draws its IDs
// the same way (simIDs), so a seed names the same IDs in both.
func sortedIDs(rng *rand.Rand, n int) []uuid.UUID {
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
	slices.SortFunc(ids, compareIDs)
	return ids
}

// testConfig is node's simConfig: the timeouts the simulator runs with.
func testConfig() election.Config {
	cfg := election.DefaultConfig()
	cfg.HeartbeatInterval = 50 * time.Millisecond
	cfg.FailureTimeout = 200 * time.Millisecond
	cfg.ElectionTimeout = 100 * time.Millisecond
	return cfg
}
