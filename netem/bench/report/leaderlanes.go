package report

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/bullylab/bullylab/netem/bench/results"
)

// LeaderLanes is what each node of a run believed about its leader over
// time, drawn under the run's space-time diagram: a lane per node,
// coloured by the leader it followed, blank while it followed none (or
// did not run), hatched while it led.
type LeaderLanes struct {
	Nodes []string
	Spans []LeaderSpan
	// Origin is time zero, the measured fault as in the diagram above;
	// From and To are the time drawn.
	Origin, From, To time.Time
	// Marks are instants drawn across the lanes: the disruption, the
	// heal, the convergence.
	Marks []LaneMark
}

// LeaderSpan is a time during which Node followed Leader's Epoch.
type LeaderSpan struct {
	Node, Leader string
	Epoch        uint64
	Start, End   time.Time
	// Unreachable: Leader did not lead, did not run, or was not
	// connected to Node both ways.
	Unreachable bool
}

// LaneMark is an instant the lanes mark with a line and a word.
type LaneMark struct {
	Time time.Time
	Text string
}

// leaderColors tell up to ten leaders apart; more reuse them, each span
// named.
var leaderColors = []string{"#2471a3", "#d35400", "#1e8449", "#7d3c98", "#b7950b", "#c0392b", "#148f77", "#5d6d7e", "#a04000", "#1a5276"}

// Layout of the lanes.
const (
	laneLeft, laneRight = 90.0, 20.0
	laneTop             = 10.0
	laneH, laneGap      = 14.0, 4.0
	laneW               = 960.0
)

// LeaderLanesSVG draws l: time runs right on a linear scale, one lane per
// node, each span in its leader's colour (faded while the node could not
// reach that leader both ways), hatched where the node led, and a legend
// of the leaders, under a time axis from l.Origin.
func LeaderLanesSVG(l LeaderLanes) string {
	from, to := l.From, l.To
	if !to.After(from) {
		to = from.Add(time.Second)
	}
	plotW := laneW - laneLeft - laneRight
	x := func(t time.Time) float64 {
		return laneLeft + float64(t.Sub(from))/float64(to.Sub(from))*plotW
	}
	lanesBottom := laneTop + float64(len(l.Nodes))*(laneH+laneGap)
	axisY := lanesBottom + 4
	legendY := axisY + 34
	var leaders []string
	for _, s := range l.Spans {
		if !slices.Contains(leaders, s.Leader) {
			leaders = append(leaders, s.Leader)
		}
	}
	slices.SortFunc(leaders, func(a, b string) int { return rankOf(l.Nodes, a) - rankOf(l.Nodes, b) })
	color := func(leader string) string {
		i := slices.Index(leaders, leader)
		return leaderColors[max(i, 0)%len(leaderColors)]
	}
	H := legendY + 40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="lanes" xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="system-ui, 'DejaVu Sans', sans-serif" role="img" aria-label="each node's leader over time">`,
		f1(laneW), f1(H), f1(laneW), f1(H))
	b.WriteString(`<title>each node's leader over time</title><defs><pattern id="lead-hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#fff" stroke-width="2.4"/></pattern></defs>`)
	for i, n := range l.Nodes {
		y := laneTop + float64(i)*(laneH+laneGap)
		fmt.Fprintf(&b, `<text class="lane-node" x="%s" y="%s" text-anchor="end" font-size="11" fill="#1b2631">%s</text>`, f1(laneLeft-6), f1(y+laneH-3), esc(n))
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#eaecee"/>`, f1(laneLeft), f1(y+laneH/2), f1(laneLeft+plotW), f1(y+laneH/2))
	}
	for _, s := range l.Spans {
		i := slices.Index(l.Nodes, s.Node)
		start, end := maxT(s.Start, from), minT(s.End, to)
		if i < 0 || !end.After(start) {
			continue
		}
		y := laneTop + float64(i)*(laneH+laneGap)
		x0, x1 := x(start), x(end)
		w := math.Max(x1-x0, 0.5)
		opacity := "1"
		if s.Unreachable {
			opacity = "0.35"
		}
		what := fmt.Sprintf("%s follows %s (epoch %d) from %s to %s", s.Node, s.Leader, s.Epoch, offset(s.Start, l.Origin), offset(s.End, l.Origin))
		if s.Leader == s.Node {
			what = fmt.Sprintf("%s leads epoch %d from %s to %s", s.Node, s.Epoch, offset(s.Start, l.Origin), offset(s.End, l.Origin))
		}
		if s.Unreachable {
			what += ", unreachable"
		}
		fmt.Fprintf(&b, `<rect class="lane-span" data-node="%s" data-leader="%s" x="%s" y="%s" width="%s" height="%s" fill="%s" fill-opacity="%s"><title>%s</title></rect>`,
			esc(s.Node), esc(s.Leader), f1(x0), f1(y), f1(w), f1(laneH), color(s.Leader), opacity, esc(what))
		if s.Leader == s.Node {
			fmt.Fprintf(&b, `<rect class="lane-lead" x="%s" y="%s" width="%s" height="%s" fill="url(#lead-hatch)"/>`, f1(x0), f1(y), f1(w), f1(laneH))
		}
		if w > 34 {
			fmt.Fprintf(&b, `<text x="%s" y="%s" font-size="10" fill="#fff" pointer-events="none">%s</text>`, f1(x0+3), f1(y+laneH-3.5), esc(s.Leader))
		}
	}
	for _, m := range l.Marks {
		if m.Time.Before(from) || m.Time.After(to) {
			continue
		}
		mx := x(m.Time)
		fmt.Fprintf(&b, `<line class="lane-mark" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#922b21" stroke-dasharray="3 2"/>`, f1(mx), f1(laneTop-4), f1(mx), f1(lanesBottom))
		fmt.Fprintf(&b, `<text x="%s" y="%s" font-size="10" fill="#922b21">%s</text>`, f1(mx+2), f1(laneTop+2), esc(m.Text))
	}
	laneAxis(&b, from, to, l.Origin, x, axisY, plotW)
	lx := laneLeft
	for _, leader := range leaders {
		fmt.Fprintf(&b, `<rect x="%s" y="%s" width="12" height="10" fill="%s"/><text x="%s" y="%s" font-size="11" fill="#1b2631">follows %s</text>`,
			f1(lx), f1(legendY), color(leader), f1(lx+16), f1(legendY+9), esc(leader))
		lx += 30 + 6.5*float64(len("follows "+leader))
	}
	fmt.Fprintf(&b, `<text x="%s" y="%s" font-size="11" fill="#616a6b">hatched: the node leads; faded: it cannot reach that leader both ways, or that leader does not lead; blank: no leader, or not running</text>`,
		f1(laneLeft), f1(legendY+26))
	b.WriteString(`</svg>`)
	return b.String()
}

// laneAxis draws the time axis under the lanes, in seconds from origin.
func laneAxis(b *strings.Builder, from, to, origin time.Time, x func(time.Time) float64, y, plotW float64) {
	fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#566573"/>`, f1(laneLeft), f1(y), f1(laneLeft+plotW), f1(y))
	span := to.Sub(from).Seconds()
	step := niceStep(span / 8)
	first := math.Ceil(from.Sub(origin).Seconds()/step) * step
	for v := first; v <= to.Sub(origin).Seconds()+1e-9; v += step {
		t := origin.Add(time.Duration(v * float64(time.Second)))
		tx := x(t)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#566573"/><text x="%s" y="%s" text-anchor="middle" font-size="10" fill="#616a6b">%s</text>`,
			f1(tx), f1(y), f1(tx), f1(y+4), f1(tx), f1(y+15), fmtTick(v, step)+"s")
	}
}

// offset is t from origin, as the lanes' tooltips say it.
func offset(t, origin time.Time) string {
	d := t.Sub(origin)
	if d < 0 {
		return "-" + results.FormatNS(int64(-d))
	}
	return results.FormatNS(int64(d))
}

func rankOf(nodes []string, n string) int {
	if i := slices.Index(nodes, n); i >= 0 {
		return i
	}
	return len(nodes)
}

func maxT(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minT(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// AvailabilityText is a run's availability in words for the captions:
// its verdict, when it converged, and how long the cluster was without
// one leader; "" when the run did not measure it.
func AvailabilityText(run results.Run) string {
	a := run.Availability
	if a == nil {
		return ""
	}
	s := a.Verdict
	if a.ConvergedNS != nil {
		s += " after " + results.FormatNS(*a.ConvergedNS)
	}
	if run.UnavailableNS != nil {
		s += ", unavailable " + results.FormatNS(*run.UnavailableNS)
	}
	if run.LeaderChanges != nil {
		s += fmt.Sprintf(", %d leader change", *run.LeaderChanges)
		if *run.LeaderChanges != 1 {
			s += "s"
		}
	}
	return s
}
