package ring

import (
	"testing"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/node/election/electiontest"
	"github.com/bullylab/bullylab/wire"
)

// FuzzMachineStep feeds a ring Elector arbitrary frames from members and
// strangers, with refusals in between, and checks it never panics and
// keeps its invariants.
func FuzzMachineStep(f *testing.F) {
	seed := electiontest.SeedFrame
	ids := electiontest.NewFuzzCluster().IDs
	f.Add(seed(wire.TypeRingElection, 2, wire.AppendRingElection(nil, ids[0], ids[3])), uint8(0))
	f.Add(seed(wire.TypeRingElection, 1, wire.AppendRingElection(nil, ids[1], ids[1])), uint8(0))
	f.Add(seed(wire.TypeElected, 9, wire.AppendID(nil, ids[3])), uint8(2))
	f.Add(seed(wire.TypeElected, 3, make([]byte, 16)), uint8(1))
	f.Add(seed(wire.TypeRingElection, 3, make([]byte, 31)), uint8(1))
	f.Add(seed(wire.TypeHalt, 9, nil), uint8(2))
	f.Add(seed(wire.TypeHeartbeat, 4, nil), uint8(3))
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
		var last []election.Envelope
		cluster.EachFrame(stream, sender, func(msg *wire.Message, sender uint8) {
			now += time.Millisecond
			epochBefore, promiseBefore := m.Epoch(), m.State().Promise
			m.Step(now, msg)
			if sender&0x20 != 0 {
				m.PeerCrashed(now, msg.From)
			}
			if sender&0x40 != 0 && len(last) > 0 {
				e := last[int(sender)%len(last)]
				m.Refused(now, e.To, e.Msg.Type, e.Msg.Epoch)
			}
			m.Tick(now + cfg.ElectionTimeout)
			if m.Epoch() < epochBefore {
				t.Fatalf("epoch went backwards: %d -> %d", epochBefore, m.Epoch())
			}
			if p := m.State().Promise; p.Less(promiseBefore) {
				t.Fatalf("promise went backwards: %+v -> %+v", promiseBefore, p)
			}
			if m.Status() == election.StatusNormal {
				if l, _ := m.Leader(); l == [16]byte{} {
					t.Fatal("Normal without a leader")
				}
			}
			if e := m.Epoch(); e > election.MaxEpoch+1 {
				t.Fatalf("epoch %d beyond the maximum", e)
			}
			out := m.Drain()
			last = out.Messages
			for _, env := range out.Messages {
				if env.To == m.ID() {
					t.Fatalf("sent %s to itself", env.Msg.Type)
				}
			}
		})
	})
}
