// Package electiontest holds what the tests of every election algorithm
// and of node's simulator share, so that a seed names the same cluster in
// each of them. It is for tests only.
package electiontest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/wire"
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

// Members lists ids as members addressed "n0", "n1", ... in their order.
func Members(ids []uuid.UUID) []wire.Member {
	ms := make([]wire.Member, len(ids))
	for i, id := range ids {
		ms[i] = wire.Member{ID: id, Addr: fmt.Sprintf("n%d", i)}
	}
	return ms
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

// SeedFrame encodes a message of type t at epoch with payload, as a fuzz
// target's seed frame.
func SeedFrame(t wire.Type, epoch uint64, payload []byte) []byte {
	return wire.Append(nil, &wire.Message{Type: t, Epoch: epoch, Payload: payload})
}

// FuzzCluster is the four-member cluster the algorithms' fuzz targets run
// one Machine in: Config is IDs[1]'s, and Stranger is a node no member
// knows.
type FuzzCluster struct {
	IDs      []uuid.UUID
	Stranger uuid.UUID
	Config   election.Config
}

// NewFuzzCluster returns the same FuzzCluster on every call.
func NewFuzzCluster() FuzzCluster {
	rng := rand.New(rand.NewPCG(1, 2))
	ids := SortedIDs(rng, 4)
	cfg := Config()
	cfg.ID = ids[1]
	cfg.Addr = "n1"
	for i, id := range ids {
		cfg.Peers = append(cfg.Peers, wire.Member{ID: id, Addr: "n" + string(rune('0'+i))})
	}
	return FuzzCluster{IDs: ids, Stranger: SortedIDs(rng, 1)[0], Config: cfg}
}

// EachFrame decodes stream frame by frame until it ends or stops decoding,
// and hands each frame to step with its sender set: the member sender
// picks, or Stranger when sender's high bit is set. sender then moves on
// pseudo-randomly, and step gets its new value to draw further choices
// from.
func (c FuzzCluster) EachFrame(stream []byte, sender uint8, step func(msg *wire.Message, sender uint8)) {
	for len(stream) > 0 {
		var msg wire.Message
		n, err := wire.Decode(stream, &msg)
		if err != nil || n == 0 {
			return
		}
		stream = stream[n:]
		msg.From = c.IDs[int(sender)%len(c.IDs)]
		if sender&0x80 != 0 {
			msg.From = c.Stranger
		}
		sender = sender*31 + 7
		step(&msg, sender)
	}
}
