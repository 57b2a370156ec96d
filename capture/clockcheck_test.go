package capture

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
)

// TestFaultCheckClock sets n3's clock 90 s ahead, gaining 500 ppm, and has
// it and the leader n5 open new connections after 0 s and 10 s: n3's
// HELLOs carry its clock, offset by 90 s and then 5 ms more, n5's the
// host's. n3 stamping 80 s ahead instead fails the check, and no new
// connection leaves it unverified.
func TestFaultCheckClock(t *testing.T) {
	const n3, n5 = 2, 4
	offset, rate := 90*time.Second, 500.0
	for _, tc := range []struct {
		name             string
		stamped          time.Duration // n3's HELLOs' offset at the fault
		reconnect        bool
		verified, wantOK bool
	}{
		{"as asked", offset, true, true, true},
		{"10s short", offset - 10*time.Second, true, true, false},
		{"no new connection", offset, false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, buf := faultSynth(t)
			s.key = &testKey
			s.heartbeats(n5, 1, 1) // the connections open before the fault
			inForce := s.t + int64(time.Millisecond)
			s.inForceRecord(Record{Kind: fault.Clock, Nodes: s.names(n3), Clock: &RecordClock{OffsetNS: int64(offset), RatePPM: rate}})
			s.signHello = func(a, b int, h *wire.Hello) {
				if a == n3 {
					h.Time += int64(tc.stamped) + int64(float64(h.Time-inForce)*rate/1e6)
				}
			}
			for _, wait := range []time.Duration{0, 10 * time.Second} {
				s.advance(wait)
				if tc.reconnect {
					s.closeConns(n3)
					s.closeConns(n5)
					s.send(n3, 0, s.msg(wire.TypeAnswer, n3, 1, 0))
				}
				s.heartbeats(n5, 1, 1)
			}
			rep := analyzeSynth(t, s, buf)
			c := onlyCheck(t, rep, CheckClock)
			if c.Verified != tc.verified || c.OK != tc.wantOK {
				t.Fatalf("verified %v ok %v, want %v %v: %s", c.Verified, c.OK, tc.verified, tc.wantOK, c.Detail)
			}
			if !tc.reconnect {
				if !strings.Contains(c.Detail, "not verified: its nodes sent no HELLO") {
					t.Errorf("detail %q does not say why it is not verified", c.Detail)
				}
				return
			}
			i := slices.IndexFunc(c.Clocks, func(o ClockObservation) bool { return o.Node == "n3" })
			j := slices.IndexFunc(c.Clocks, func(o ClockObservation) bool { return o.Node == "n5" })
			if i < 0 || j < 0 {
				t.Fatalf("observations %+v, want n3's and n5's", c.Clocks)
			}
			o3, o5 := c.Clocks[i], c.Clocks[j]
			if !o3.Asked || o3.Hellos != 2 || o3.OffsetNS != int64(offset) || o3.RatePPM != rate {
				t.Errorf("n3: %+v, want 2 HELLOs under the asked skew", o3)
			}
			// The synth's send times are whole milliseconds: each is off
			// by up to one.
			near := func(got, want int64) bool {
				return got >= want-int64(time.Millisecond) && got <= want+int64(time.Millisecond)
			}
			first, later := int64(tc.stamped), int64(tc.stamped)+int64(5*time.Millisecond)
			if !near(o3.MinNS, first) || !near(o3.MaxNS, later) {
				t.Errorf("n3's offsets %v..%v, want %v then %v (the drift of 10 s at 500 ppm)",
					time.Duration(o3.MinNS), time.Duration(o3.MaxNS), time.Duration(first), time.Duration(later))
			}
			if o5.Asked || o5.Hellos == 0 || !near(o5.MinNS, 0) || !near(o5.MaxNS, 0) || !o5.OK {
				t.Errorf("n5: %+v, want HELLOs on the host's clock", o5)
			}
			if o3.OK != tc.wantOK || (o3.Outside == 0) != tc.wantOK {
				t.Errorf("n3: %+v, want ok %v", o3, tc.wantOK)
			}
		})
	}
}
