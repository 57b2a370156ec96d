package capture

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
)

// Checks of what a fault did on the wire (FaultCheck.Check).
const (
	CheckDelay     = "delay"
	CheckLoss      = "loss"
	CheckCut       = "cut"
	CheckLastFrame = "last-frame"
)

// Tolerances of the fault checks (see Faults verified on the wire in the
// package doc).
const (
	DelayToleranceMin  = 2 * time.Millisecond
	DelayToleranceFrac = 0.10
	// LossConfidenceZ is the normal quantile of the loss check's two-sided
	// 99.9% Wilson score interval, and of the delay check's allowance for
	// jitter.
	LossConfidenceZ = 3.2905
)

// DelayTolerance is how far a direction's median delay may be from the
// requested one: max(2 ms, 10%), plus, under jitter, how far the median of
// that many samples strays by chance ([JitterSpread]).
func DelayTolerance(requested, jitter time.Duration, samples int) time.Duration {
	return max(DelayToleranceMin, time.Duration(float64(requested)*DelayToleranceFrac)) + JitterSpread(jitter, samples)
}

// JitterSpread bounds, at 99.9%, how far the median of n delays drawn
// uniformly from delay±jitter (netem's model) lies from the delay: the
// median of n uniform samples on [-j, j] has a standard deviation of
// j/sqrt(n+2), and no sample lies beyond j.
func JitterSpread(jitter time.Duration, n int) time.Duration {
	if jitter <= 0 || n <= 0 {
		return 0
	}
	return min(jitter, time.Duration(LossConfidenceZ*float64(jitter)/math.Sqrt(float64(n+2))))
}

// FaultCheck is what the capture observed of one fault record next to
// what the record asked for.
type FaultCheck struct {
	Packet int64     `json:"packet"` // the record's
	Kind   string    `json:"kind"`   // the record's
	Time   time.Time `json:"time"`   // the record's
	Check  string    `json:"check"`  // CheckDelay, CheckLoss, CheckCut, CheckLastFrame, CheckClock
	// OK is false when the observation is outside the check's tolerance;
	// a check the capture could not make (Verified false) is OK.
	OK       bool   `json:"ok"`
	Verified bool   `json:"verified"`
	Detail   string `json:"detail"` // one line: asked, observed, verdict

	Delays []DelayObservation `json:"delays,omitempty"`
	Loss   *LossObservation   `json:"loss,omitempty"`
	Cuts   []CutObservation   `json:"cuts,omitempty"`
	Last   []LastFrame        `json:"last_frames,omitempty"`
	Clocks []ClockObservation `json:"clocks,omitempty"`
}

// DelayObservation is one direction's one-way delay while a delay was in
// force: for each segment sent then, its time on the switch minus its
// send time (from its TCP timestamp).
type DelayObservation struct {
	From        string `json:"from"`
	To          string `json:"to"`
	RequestedNS int64  `json:"requested_ns"`
	JitterNS    int64  `json:"jitter_ns,omitempty"`
	Segments    int    `json:"segments"`
	P50NS       int64  `json:"p50_ns"`
	MinNS       int64  `json:"min_ns"`
	MaxNS       int64  `json:"max_ns"`
	ErrorNS     int64  `json:"error_ns"`     // bound of each sample's error
	ToleranceNS int64  `json:"tolerance_ns"` // DelayTolerance for these segments
	OK          bool   `json:"ok"`
}

// LossObservation counts the data transmissions of the record's
// directions, sent while the loss was in force and not over a cut, whose
// fate the capture shows: delivered (acknowledged) or lost (sent again,
// unacknowledged).
type LossObservation struct {
	RequestedPct float64 `json:"requested_pct"`
	Delivered    int     `json:"delivered"`
	Lost         int     `json:"lost"`
	ObservedPct  float64 `json:"observed_pct"`
	LowPct       float64 `json:"low_pct"`  // 99.9% Wilson interval
	HighPct      float64 `json:"high_pct"` // of ObservedPct
}

// CutObservation is one cut direction: the frames sent over it while the
// cut was in force, and how many of them the receiver acknowledged before
// the cut changed (crossed it).
type CutObservation struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Frames  int    `json:"frames"`
	Crossed int    `json:"crossed"`
	// FirstCrossed is the packet of the first frame that crossed, 0: none.
	FirstCrossed int64 `json:"first_crossed,omitempty"`
	// Mode is ModeReset where a reset cuts the direction, else empty.
	// Over such a direction Segments counts the TCP segments sent while
	// the cut was in force (resets not counted) and Resets the resets its
	// receiver sent back meanwhile.
	Mode     fault.CutMode `json:"mode,omitempty"`
	Segments int           `json:"segments,omitempty"`
	Resets   int           `json:"resets,omitempty"`
}

// LastFrame is the last frame a crashed or paused node sent before it came
// back, against when the fault was in force.
type LastFrame struct {
	Node   string     `json:"node"`
	Packet int64      `json:"packet,omitempty"` // 0: it sent none
	Time   *time.Time `json:"time,omitempty"`   // on the switch
	Sent   *time.Time `json:"sent,omitempty"`   // by its kernel
	// AfterNS is Sent (Time when unknown) minus the record's InForce
	// (Time when unknown): negative when the frame came before.
	AfterNS int64 `json:"after_ns"`
	// ClosedBy is the packet of the FIN that closed the frame's
	// connection past it and left before the fault was in force: a frame
	// sent after it was its kernel's retransmission. 0: none.
	ClosedBy int64 `json:"closed_by,omitempty"`
	// LossAsked is the loss rate (percent) asked on the frame's direction
	// since the frame before it, when it was sent after the fault was in
	// force and no FIN says why: it may be a retransmission whose first
	// copy was lost before the switch. 0: none.
	LossAsked float64 `json:"loss_asked,omitempty"`
	OK        bool    `json:"ok"`
}

// PathDelay is the one-way delay of the segments sent while no delay
// record was in force for their direction: what the testbed itself adds.
type PathDelay struct {
	Segments int   `json:"segments"`
	P50NS    int64 `json:"p50_ns"`
	P99NS    int64 `json:"p99_ns"`
	MaxNS    int64 `json:"max_ns"`
	ErrorNS  int64 `json:"error_ns"`
}

// impairWindow is a direction's requested impairment from a record's
// InForce until the next change of that direction.
type impairWindow struct {
	rec  int // a.records index
	pair [2]int32
	// start is the record's InForce; end the time of the record that
	// changed the direction next (stamped before it acted), settled that
	// record's InForce: between the two the change was under way.
	start, end, settled int64
	delay, jitter       int64
	loss                float64
	delayRequested      bool
}

// faultChecks compares each fault record with what the capture shows.
func (a *analyzer) faultChecks(allCuts []*cuts) {
	wins := a.impairWindows()
	checks := a.delayChecks(wins)
	checks = append(checks, a.lossChecks(wins, allCuts)...)
	checks = append(checks, a.cutChecks(allCuts)...)
	checks = append(checks, a.lastFrameChecks(wins)...)
	checks = append(checks, a.clockChecks()...)
	slices.SortStableFunc(checks, func(x, y FaultCheck) int { return cmp.Compare(x.Packet, y.Packet) })
	a.rep.FaultChecks = checks
	if a.rep.FaultChecks == nil {
		a.rep.FaultChecks = []FaultCheck{}
	}
	a.rep.PathDelay = a.pathDelay(wins)
}

func (r *recordAt) inForce() int64 {
	if r.InForce.IsZero() {
		return r.t
	}
	return r.InForce.UnixNano()
}

// impairWindows follows the delay, loss and clear records direction by
// direction.
func (a *analyzer) impairWindows() []impairWindow {
	var out []impairWindow
	open := map[[2]int32]int{} // pair -> index in out
	closeAt := func(pair [2]int32, r *recordAt) {
		if i, ok := open[pair]; ok {
			out[i].end, out[i].settled = r.t, max(r.t, r.inForce())
			delete(open, pair)
		}
	}
	for ri := range a.records {
		r := &a.records[ri]
		switch r.Kind {
		case fault.Delay, fault.Loss:
			if r.Impair == nil {
				continue
			}
			for _, pair := range a.directions(r.Nodes, r.Peers) {
				closeAt(pair, r)
				out = append(out, impairWindow{rec: ri, pair: pair, start: r.inForce(), end: math.MaxInt64, settled: math.MaxInt64,
					delay: r.Impair.DelayNS, jitter: r.Impair.JitterNS, loss: r.Impair.Loss,
					delayRequested: r.Kind == fault.Delay})
				open[pair] = len(out) - 1
			}
		case fault.Clear:
			for _, pair := range a.directions(r.Nodes, r.Peers) {
				closeAt(pair, r)
			}
		}
	}
	return out
}

// directions lists the pairs (sender, receiver) of senders to peers; no
// senders means every node, no peers every other node.
func (a *analyzer) directions(senders, peers []string) [][2]int32 {
	idx := func(names []string) []int32 {
		var out []int32
		if len(names) == 0 {
			for i := range a.nodes {
				out = append(out, int32(i))
			}
			return out
		}
		for _, n := range names {
			if i, ok := a.byName[n]; ok {
				out = append(out, i)
			}
		}
		return out
	}
	var out [][2]int32
	for _, s := range idx(senders) {
		for _, p := range idx(peers) {
			if s != p {
				out = append(out, [2]int32{s, p})
			}
		}
	}
	return out
}

// delayChecks checks each delay record's directions.
func (a *analyzer) delayChecks(wins []impairWindow) []FaultCheck {
	pairs := newPairIndex(len(a.nodes))
	var samples [][]delaySample
	for _, w := range wins {
		if _, ok := pairs.get(w.pair); w.delayRequested && !ok {
			pairs.set(w.pair, int32(len(samples)))
			samples = append(samples, nil)
		}
	}
	if len(samples) > 0 {
		for s := range a.wire.delaySamples() {
			if k, ok := pairs.get([2]int32{s.from, s.to}); ok {
				samples[k] = append(samples[k], s)
			}
		}
	}
	byRec := map[int][]DelayObservation{}
	var recs []int
	for _, w := range wins {
		if !w.delayRequested {
			continue
		}
		if _, ok := byRec[w.rec]; !ok {
			recs = append(recs, w.rec)
		}
		k, _ := pairs.get(w.pair)
		byRec[w.rec] = append(byRec[w.rec], a.observeDelay(w, samples[k]))
	}
	var out []FaultCheck
	for _, ri := range recs {
		out = append(out, a.delayCheck(&a.records[ri], byRec[ri]))
	}
	return out
}

// observeDelay observes the delay in window w from its pair's samples.
func (a *analyzer) observeDelay(w impairWindow, samples []delaySample) DelayObservation {
	o := DelayObservation{From: a.name(w.pair[0]), To: a.name(w.pair[1]), RequestedNS: w.delay, JitterNS: w.jitter, OK: true}
	var ds []int64
	for _, s := range samples {
		// A segment still held when the next change began may be let go
		// early by it (the NFQUEUE delayer releases what it holds when it
		// closes): only one the delay could hold to its longest is a
		// sample of it.
		if s.sent >= w.start && s.sent < w.end && s.sent+w.delay+w.jitter <= w.end {
			ds = append(ds, s.t-s.sent)
		}
	}
	if a.wire.clock != nil {
		o.ErrorNS = a.wire.clock.TSUnitNS/2 + a.wire.clock.OffsetErrorNS
	}
	o.Segments = len(ds)
	o.ToleranceNS = int64(DelayTolerance(time.Duration(w.delay), time.Duration(w.jitter), len(ds)))
	if len(ds) == 0 {
		return o
	}
	slices.Sort(ds)
	o.MinNS, o.MaxNS, o.P50NS = ds[0], ds[len(ds)-1], ds[(len(ds)-1)/2]
	o.OK = abs64(o.P50NS-o.RequestedNS) <= o.ToleranceNS
	return o
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

func (a *analyzer) delayCheck(r *recordAt, obs []DelayObservation) FaultCheck {
	fc := FaultCheck{Packet: r.pkt, Kind: string(r.Kind), Time: r.Time.UTC(), Check: CheckDelay, OK: true, Delays: obs}
	var seen, bad, segs int
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	var worst *DelayObservation
	for i := range obs {
		o := &obs[i]
		if o.Segments == 0 {
			continue
		}
		seen++
		segs += o.Segments
		lo, hi = min(lo, o.P50NS), max(hi, o.P50NS)
		if !o.OK {
			bad++
			if worst == nil || abs64(o.P50NS-o.RequestedNS) > abs64(worst.P50NS-worst.RequestedNS) {
				worst = o
			}
		}
	}
	asked := fmtDur(obs[0].RequestedNS)
	if obs[0].JitterNS > 0 {
		asked += "±" + fmtDur(obs[0].JitterNS)
	}
	switch {
	case a.wire.clock == nil:
		fc.Detail = fmt.Sprintf("delay %s asked; not verified: the capture does not say how to read its TCP timestamps", asked)
		return fc
	case seen == 0:
		fc.Detail = fmt.Sprintf("delay %s asked on %d directions; not verified: no segment sent while it was in force", asked, len(obs))
		return fc
	}
	fc.Verified = true
	fc.OK = bad == 0
	fc.Detail = fmt.Sprintf("delay %s asked on %d directions: observed p50 %s..%s on %d with traffic (%d segments, each ±%s)",
		asked, len(obs), fmtDur(lo), fmtDur(hi), seen, segs, fmtDur(obs[0].ErrorNS))
	if worst != nil {
		within := "max(2 ms, 10%)"
		if worst.JitterNS > 0 {
			within += " plus jitter's spread of a median"
		}
		fc.Detail += fmt.Sprintf("; %d outside %s, worst %s->%s p50 %s of %d segments (allowed ±%s)",
			bad, within, worst.From, worst.To, fmtDur(worst.P50NS), worst.Segments, fmtDur(worst.ToleranceNS))
	}
	return fc
}

// fmtDur prints ns in ms with up to 2 decimals, or in us below 0.1 ms.
func fmtDur(ns int64) string {
	if abs64(ns) < 100_000 {
		return fmt.Sprintf("%d us", ns/1000)
	}
	s := fmt.Sprintf("%.2f", float64(ns)/1e6)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + " ms"
}

// lossChecks checks each loss record's directions together.
func (a *analyzer) lossChecks(wins []impairWindow, allCuts []*cuts) []FaultCheck {
	type acc struct {
		asked           float64
		delivered, lost int
	}
	byRec := map[int]*acc{}
	var recs []int
	var byPair map[[2]int32][]int32
	for _, w := range wins {
		r := &a.records[w.rec]
		if r.Kind != fault.Loss {
			continue
		}
		ac := byRec[w.rec]
		if ac == nil {
			ac = &acc{asked: w.loss}
			byRec[w.rec] = ac
			recs = append(recs, w.rec)
		}
		if byPair == nil {
			byPair = a.wire.sendsByPair()
		}
		for _, i := range byPair[w.pair] {
			x := a.wire.sends.at(i)
			if x.t < w.start || x.t >= w.end || cutsAt(allCuts, x.t).cut(w.pair[0], w.pair[1]) {
				continue
			}
			switch {
			case x.lost:
				ac.lost++
			case x.delivered:
				ac.delivered++
			}
		}
	}
	var out []FaultCheck
	for _, ri := range recs {
		r, ac := &a.records[ri], byRec[ri]
		fc := FaultCheck{Packet: r.pkt, Kind: string(r.Kind), Time: r.Time.UTC(), Check: CheckLoss, OK: true}
		o := &LossObservation{RequestedPct: ac.asked, Delivered: ac.delivered, Lost: ac.lost}
		fc.Loss = o
		n := ac.delivered + ac.lost
		if n == 0 {
			fc.Detail = fmt.Sprintf("loss %g%% asked; not verified: no data transmission whose fate the capture shows", ac.asked)
			out = append(out, fc)
			continue
		}
		o.ObservedPct = 100 * float64(ac.lost) / float64(n)
		lo, hi := wilson(ac.lost, n, LossConfidenceZ)
		o.LowPct, o.HighPct = 100*lo, 100*hi
		fc.Verified = true
		fc.OK = ac.asked >= o.LowPct && ac.asked <= o.HighPct
		verdict := "within"
		if !fc.OK {
			verdict = "outside"
		}
		fc.Detail = fmt.Sprintf("loss %g%% asked: %d of %d data transmissions lost, %.1f%% (99.9%% interval %.1f-%.1f%%): asked rate %s it",
			ac.asked, ac.lost, n, o.ObservedPct, o.LowPct, o.HighPct, verdict)
		out = append(out, fc)
	}
	return out
}

// wilson returns the Wilson score interval of k successes in n trials.
func wilson(k, n int, z float64) (lo, hi float64) {
	p, nf := float64(k)/float64(n), float64(n)
	den := 1 + z*z/nf
	center := (p + z*z/(2*nf)) / den
	half := z / den * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf))
	return max(0, center-half), min(1, center+half)
}

// cutChecks counts, for each reachability change that cuts, the frames
// sent over a cut direction while it was in force and those that crossed;
// over a direction a reset cuts, also the segments sent and the resets
// its receiver answered them with.
func (a *analyzer) cutChecks(allCuts []*cuts) []FaultCheck {
	var out []FaultCheck
	for ci, c := range allCuts {
		end := int64(math.MaxInt64)
		if ci+1 < len(allCuts) {
			end = allCuts[ci+1].t
		}
		byPair := map[[2]int32]*CutObservation{}
		var pairs [][2]int32
		observe := func(k [2]int32) *CutObservation {
			o := byPair[k]
			if o == nil {
				o = &CutObservation{From: a.name(k[0]), To: a.name(k[1])}
				if m := c.mode(k[0], k[1]); m == fault.ModeReset {
					o.Mode = m
				}
				byPair[k] = o
				pairs = append(pairs, k)
			}
			return o
		}
		for i := range a.wire.frames.len() {
			f := a.wire.frames.at(i)
			if f.t < c.inForce || f.t >= end || !c.cut(f.from, f.to) {
				continue
			}
			o := observe([2]int32{f.from, f.to})
			o.Frames++
			at := f.ackSent
			if at == 0 {
				at = f.acked
			}
			if f.acked != 0 && at < end {
				o.Crossed++
				if o.FirstCrossed == 0 {
					o.FirstCrossed = f.pkt
				}
			}
		}
		// Directions with frames first, in the order of their first,
		// then the others by sender and receiver.
		keys := slices.SortedFunc(maps.Keys(a.wire.segments), func(x, y [2]int32) int {
			return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1]))
		})
		for _, k := range keys {
			if c.mode(k[0], k[1]) != fault.ModeReset {
				continue
			}
			segs := a.wire.segments[k]
			sent := 0
			for _, sg := range segs {
				if sg.t >= c.inForce && sg.t < end && !sg.rst {
					sent++
				}
			}
			if sent == 0 {
				continue
			}
			o := observe(k)
			o.Segments = sent
			for _, sg := range a.wire.segments[[2]int32{k[1], k[0]}] {
				if sg.t >= c.inForce && sg.t < end && sg.rst {
					o.Resets++
				}
			}
		}
		r := a.recordOfPacket(c.pkt)
		if r == nil || (!c.parted && len(c.isolated) == 0 && len(c.links) == 0) {
			continue
		}
		fc := FaultCheck{Packet: r.pkt, Kind: string(r.Kind), Time: r.Time.UTC(), Check: CheckCut, OK: true}
		frames, crossed, segments, resets, unanswered := 0, 0, 0, 0, 0
		for _, k := range pairs {
			o := byPair[k]
			fc.Cuts = append(fc.Cuts, *o)
			frames += o.Frames
			crossed += o.Crossed
			segments += o.Segments
			resets += o.Resets
			if o.Mode == fault.ModeReset && o.Segments > 0 && o.Resets == 0 {
				unanswered++
			}
		}
		if frames == 0 && segments == 0 {
			fc.Detail = "cut: not verified: no frame was sent over it while it was in force"
			out = append(out, fc)
			continue
		}
		fc.Verified, fc.OK = true, crossed == 0 && unanswered == 0
		fc.Detail = fmt.Sprintf("cut: %d frames sent over it on %d directions while in force, %d crossed (acknowledged by their receiver)", frames, len(pairs), crossed)
		if segments > 0 {
			fc.Detail += fmt.Sprintf("; reset: %d segments sent over it answered by %d resets", segments, resets)
			if unanswered > 0 {
				fc.Detail += fmt.Sprintf(", %d directions answered by none", unanswered)
			}
		}
		out = append(out, fc)
	}
	return out
}

func (a *analyzer) recordOfPacket(pkt int64) *recordAt {
	for i := range a.records {
		if a.records[i].pkt == pkt {
			return &a.records[i]
		}
	}
	return nil
}

// lastFrameChecks finds, for each crash and pause, the last frame each of
// its nodes sent before it came back, and whether its kernel sent it
// after the fault was in force for a reason other than having held it
// since before.
func (a *analyzer) lastFrameChecks(wins []impairWindow) []FaultCheck {
	var out []FaultCheck
	var sent [][]int32
	for ri := range a.records {
		r := &a.records[ri]
		if r.Kind != fault.Crash && r.Kind != fault.Pause {
			continue
		}
		if sent == nil {
			sent = a.framesBySender()
		}
		fc := FaultCheck{Packet: r.pkt, Kind: string(r.Kind), Time: r.Time.UTC(), Check: CheckLastFrame, OK: true, Verified: true}
		var words []string
		unknownSent, maybeResent := false, false
		for _, name := range r.Nodes {
			i, ok := a.byName[name]
			if !ok {
				continue
			}
			lf := a.lastFrame(i, sent[i], r, wins)
			fc.Last = append(fc.Last, lf)
			unknownSent = unknownSent || (lf.Sent == nil && lf.Packet != 0)
			maybeResent = maybeResent || lf.LossAsked > 0
			fc.OK = fc.OK && lf.OK
			words = append(words, lf.words())
		}
		fc.Verified = !unknownSent && !maybeResent
		fc.Detail = fmt.Sprintf("%s in force: %s", r.Kind, strings.Join(words, "; "))
		if unknownSent {
			fc.Detail += " (switch times: send times unknown)"
		}
		out = append(out, fc)
	}
	return out
}

func (lf *LastFrame) words() string {
	switch {
	case lf.Packet == 0:
		return lf.Node + " sent no frame"
	case lf.AfterNS <= 0:
		return fmt.Sprintf("%s's last frame (packet %d) sent %s before", lf.Node, lf.Packet, fmtDur(-lf.AfterNS))
	case lf.ClosedBy != 0:
		return fmt.Sprintf("%s's last frame (packet %d) sent %s after as a retransmission: its connection's FIN past it (packet %d) went out before", lf.Node, lf.Packet, fmtDur(lf.AfterNS), lf.ClosedBy)
	case lf.LossAsked > 0:
		return fmt.Sprintf("%s's last frame (packet %d) sent %s after, under %g%% loss asked: maybe a retransmission of a copy lost before the switch", lf.Node, lf.Packet, fmtDur(lf.AfterNS), lf.LossAsked)
	default:
		return fmt.Sprintf("%s's last frame (packet %d) sent %s after", lf.Node, lf.Packet, fmtDur(lf.AfterNS))
	}
}

// lastFrame finds the last frame node sent before it came back from r.
// A frame sent after r was in force is not held against it when the
// kernel may have been sending what it held from before: a stopped
// process's sockets stay open and a killed one's are closed with a FIN
// after the bytes already written, and TCP retransmits both. So the frame
// passes when its connection's FIN at or past its end went out before r
// was in force (the bytes were written before the close), and it is not
// verified when its direction lost segments on request since the frame
// before it: the copy on the switch may be the kernel's retransmission of
// one lost before the switch, the only copy the capture could see.
func (a *analyzer) lastFrame(node int32, sent []int32, r *recordAt, wins []impairWindow) LastFrame {
	lf := LastFrame{Node: a.name(node), OK: true}
	back := int64(math.MaxInt64)
	for _, tr := range a.nodes[node].trans {
		if tr.up && tr.t > r.t {
			back = tr.t
			break
		}
	}
	k, _ := slices.BinarySearchFunc(sent, back, func(i int32, t int64) int { return cmp.Compare(a.wire.frames.at(i).t, t) })
	if k == 0 {
		return lf
	}
	last := a.wire.frames.at(sent[k-1])
	t := time.Unix(0, last.t).UTC()
	lf.Packet, lf.Time = last.pkt, &t
	at := last.t
	if last.sent != 0 {
		s := time.Unix(0, last.sent).UTC()
		lf.Sent, at = &s, last.sent
	}
	lf.AfterNS = at - r.inForce()
	if last.sent == 0 || lf.AfterNS-a.wire.sentErr(last.sent) <= 0 {
		return lf
	}
	if fin := a.wire.closedBefore(last, r.inForce()); fin != 0 {
		lf.ClosedBy = fin
		return lf
	}
	if loss := lossAsked(wins, [2]int32{last.from, last.to}, a.wire.previous(last), r.inForce()); loss > 0 {
		lf.LossAsked = loss
		return lf
	}
	lf.OK = false
	return lf
}

// framesBySender returns each node's frames, as indexes in a.wire.frames,
// in time order (stably: ties keep packet order), for lastFrame's search:
// the last of them before a time is the last frame the node sent by then.
func (a *analyzer) framesBySender() [][]int32 {
	w := &a.wire
	counts := make([]int32, len(a.nodes))
	for i := range w.frames.len() {
		counts[w.frames.at(i).from]++
	}
	sent := make([][]int32, len(a.nodes))
	for n, c := range counts {
		sent[n] = make([]int32, 0, c)
	}
	// Frames come in packet order, which is time order but for late
	// packets: a sender's list is sorted only if one of them broke the
	// order (sorting every list took half of this function's time).
	last := make([]int64, len(a.nodes))
	unsorted := make([]bool, len(a.nodes))
	for i := range w.frames.len() {
		f := w.frames.at(i)
		unsorted[f.from] = unsorted[f.from] || f.t < last[f.from]
		last[f.from] = f.t
		sent[f.from] = append(sent[f.from], i)
	}
	for n, s := range sent {
		if unsorted[n] {
			slices.SortStableFunc(s, func(x, y int32) int { return cmp.Compare(w.frames.at(x).t, w.frames.at(y).t) })
		}
	}
	return sent
}

// closedBefore returns the packet of the FIN that closed f's direction at
// or past f's end and that its sender's kernel sent by t, 0 if none.
func (w *wireObserver) closedBefore(f *frameObs, t int64) int64 {
	for _, fin := range w.fins[f.dir] {
		if fin.sent != 0 && fin.sent-fin.sentErr <= t && seqLE(f.end, fin.seq) {
			return fin.pkt
		}
	}
	return 0
}

// previous returns when the frame before f on its direction was on the
// switch, 0 if f was the first.
func (w *wireObserver) previous(f *frameObs) int64 {
	var prev int64
	for i := range w.frames.len() {
		g := w.frames.at(i)
		if g.dir == f.dir && g.t < f.t && g.t > prev {
			prev = g.t
		}
	}
	return prev
}

// lossAsked returns the highest loss rate asked on pair at any time from
// from to to, 0 if none.
func lossAsked(wins []impairWindow, pair [2]int32, from, to int64) float64 {
	var loss float64
	for _, w := range wins {
		if w.pair == pair && w.start <= to && w.end > from {
			loss = max(loss, w.loss)
		}
	}
	return loss
}

// pathDelay summarises the delay of segments outside every delay window.
func (a *analyzer) pathDelay(wins []impairWindow) *PathDelay {
	if a.wire.clock == nil {
		return nil
	}
	pairs := newPairIndex(len(a.nodes))
	var byPair [][]impairWindow
	for _, w := range wins {
		if w.delay > 0 || w.jitter > 0 {
			k, ok := pairs.get(w.pair)
			if !ok {
				k = int32(len(byPair))
				pairs.set(w.pair, k)
				byPair = append(byPair, nil)
			}
			byPair[k] = append(byPair[k], w)
		}
	}
	ds := make([]int64, 0, a.wire.sends.len()+a.wire.bareDelays.len())
sample:
	for s := range a.wire.delaySamples() {
		if k, ok := pairs.get([2]int32{s.from, s.to}); ok {
			for _, w := range byPair[k] {
				if s.sent >= a.records[w.rec].t && s.sent < w.settled {
					continue sample
				}
			}
		}
		ds = append(ds, s.t-s.sent)
	}
	if len(ds) == 0 {
		return nil
	}
	// Selection, not a sort: three ranks of millions of samples.
	p99 := (len(ds) - 1) * 99 / 100
	nthSmallest(ds, p99)
	p50 := (len(ds) - 1) / 2
	nthSmallest(ds[:p99+1], p50)
	return &PathDelay{Segments: len(ds), P50NS: ds[p50], P99NS: ds[p99], MaxNS: slices.Max(ds[p99:]),
		ErrorNS: a.wire.clock.TSUnitNS/2 + a.wire.clock.OffsetErrorNS}
}

// pairIndex maps pairs of nodes to small integers, for a lookup per
// segment: a slice indexed by pair when the nodes are few enough for one,
// a map otherwise.
type pairIndex struct {
	n     int
	dense []int32 // 1 + the pair's value, by from*n+to
	m     map[[2]int32]int32
}

// pairIndexDense is the most nodes whose pairs pairIndex keeps in a
// slice: 4M pairs, 16 MB.
const pairIndexDense = 2048

func newPairIndex(nodes int) *pairIndex {
	p := &pairIndex{n: nodes}
	if nodes > pairIndexDense {
		p.m = map[[2]int32]int32{}
	}
	return p
}

func (p *pairIndex) set(pair [2]int32, v int32) {
	if p.m != nil {
		p.m[pair] = v
		return
	}
	if p.dense == nil {
		p.dense = make([]int32, p.n*p.n)
	}
	p.dense[int(pair[0])*p.n+int(pair[1])] = v + 1
}

func (p *pairIndex) get(pair [2]int32) (int32, bool) {
	if p.m != nil {
		v, ok := p.m[pair]
		return v, ok
	}
	if p.dense == nil {
		return 0, false
	}
	if v := p.dense[int(pair[0])*p.n+int(pair[1])]; v != 0 {
		return v - 1, true
	}
	return 0, false
}

// nthSmallest reorders ds so that ds[k] holds what sorting would put there,
// with nothing larger before it and nothing smaller after: Hoare's
// selection, linear on average. Should the pivots keep splitting badly (a
// capture's delays are its author's to choose), it sorts what is left,
// so that it never takes longer than a sort.
func nthSmallest(ds []int64, k int) {
	lo, hi := 0, len(ds)-1
	for budget := 2 * bits.Len(uint(len(ds))); lo < hi; budget-- {
		if budget == 0 {
			slices.Sort(ds[lo : hi+1])
			return
		}
		mid := lo + (hi-lo)/2
		pivot := max(min(ds[lo], ds[mid]), min(max(ds[lo], ds[mid]), ds[hi])) // the median of three
		i, j := lo, hi
		for i <= j {
			for ds[i] < pivot {
				i++
			}
			for ds[j] > pivot {
				j--
			}
			if i <= j {
				ds[i], ds[j] = ds[j], ds[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return // ds[j+1:i] all equal the pivot
		}
	}
}
