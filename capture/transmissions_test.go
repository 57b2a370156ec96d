package capture

import (
	"testing"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
)

// resend sends the last data segment of a -> b again at its sequence
// number, as the sender's TCP retransmits it, and acknowledges it.
func (s *synth) resend(a, b int) {
	c := s.conns[[2]int{a, b}]
	port := uint16(s.nodes[b].Port)
	seq := c.cseq - uint32(len(s.frame))
	s.packet(a, b, c.cport, port, seq, c.sseq, tcpACK|tcpPSH, s.frame)
	s.packet(b, a, port, c.cport, c.sseq, c.cseq, tcpACK, nil)
	c.unacked = 0
}

// coordinatorTo finds the timeline entry of the COORDINATOR from to to.
func coordinatorTo(t *testing.T, rep *Report, from, to string) MessageRef {
	t.Helper()
	for _, e := range rep.Elections {
		tl, err := rep.ElectionTimeline(e.N)
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range tl.Entries {
			if en.Type == wire.TypeCoordinator.String() && en.From == from && en.To == to {
				return en.MessageRef
			}
		}
	}
	t.Fatalf("no COORDINATOR %s -> %s in %d elections", from, to, len(rep.Elections))
	return MessageRef{}
}

// TestTransmissionsCutThenRetransmitted is partition-minority's case: the
// majority's new leader n3 sends n5 its COORDINATOR 4 ms before the heal,
// while the partition drops it; n5 never acknowledges that copy, and the
// retransmission about 100 ms after the heal delivers it. The frame keeps
// both copies: the first lost (and sent while the cut was in force), the
// second delivered, each with its own capture and send time.
func TestTransmissionsCutThenRetransmitted(t *testing.T) {
	s, buf := faultSynth(t)
	s.inForceRecord(Record{Kind: fault.Partition, Groups: [][]string{s.names(3, 4), s.names(0, 1, 2)}})
	s.live[3], s.live[4] = false, false // as the majority sees them
	s.advance(500 * time.Millisecond)
	s.send(0, 2, s.msg(wire.TypeElection, 0, 1, wire.ReasonLeaderFailed))
	s.advance(time.Millisecond)
	s.send(2, 0, s.msg(wire.TypeAnswer, 2, 1, 0))
	s.advance(200 * time.Millisecond)
	s.send(2, 0, s.msg(wire.TypeCoordinator, 2, 2, wire.ReasonBullied))
	s.send(2, 1, s.msg(wire.TypeCoordinator, 2, 2, wire.ReasonBullied))
	s.noAck = true
	s.send(2, 4, s.msg(wire.TypeCoordinator, 2, 2, wire.ReasonBullied))
	s.noAck = false
	firstAt := s.sentAt
	s.advance(4 * time.Millisecond)
	s.record(Record{Kind: fault.Heal, Nodes: s.names(0, 1, 2, 3, 4)})
	s.live[3], s.live[4] = true, true
	s.advance(100 * time.Millisecond)
	resentAt := s.t
	s.resend(2, 4)
	rep := analyzeSynth(t, s, buf)

	ref := coordinatorTo(t, rep, "n3", "n5")
	if got := ref.Time.UnixNano(); got != firstAt {
		t.Errorf("frame time %v, want its first copy's %v", ref.Time, time.Unix(0, firstAt).UTC())
	}
	if len(ref.Transmissions) != 2 {
		t.Fatalf("transmissions %+v, want the lost copy and its retransmission", ref.Transmissions)
	}
	first, second := ref.Transmissions[0], ref.Transmissions[1]
	if first.Outcome != OutcomeLost || !first.Cut || first.Time.UnixNano() != firstAt || first.Sent == nil {
		t.Errorf("first copy %+v: want lost, sent while cut, at %v with its send time", first, time.Unix(0, firstAt).UTC())
	}
	if second.Outcome != OutcomeDelivered || second.Cut || second.Time.UnixNano() < resentAt || second.Time.UnixNano() > resentAt+int64(time.Millisecond) || second.Sent == nil {
		t.Errorf("retransmission %+v: want delivered, after the heal, at %v (within 1 ms) with its send time", second, time.Unix(0, resentAt).UTC())
	}
	if second.Sent != nil && second.Sent.Sub(first.Time) < 100*time.Millisecond {
		t.Errorf("retransmission sent %v, want at least 100 ms after the first copy %v", second.Sent, first.Time)
	}
	if ref.Acked == nil || ref.Acked.Before(second.Time) {
		t.Errorf("acked %v, want after the retransmission %v", ref.Acked, second.Time)
	}
	other := coordinatorTo(t, rep, "n3", "n1")
	if len(other.Transmissions) != 1 || other.Transmissions[0].Outcome == OutcomeLost || other.Transmissions[0].Cut {
		t.Errorf("n3 -> n1 inside the majority: transmissions %+v, want one copy, not lost", other.Transmissions)
	}
}

// TestTransmissionsRetransmittedWithoutFault: with no record cutting the
// direction, TCP alone decides: a copy its sender sent again before any
// ACK covered it was lost; one whose ACK came first was delivered.
func TestTransmissionsRetransmittedWithoutFault(t *testing.T) {
	s, buf := faultSynth(t)
	s.live[4] = false
	s.advance(500 * time.Millisecond)
	s.send(0, 3, s.msg(wire.TypeElection, 0, 1, wire.ReasonLeaderFailed))
	s.advance(time.Millisecond)
	s.send(3, 0, s.msg(wire.TypeAnswer, 3, 1, 0))
	s.advance(200 * time.Millisecond)
	s.send(3, 0, s.msg(wire.TypeCoordinator, 3, 2, wire.ReasonBullied))
	s.send(3, 1, s.msg(wire.TypeCoordinator, 3, 2, wire.ReasonBullied))
	s.noAck = true
	s.send(3, 2, s.msg(wire.TypeCoordinator, 3, 2, wire.ReasonBullied))
	s.noAck = false
	s.advance(200 * time.Millisecond)
	s.resend(3, 2)
	rep := analyzeSynth(t, s, buf)
	ref := coordinatorTo(t, rep, "n4", "n3")
	if len(ref.Transmissions) != 2 || ref.Transmissions[0].Outcome != OutcomeLost || ref.Transmissions[0].Cut ||
		ref.Transmissions[1].Outcome != OutcomeDelivered {
		t.Errorf("transmissions %+v, want a lost copy (no cut) and a delivered retransmission", ref.Transmissions)
	}
	ok := coordinatorTo(t, rep, "n4", "n2")
	if len(ok.Transmissions) != 1 || ok.Transmissions[0].Outcome == OutcomeLost {
		t.Errorf("n4 -> n2: transmissions %+v, want one copy, not lost", ok.Transmissions)
	}
}
