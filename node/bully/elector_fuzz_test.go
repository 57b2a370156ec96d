package bully

import (
	"testing"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/node/election/electiontest"
	"github.com/bullylab/bullylab/wire"
)

// FuzzMachineStep feeds a Machine arbitrary frames from members and strangers
// (and reports of their crashes) and checks it never panics and keeps its invariants.
func FuzzMachineStep(f *testing.F) {
	seed := electiontest.SeedFrame
	f.Add(seed(wire.TypeElection, 1, nil), uint8(0))
	f.Add(seed(wire.TypeHalt, 9, nil), uint8(2))
	f.Add(seed(wire.TypeReject, 3, make([]byte, 16)), uint8(1))
	f.Add(seed(wire.TypeMembers, 3, wire.AppendMembers(nil, []wire.Member{{Addr: "x:1"}})), uint8(3))
	f.Add(seed(wire.TypeJoin, 0, []byte("10.0.0.1:7946")), uint8(7))
	f.Fuzz(func(t *testing.T, stream []byte, sender uint8) {
		cluster := electiontest.NewFuzzCluster()
		cfg := cluster.Config
		m, err := NewElector(cfg, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Duration(0)
		cluster.EachFrame(stream, sender, func(msg *wire.Message, sender uint8) {
			now += time.Millisecond
			epochBefore := m.Epoch()
			m.Step(now, msg)
			if sender&0x20 != 0 {
				m.PeerCrashed(now, msg.From)
			}
			m.Tick(now + cfg.ElectionTimeout)
			if m.Epoch() < epochBefore {
				t.Fatalf("epoch went backwards: %d -> %d", epochBefore, m.Epoch())
			}
			if m.Status() == election.StatusNormal {
				if l, _ := m.Leader(); l == [16]byte{} {
					t.Fatal("Normal without a leader")
				}
			}
			m.Drain()
		})
	})
}
