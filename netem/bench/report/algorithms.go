package report

import (
	_ "embed"
	"fmt"
	"math"
	"slices"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/wire"
)

// MessagesPoint is one algorithm's election messages of a leader crash
// on N nodes: the mean over the runs that passed.
type MessagesPoint struct {
	Algorithm string
	N         int
	Mean      float64
	Runs      int // that passed
}

// LeaderCrashMessages is the closed form of a leader crash's election
// messages on the wire, N nodes and the highest survivor detecting: the
// ring's RING_ELECTION and ELECTED once round the N-1 survivors, 2(N-1);
// Bully's HALT, HALT_ACK and COORDINATOR to each of the N-2 others,
// 3N-6. ok is false for an algorithm it does not know.
func LeaderCrashMessages(algorithm string, n int) (msgs int, ok bool) {
	switch algorithm {
	case wire.AlgorithmRing:
		return 2 * (n - 1), true
	case wire.AlgorithmBully:
		return 3*n - 6, true
	}
	return 0, false
}

// leaderCrashScenario names the scenario whose messages the closed forms
// count.
const leaderCrashScenario = "leader-crash"

// MessagesPoints are the leader-crash scenarios of benches rs as points
// of messages against N, one per algorithm and topology size; benches of
// star5, star16 and star64 together draw the growth.
func MessagesPoints(rs ...*results.Results) []MessagesPoint {
	var pts []MessagesPoint
	for _, r := range rs {
		for i := range r.Scenarios {
			sc := &r.Scenarios[i]
			s := sc.Summary
			if s.Runs == 0 && len(sc.Runs) > 0 {
				s = results.Summarize(sc.Runs)
			}
			if !isLeaderCrash(sc) || s.OK == 0 || r.Topology.Nodes < 3 {
				continue
			}
			pts = append(pts, MessagesPoint{Algorithm: sc.AlgorithmName(), N: r.Topology.Nodes, Mean: s.MessagesTotal.Mean, Runs: s.OK})
		}
	}
	slices.SortStableFunc(pts, func(a, b MessagesPoint) int { return a.N - b.N })
	return pts
}

// Layout of the messages-against-N plot.
const (
	mnW, mnH                         = 860.0, 330.0
	mnLeft, mnRight, mnTop, mnBottom = 58.0, 190.0, 44.0, 52.0
	mnPlotW, mnPlotH                 = mnW - mnLeft - mnRight, mnH - mnTop - mnBottom
	mnMinN                           = 3  // the closed forms' least N: a leader and two survivors
	mnAxisN                          = 64 // the axis reaches star64 at least
	mnMarkerR                        = 4.0
)

// algorithmColors tell the algorithms apart in the report's plots.
var algorithmColors = map[string]string{wire.AlgorithmBully: "#c0392b", wire.AlgorithmRing: "#b9770e"}

func algorithmColor(a string) string {
	if c, ok := algorithmColors[a]; ok {
		return c
	}
	return otherColor
}

//go:embed messages.svg.tmpl
var messagesTemplate string

var messagesTmpl = svgTemplate("messages", messagesTemplate)

// messagesSVG is what messages.svg.tmpl draws, its numbers formatted.
type messagesSVG struct {
	W, H           float64
	Title          string
	XTicks, YTicks []svgTick
	Axes           []svgLine
	XLabel, YLabel svgLabel
	Lines          []mnLine
	Points         []mnPoint
	Legend         []mnLegend
	MarkerR        float64
}

// mnLine is an algorithm's closed form across N.
type mnLine struct {
	svgLine
	Color, Title string
}

type mnPoint struct {
	X, Y, Color, Title string
}

type mnLegend struct {
	svgLine
	Color, Text string
	Dashed      bool
	TextX       string
	TextY       string
}

// MessagesByNSVG draws the measured messages per leader-crash election
// against N, a marker per algorithm and size, over each algorithm's
// closed form (LeaderCrashMessages) as a dashed line from N = 3 to the
// axis' end.
func MessagesByNSVG(pts []MessagesPoint) string {
	algs := []string{topologies.DefaultAlgorithm}
	for _, a := range topologies.Algorithms {
		if !slices.Contains(algs, a) {
			algs = append(algs, a)
		}
	}
	for _, p := range pts {
		if !slices.Contains(algs, p.Algorithm) {
			algs = append(algs, p.Algorithm)
		}
	}
	nMax := float64(mnAxisN)
	yMax := 1.0
	for _, p := range pts {
		nMax = math.Max(nMax, float64(p.N))
		yMax = math.Max(yMax, p.Mean)
	}
	for _, a := range algs {
		if m, ok := LeaderCrashMessages(a, int(nMax)); ok {
			yMax = math.Max(yMax, float64(m))
		}
	}
	xStep, yStep := niceStep(nMax/8), niceStep(yMax/6)
	xEnd, yEnd := math.Ceil(nMax/xStep)*xStep, math.Ceil(yMax/yStep)*yStep
	x := func(n float64) float64 { return mnLeft + n/xEnd*mnPlotW }
	y := func(m float64) float64 { return mnTop + mnPlotH - m/yEnd*mnPlotH }
	data := messagesSVG{W: mnW, H: mnH, MarkerR: mnMarkerR,
		Title: "election messages of a leader crash against the number of nodes N, measured and in closed form"}
	bottom, right := f1(mnTop+mnPlotH), f1(mnLeft+mnPlotW)
	data.Axes = []svgLine{{X1: f1(mnLeft), X2: right, Y1: bottom, Y2: bottom}, {X1: f1(mnLeft), X2: f1(mnLeft), Y1: f1(mnTop), Y2: bottom}}
	for v := 0.0; v <= xEnd+xStep/2; v += xStep {
		data.XTicks = append(data.XTicks, svgTick{svgLine{X1: f1(x(v)), X2: f1(x(v)), Y1: bottom, Y2: f1(mnTop + mnPlotH + 5)},
			svgLabel{X: f1(x(v)), Y: f1(mnTop + mnPlotH + 19), Text: fmtTick(v, xStep)}})
	}
	for v := 0.0; v <= yEnd+yStep/2; v += yStep {
		data.YTicks = append(data.YTicks, svgTick{svgLine{X1: f1(mnLeft), X2: right, Y1: f1(y(v)), Y2: f1(y(v))},
			svgLabel{X: f1(mnLeft - 6), Y: f1(y(v) + 4), Text: fmtTick(v, yStep)}})
	}
	data.XLabel = svgLabel{X: f1(mnLeft + mnPlotW/2), Y: f1(mnH - 12), Text: "nodes N"}
	data.YLabel = svgLabel{X: f1(16), Y: f1(mnTop + mnPlotH/2), Text: "messages per election"}
	legendY := mnTop + 10
	for _, a := range algs {
		c := algorithmColor(a)
		if m0, ok := LeaderCrashMessages(a, mnMinN); ok {
			m1, _ := LeaderCrashMessages(a, int(xEnd))
			formula := map[string]string{wire.AlgorithmRing: "2(N-1)", wire.AlgorithmBully: "3N-6"}[a]
			data.Lines = append(data.Lines, mnLine{svgLine{X1: f1(x(mnMinN)), X2: f1(x(xEnd)), Y1: f1(y(float64(m0))), Y2: f1(y(float64(m1)))},
				c, fmt.Sprintf("%s, closed form: %s", a, formula)})
			data.Legend = append(data.Legend, messagesLegend(legendY, c, fmt.Sprintf("%s: %s", a, formula), true))
			legendY += 18
		}
		if slices.ContainsFunc(pts, func(p MessagesPoint) bool { return p.Algorithm == a }) {
			data.Legend = append(data.Legend, messagesLegend(legendY, c, a+" measured (mean)", false))
			legendY += 18
		}
	}
	for _, p := range pts {
		title := fmt.Sprintf("%s on %d nodes: %s messages per election, the mean of %s", p.Algorithm, p.N,
			results.FormatMean(p.Mean), results.PassedRunsPhrase(p.Runs))
		if m, ok := LeaderCrashMessages(p.Algorithm, p.N); ok {
			title += fmt.Sprintf("; closed form %d", m)
		}
		data.Points = append(data.Points, mnPoint{X: f1(x(float64(p.N))), Y: f1(y(p.Mean)), Color: algorithmColor(p.Algorithm), Title: title})
	}
	return executeSVG(messagesTmpl, data)
}

// messagesLegend is a legend line at y: a dashed line for a closed form, a
// marker's colour for the measured.
func messagesLegend(y float64, color, text string, dashed bool) mnLegend {
	x := mnLeft + mnPlotW + 16
	return mnLegend{svgLine: svgLine{X1: f1(x), X2: f1(x + 22), Y1: f1(y), Y2: f1(y)}, Color: color, Text: text, Dashed: dashed,
		TextX: f1(x + 28), TextY: f1(y + 4)}
}
