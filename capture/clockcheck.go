package capture

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
)

// CheckClock is the check of a clock record (FaultCheck.Check).
const CheckClock = "clock"

// ClockToleranceLate bounds how long before it is sent a node stamps a
// HELLO: it stamps it once its connection is established and writes it
// with the connection's first frame, in the same writer, so the gap is the
// scheduling of that goroutine and the write's system call; 100 ms is
// far beyond both on a loaded 2-core testbed host, and far below the
// offsets that matter against the 5-minute HELLO window. A HELLO is never
// stamped after it is sent, so the check allows nothing on that side but
// the send time's error bound.
const ClockToleranceLate = 100 * time.Millisecond

// ClockObservation is one node's HELLOs while a clock record was in force:
// each HELLO's time minus its send time (its capture timestamp when the
// send time is unknown), against the skew the node's clock had, asked by
// that record or, for the record's other nodes, in force before.
type ClockObservation struct {
	Node string `json:"node"`
	// Asked is whether the record set this node's clock; its other nodes'
	// skews are those in force before (zero unless an earlier record set
	// one).
	Asked bool `json:"asked"`
	// OffsetNS and RatePPM are the skew in force: OffsetNS at the record's
	// in_force, drifting at RatePPM from then.
	OffsetNS int64   `json:"offset_ns"`
	RatePPM  float64 `json:"rate_ppm,omitempty"`
	Hellos   int     `json:"hellos"`
	// MinNS, P50NS and MaxNS are the observed offsets, drift included.
	MinNS int64 `json:"min_ns"`
	P50NS int64 `json:"p50_ns"`
	MaxNS int64 `json:"max_ns"`
	// GapMinNS and GapMaxNS bound the skew in force at each HELLO's send
	// time minus its observed offset: how long before its send it was
	// stamped, within the send time's error.
	GapMinNS int64 `json:"gap_min_ns"`
	GapMaxNS int64 `json:"gap_max_ns"`
	// Outside counts the HELLOs outside the tolerance: stamped more than
	// ClockToleranceLate before, or after, the send time, beyond its
	// error bounds.
	Outside int  `json:"outside"`
	OK      bool `json:"ok"`
}

// helloObs is a HELLO of the capture.
type helloObs struct {
	from  int32
	pkt   int64
	stamp int64 // the time the HELLO carries
	// at is its send time or, when unknown (sent false), its capture
	// timestamp; errNS the send time's error bound.
	at, errNS int64
	sent      bool
}

// hostClockOf is the offset a merged capture subtracted from node's
// host's timestamps (HostClock), and its bound: a node's HELLO carries its
// host's clock, not the file's.
type hostClockOf struct{ offset, bound int64 }

// nodeSkew is a node's clock skew as the clock records set it.
type nodeSkew struct {
	offset int64
	rate   float64
	set    int64 // in force: the setting record's in_force
	// uncertain bounds when between the record's time and in_force the
	// node took it, times the rate: how far the drift may be off.
	uncertain int64
}

func (s nodeSkew) at(t int64) int64 {
	return s.offset + int64(float64(t-s.set)*s.rate/1e6)
}

// clockChecks checks each clock record against the HELLOs sent while it
// was in force, until the next clock record: those of its nodes against
// the skew it asked, the others' against theirs (none, unless an earlier
// record set one).
func (a *analyzer) clockChecks() []FaultCheck {
	var out []FaultCheck
	skews := map[int32]nodeSkew{}
	var clocks []int
	for ri := range a.records {
		if a.records[ri].Kind == fault.Clock && a.records[ri].Clock != nil {
			clocks = append(clocks, ri)
		}
	}
	for ci, ri := range clocks {
		r := &a.records[ri]
		start, end := r.inForce(), int64(math.MaxInt64)
		if ci+1 < len(clocks) {
			end = a.records[clocks[ci+1]].t
		}
		asked := map[int32]bool{}
		for _, name := range r.Nodes {
			if i, ok := a.byName[name]; ok {
				asked[i] = true
				skews[i] = nodeSkew{offset: r.Clock.OffsetNS, rate: r.Clock.RatePPM, set: start,
					uncertain: int64(math.Abs(float64(start-r.t) * r.Clock.RatePPM / 1e6))}
			}
		}
		fc := FaultCheck{Packet: r.pkt, Kind: string(r.Kind), Time: r.Time.UTC(), Check: CheckClock, OK: true}
		byNode := map[int32][]int64{}
		gaps := map[int32][2]int64{}
		outside := map[int32]int{}
		switchTimes := false
		for _, h := range a.hellos {
			if h.at < start || h.at >= end {
				continue
			}
			sk := skews[h.from]
			hc := a.hostClocks[a.name(h.from)]
			observed := h.stamp - h.at - hc.offset
			want := sk.at(h.at)
			slack := h.errNS + hc.bound + sk.uncertain
			if observed > want+slack || observed < want-int64(ClockToleranceLate)-slack {
				outside[h.from]++
			}
			gap := want - observed
			if g, ok := gaps[h.from]; !ok {
				gaps[h.from] = [2]int64{gap, gap}
			} else {
				gaps[h.from] = [2]int64{min(g[0], gap), max(g[1], gap)}
			}
			byNode[h.from] = append(byNode[h.from], observed)
			switchTimes = switchTimes || !h.sent
		}
		nodes := make([]int32, 0, len(byNode))
		for i := range byNode {
			nodes = append(nodes, i)
		}
		for i := range asked {
			if _, ok := byNode[i]; !ok {
				nodes = append(nodes, i)
			}
		}
		slices.SortFunc(nodes, func(x, y int32) int {
			if asked[x] != asked[y] {
				if asked[x] {
					return -1
				}
				return 1
			}
			return strings.Compare(a.name(x), a.name(y))
		})
		var askedHellos, otherHellos int
		var words []string
		for _, i := range nodes {
			sk := skews[i]
			o := ClockObservation{Node: a.name(i), Asked: asked[i], OffsetNS: sk.at(start), RatePPM: sk.rate,
				Hellos: len(byNode[i]), Outside: outside[i], OK: outside[i] == 0}
			if obs := byNode[i]; len(obs) > 0 {
				slices.Sort(obs)
				o.MinNS, o.P50NS, o.MaxNS = obs[0], obs[len(obs)/2], obs[len(obs)-1]
				o.GapMinNS, o.GapMaxNS = gaps[i][0], gaps[i][1]
				words = append(words, o.words())
			}
			if o.Asked {
				askedHellos += o.Hellos
			} else {
				otherHellos += o.Hellos
			}
			fc.OK = fc.OK && o.OK
			fc.Clocks = append(fc.Clocks, o)
		}
		what := fmt.Sprintf("clock %s offset %s", strings.Join(r.Nodes, ","), fmtOffset(r.Clock.OffsetNS))
		if r.Clock.RatePPM != 0 {
			what += fmt.Sprintf(" rate %+g ppm", r.Clock.RatePPM)
		}
		if askedHellos == 0 {
			fc.Detail = what + " asked; not verified: its nodes sent no HELLO while it was in force (a node sends one only on a new connection)"
			if otherHellos > 0 {
				fc.Detail += "; others: " + strings.Join(words, ", ")
			}
			out = append(out, fc)
			continue
		}
		fc.Verified = true
		fc.Detail = fmt.Sprintf("%s asked; HELLO time minus send time: %s; allowed: the skew in force, less up to %s (stamp to send)",
			what, strings.Join(words, ", "), fmtDur(int64(ClockToleranceLate)))
		if switchTimes {
			fc.Detail += " (switch times: send times unknown)"
		}
		out = append(out, fc)
	}
	return out
}

func (o *ClockObservation) words() string {
	s := fmt.Sprintf("%s's %d HELLOs %s..%s (p50 %s)", o.Node, o.Hellos, fmtOffset(o.MinNS), fmtOffset(o.MaxNS), fmtOffset(o.P50NS))
	if !o.OK {
		s += fmt.Sprintf(" (%d outside %s)", o.Outside, fmtOffset(o.OffsetNS))
	}
	return s
}

// fmtOffset prints a signed clock offset: in ms below a second, else as a
// duration to the microsecond.
func fmtOffset(ns int64) string {
	if abs64(ns) < int64(time.Second) {
		if ns > 0 {
			return "+" + fmtDur(ns)
		}
		return fmtDur(ns)
	}
	s := time.Duration(ns).Round(time.Microsecond).String()
	if ns > 0 {
		s = "+" + s
	}
	return s
}
