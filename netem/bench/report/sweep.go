package report

import (
	_ "embed"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/topologies"
)

// Sweep is a family of scenarios that differ in one numeric label: the
// points of latency-sweep (delay=...) or of loss (loss=...), or of any
// scenario file run with one label varied. The report draws it as curves
// against the swept value.
type Sweep struct {
	Name string // the scenarios' name
	// Algorithm is the election the points ran: a sweep is of one.
	Algorithm string
	Key       string // the label that varies
	// Fixed are the labels every point shares.
	Fixed map[string]string
	// Unit is what Value counts: "ms" for durations, "%" for loss, ""
	// for a plain number.
	Unit   string
	Points []SweepPoint // by Value, ascending
}

// SweepPoint is one scenario of a sweep.
type SweepPoint struct {
	Label    string  // the label's value, as in the scenario's key
	Value    float64 // the label's value in the sweep's Unit
	Scenario *results.ScenarioResult
}

// Title names the sweep: "latency-sweep by delay", with its fixed labels.
func (s *Sweep) Title() string {
	t := s.Name + " by " + s.Key
	if len(s.Fixed) > 0 {
		t = scenario.Key(s.Name, s.Fixed) + " by " + s.Key
	}
	if s.Algorithm != "" && s.Algorithm != topologies.DefaultAlgorithm {
		t += ", " + s.Algorithm
	}
	return t
}

// SweepValue reads a label's value as a point of a sweep: a duration such
// as 50ms or 0s in milliseconds, or a number, a percentage when it ends in
// '%' or the label is loss. A bare 0 is a number, which goes with a sweep
// of any unit. ok is false for anything else.
func SweepValue(key, v string) (value float64, unit string, ok bool) {
	if d, err := time.ParseDuration(v); err == nil && v != "0" {
		return float64(d) / 1e6, "ms", true
	}
	s, pct := strings.CutSuffix(v, "%")
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, "", false
	}
	if pct || key == "loss" {
		return f, "%", true
	}
	return f, "", true
}

// Sweeps finds the families among scs: two or more scenarios of one name
// and algorithm with the same label keys, all but one of them equal, the one left
// numeric (SweepValue) in one unit and different in each. Families come in
// the order of their first scenario, points by value.
func Sweeps(scs []results.ScenarioResult) []Sweep {
	type family struct{ name, algorithm string }
	var names []family
	byName := map[family][]*results.ScenarioResult{}
	for i := range scs {
		sc := &scs[i]
		f := family{sc.Name, sc.AlgorithmName()}
		if _, ok := byName[f]; !ok {
			names = append(names, f)
		}
		byName[f] = append(byName[f], sc)
	}
	var out []Sweep
	for _, f := range names {
		if sw, ok := sweepOf(byName[f]); ok {
			sw.Algorithm = f.algorithm
			out = append(out, sw)
		}
	}
	return out
}

func sweepOf(scs []*results.ScenarioResult) (Sweep, bool) {
	if len(scs) < 2 {
		return Sweep{}, false
	}
	keys := slices.Sorted(maps.Keys(scs[0].Labels))
	var varying []string
	for _, sc := range scs[1:] {
		if !slices.Equal(slices.Sorted(maps.Keys(sc.Labels)), keys) {
			return Sweep{}, false
		}
	}
	for _, k := range keys {
		for _, sc := range scs[1:] {
			if sc.Labels[k] != scs[0].Labels[k] {
				varying = append(varying, k)
				break
			}
		}
	}
	if len(varying) != 1 {
		return Sweep{}, false
	}
	key := varying[0]
	sw := Sweep{Name: scs[0].Name, Key: key, Fixed: map[string]string{}}
	for _, k := range keys {
		if k != key {
			sw.Fixed[k] = scs[0].Labels[k]
		}
	}
	seen := map[float64]bool{}
	units := map[string]bool{}
	for _, sc := range scs {
		v, unit, ok := SweepValue(key, sc.Labels[key])
		if !ok || seen[v] {
			return Sweep{}, false
		}
		if sc.Labels[key] != "0" {
			units[unit] = true
			sw.Unit = unit
		}
		seen[v] = true
		sw.Points = append(sw.Points, SweepPoint{Label: sc.Labels[key], Value: v, Scenario: sc})
	}
	if len(units) > 1 {
		return Sweep{}, false // 10ms and 5: not one axis
	}
	slices.SortStableFunc(sw.Points, func(a, b SweepPoint) int {
		switch {
		case a.Value < b.Value:
			return -1
		case a.Value > b.Value:
			return 1
		}
		return 0
	})
	return sw, true
}

// Layout of the sweep plot: time to leader above, messages per election
// below, one x axis under both.
const (
	swW, swLeft, swRight = 860.0, 70.0, 40.0
	swPlotW              = swW - swLeft - swRight
	swTop, swTopH        = 52.0, 230.0 // the time panel
	swMsgTop, swMsgH     = swTop + swTopH + 34, 110.0
	swH                  = swMsgTop + swMsgH + 74
	swMinSpacing         = 56.0 // between two points' ticks, or they go evenly spaced
	swMargin             = 30.0 // between the axis ends and the outer points
	swLegendY            = 20.0
	swMarkerR            = 3.5
	swP50Color           = "#1b2631"
	swP95Color           = "#922b21"
	swDetColor           = "#d35400"
	swRunR               = 2.5
	swBandColor          = "#5dade2"
	swMsgColor           = "#1e8449"
	swGapColor           = "#aab7b8"
	swGapLabel           = "no run passed"
)

//go:embed sweep.svg.tmpl
var sweepTemplate string

var sweepTmpl = svgTemplate("sweep", sweepTemplate)

// SweepSVG draws a sweep: per point the time to leader of the runs that
// passed (every run a dot, the p50 line and, where the point's runs
// support it, the p95 line over a min-max band), the detection p50, and
// below it the mean election messages per run, each point's runs under
// the axis. A point where no run passed is a gap in the lines, marked as
// such, not a zero.
func SweepSVG(sw Sweep) string {
	data := sweepSVG{W: swW, H: swH, Title: "time to leader and messages per election of " + sw.Title(), MarkerR: swMarkerR,
		RunR: swRunR, P50Color: swP50Color, BandColor: swBandColor, GapColor: swGapColor}
	p := newSweepPlot(sw)
	p.axes(&data)
	p.bands(&data)
	p.runDots(&data)
	p.lines(&data)
	p.gaps(&data)
	p.legend(&data)
	return executeSVG(sweepTmpl, data)
}

// sweepSVG is what sweep.svg.tmpl draws, its numbers formatted.
type sweepSVG struct {
	W, H, MarkerR, RunR           float64
	Title                         string
	P50Color, BandColor, GapColor string
	// YTicks are both panels' grid lines with their labels, PanelAxes
	// the panels' axes.
	YTicks    []svgTick
	PanelAxes []svgLine
	Points    []sweepPointMarks
	// XTitle is the points' axis title, TimeLabel and MsgLabel place
	// the panels' rotated titles, MsgTitle the messages panel's own.
	XTitle, TimeLabel, MsgLabel, MsgTitle svgLabel
	Bands                                 []sweepBand
	// RunDots are every run that passed at its time to leader, with
	// its tooltip.
	RunDots []svgLabel
	Lines   []sweepLine
	Gaps    []sweepGap
	// Legend are the legend's items, those the plot draws; NoPassX,
	// when not "", is where it says that no point has a run that passed.
	Legend                            []sweepLegendItem
	LegendY, LegendRectY, LegendTextY string
	NoPassX                           string
}

// sweepPointMarks are a point's grid lines in both panels, its tick, and
// its value and runs under the axis.
type sweepPointMarks struct {
	TimeGrid, MsgGrid, Tick svgLine
	Value, Runs             svgLabel
}

// sweepBand is the min-max band of a run of points: a polygon through
// Points, or for a lone point a rectangle.
type sweepBand struct {
	Points     string
	X, Y, W, H string
}

// sweepLine is one series over a run of points: its path (none for a
// lone point) and its markers, each with its tooltip.
type sweepLine struct {
	Class, Color, Path string
	Dash               string // stroke-dasharray, "" for solid
	Markers            []svgLabel
}

// sweepGap marks a point where no run passed.
type sweepGap struct {
	Title string
	Lines []svgLine
	Label svgLabel
}

// sweepLegendItem is a legend item: its mark (Kind line, with Dash when
// dashed; band; dot) from X to X2 in Color, its Text at TextX.
type sweepLegendItem struct{ Kind, Color, Dash, Text, X, X2, CX, TextX string }

type sweepPlot struct {
	sw       Sweep
	sums     []results.Summary
	xs       []float64 // of each point
	scaled   bool      // xs are to scale
	tStep    float64   // ms, of the time axis
	tMax     float64
	mStep    float64 // messages
	mMax     float64
	anyPass  bool
	xLo, xHi float64
}

func newSweepPlot(sw Sweep) *sweepPlot {
	p := &sweepPlot{sw: sw}
	tMax, mMax := 0.0, 0.0
	for _, pt := range sw.Points {
		s := pt.Scenario.Summary
		if s.Runs == 0 && len(pt.Scenario.Runs) > 0 {
			s = results.Summarize(pt.Scenario.Runs)
		}
		p.sums = append(p.sums, s)
		if s.OK > 0 {
			p.anyPass = true
			tMax = math.Max(tMax, float64(s.TimeToLeader.MaxNS)/1e6)
			mMax = math.Max(mMax, s.MessagesTotal.Mean)
		}
	}
	p.tStep = niceStep(math.Max(tMax, 1) / 5)
	p.tMax = math.Ceil(math.Max(tMax, 1)/p.tStep-1e-9) * p.tStep
	p.mStep = niceStep(math.Max(mMax, 1) / 3)
	p.mMax = math.Ceil(math.Max(mMax, 1)/p.mStep-1e-9) * p.mStep
	// To scale when every point's tick has room; evenly spaced otherwise
	// (10ms, 100ms, 1s would crowd the first two into a corner).
	n := len(sw.Points)
	lo, hi := sw.Points[0].Value, sw.Points[n-1].Value
	p.scaled = hi > lo
	p.xs = make([]float64, n)
	for i, pt := range sw.Points {
		if hi > lo {
			p.xs[i] = swLeft + swMargin + (pt.Value-lo)/(hi-lo)*(swPlotW-2*swMargin)
		}
		if i > 0 && p.xs[i]-p.xs[i-1] < swMinSpacing {
			p.scaled = false
		}
	}
	if !p.scaled {
		for i := range p.xs {
			if n == 1 {
				p.xs[i] = swLeft + swPlotW/2
				continue
			}
			p.xs[i] = swLeft + swMargin + float64(i)/float64(n-1)*(swPlotW-2*swMargin)
		}
	}
	return p
}

func (p *sweepPlot) yt(ms float64) float64 { return swTop + swTopH - ms/p.tMax*swTopH }

func (p *sweepPlot) ym(m float64) float64 { return swMsgTop + swMsgH - m/p.mMax*swMsgH }

// unitText is a point's value as its tick shows it.
func (p *sweepPlot) unitText(pt SweepPoint) string {
	if p.sw.Unit == "%" && !strings.HasSuffix(pt.Label, "%") {
		return pt.Label + "%"
	}
	return pt.Label
}

// axes are the panels' grids, axes and ticks, each point's value and
// runs, and the titles.
func (p *sweepPlot) axes(data *sweepSVG) {
	hline := func(x0, x1, y float64) svgLine { return svgLine{f1(x0), f1(x1), f1(y), f1(y)} }
	vline := func(x, y0, y1 float64) svgLine { return svgLine{f1(x), f1(x), f1(y0), f1(y1)} }
	for i := 0; i <= 20 && float64(i)*p.tStep <= p.tMax+1e-9; i++ {
		v := float64(i) * p.tStep
		data.YTicks = append(data.YTicks, svgTick{hline(swLeft, swLeft+swPlotW, p.yt(v)), svgLabel{f1(swLeft - 6), f1(p.yt(v) + 4), fmtTick(v, p.tStep)}})
	}
	for i := 0; i <= 20 && float64(i)*p.mStep <= p.mMax+1e-9; i++ {
		v := float64(i) * p.mStep
		data.YTicks = append(data.YTicks, svgTick{hline(swLeft, swLeft+swPlotW, p.ym(v)), svgLabel{f1(swLeft - 6), f1(p.ym(v) + 4), fmtTick(v, p.mStep)}})
	}
	for _, top := range []struct{ y, h float64 }{{swTop, swTopH}, {swMsgTop, swMsgH}} {
		data.PanelAxes = append(data.PanelAxes, hline(swLeft, swLeft+swPlotW, top.y+top.h), vline(swLeft, top.y, top.y+top.h))
	}
	axisY := swMsgTop + swMsgH
	for i, pt := range p.sw.Points {
		x := p.xs[i]
		s := p.sums[i]
		runs := "n=" + strconv.Itoa(s.OK)
		if s.OK != s.Runs {
			runs += " of " + strconv.Itoa(s.Runs)
		}
		data.Points = append(data.Points, sweepPointMarks{TimeGrid: vline(x, swTop, swTop+swTopH), MsgGrid: vline(x, swMsgTop, axisY),
			Tick: vline(x, axisY, axisY+5), Value: svgLabel{f1(x), f1(axisY + 18), p.unitText(pt)}, Runs: svgLabel{f1(x), f1(axisY + 32), runs}})
	}
	xTitle := p.sw.Key
	switch {
	case p.sw.Unit != "" && p.scaled:
		xTitle += " (" + p.sw.Unit + ", to scale)"
	case p.sw.Unit != "":
		xTitle += " (" + p.sw.Unit + ", evenly spaced: not to scale)"
	case !p.scaled:
		xTitle += " (evenly spaced: not to scale)"
	}
	xTitle += "; n = runs that passed, which each point rests on"
	data.XTitle = svgLabel{f1(swLeft + swPlotW/2), f1(swH - 8), xTitle}
	data.TimeLabel = svgLabel{X: f1(16), Y: f1(swTop + swTopH/2)}
	data.MsgLabel = svgLabel{X: f1(16), Y: f1(swMsgTop + swMsgH/2)}
	data.MsgTitle = svgLabel{X: f1(swLeft + 6), Y: f1(swMsgTop + -8)}
}

// segments are the runs of consecutive points where some run passed.
func (p *sweepPlot) segments() [][]int {
	return p.segmentsWhere(func(i int) bool { return p.sums[i].OK > 0 })
}

// bands are the min-max bands of time to leader.
func (p *sweepPlot) bands(data *sweepSVG) {
	for _, seg := range p.segments() {
		if len(seg) == 1 {
			i := seg[0]
			d := p.sums[i].TimeToLeader
			y0, y1 := p.yt(float64(d.MaxNS)/1e6), p.yt(float64(d.MinNS)/1e6)
			data.Bands = append(data.Bands, sweepBand{X: f1(p.xs[i] - 5.0), Y: f1(y0), W: f1(2 * 5.0), H: f1(math.Max(y1-y0, 0.5))})
			continue
		}
		var pts []string
		for _, i := range seg {
			pts = append(pts, f1(p.xs[i])+","+f1(p.yt(float64(p.sums[i].TimeToLeader.MaxNS)/1e6)))
		}
		for _, i := range slices.Backward(seg) {
			pts = append(pts, f1(p.xs[i])+","+f1(p.yt(float64(p.sums[i].TimeToLeader.MinNS)/1e6)))
		}
		data.Bands = append(data.Bands, sweepBand{Points: strings.Join(pts, " ")})
	}
}

// runDots are every run that passed, at its time to leader, so that a
// point of one run or three shows what it rests on.
func (p *sweepPlot) runDots(data *sweepSVG) {
	for i, pt := range p.sw.Points {
		if p.sums[i].OK == 0 {
			continue
		}
		for _, r := range pt.Scenario.Runs {
			if !r.OK {
				continue
			}
			data.RunDots = append(data.RunDots, svgLabel{f1(p.xs[i]), f1(p.yt(float64(r.TimeToLeaderNS) / 1e6)),
				fmt.Sprintf("%s=%s, run %d: time to leader %s", p.sw.Key, pt.Label, r.Index, results.FormatNS(r.TimeToLeaderNS))})
		}
	}
}

// sweepSeries is one line of the plot: at the points where has holds.
type sweepSeries struct {
	class, legend, color, dash string
	has                        func(i int) bool
	y                          func(i int) float64
	text                       func(i int) string
}

// series are the lines the plot can draw: time to leader p50 and p95,
// the p95 only at points whose runs support it (results.PercentileShown),
// detection p50 where runs measured one, and messages.
func (p *sweepPlot) series() []sweepSeries {
	ttl := func(i int) string {
		return fmt.Sprintf("%s=%s: time to leader %s, min %s over %s", p.sw.Key, p.sw.Points[i].Label,
			results.PercentilesText(p.sums[i].TimeToLeader, results.TimePercentiles), results.FormatNS(p.sums[i].TimeToLeader.MinNS),
			results.PassedRunsPhrase(p.sums[i].OK))
	}
	passed := func(i int) bool { return p.sums[i].OK > 0 }
	return []sweepSeries{
		{"p50", "time to leader p50", swP50Color, "", passed,
			func(i int) float64 { return p.yt(float64(p.sums[i].TimeToLeader.P50NS) / 1e6) }, ttl},
		{"p95", "p95 (≥ 20 runs)", swP95Color, "6 3",
			func(i int) bool { return passed(i) && results.PercentileShown("p95", p.sums[i].TimeToLeader.N) },
			func(i int) float64 { return p.yt(float64(p.sums[i].TimeToLeader.P95NS) / 1e6) }, ttl},
		{"det", "detection p50", swDetColor, "2 3",
			func(i int) bool { d := p.sums[i].Detection; return passed(i) && d != nil && d.N > 0 },
			func(i int) float64 { return p.yt(float64(p.sums[i].Detection.P50NS) / 1e6) },
			func(i int) string {
				return fmt.Sprintf("%s=%s: detection %s over %s", p.sw.Key, p.sw.Points[i].Label,
					results.PercentilesText(*p.sums[i].Detection, results.TimePercentiles), results.PassedRunsPhrase(p.sums[i].Detection.N))
			}},
		{"msgs", "messages (mean)", swMsgColor, "", passed,
			func(i int) float64 { return p.ym(p.sums[i].MessagesTotal.Mean) }, func(i int) string {
				return fmt.Sprintf("%s=%s: %s election messages per run, mean over %s (most %d)",
					p.sw.Key, p.sw.Points[i].Label, results.FormatMean(p.sums[i].MessagesTotal.Mean), results.PassedRunsPhrase(p.sums[i].OK), p.sums[i].MessagesTotal.Max)
			}},
	}
}

// segmentsWhere are the runs of consecutive points where has holds: a
// line breaks at the others.
func (p *sweepPlot) segmentsWhere(has func(i int) bool) [][]int {
	var segs [][]int
	var cur []int
	for i := range p.sums {
		if !has(i) {
			if len(cur) > 0 {
				segs = append(segs, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, i)
	}
	if len(cur) > 0 {
		segs = append(segs, cur)
	}
	return segs
}

// lines draw each series that has a point.
func (p *sweepPlot) lines(data *sweepSVG) {
	for _, s := range p.series() {
		for _, seg := range p.segmentsWhere(s.has) {
			line := sweepLine{Class: s.class, Color: s.color, Dash: s.dash}
			if len(seg) > 1 {
				var d strings.Builder
				for j, i := range seg {
					cmd := " L"
					if j == 0 {
						cmd = "M"
					}
					fmt.Fprintf(&d, "%s%s %s", cmd, f1(p.xs[i]), f1(s.y(i)))
				}
				line.Path = d.String()
			}
			for _, i := range seg {
				line.Markers = append(line.Markers, svgLabel{f1(p.xs[i]), f1(s.y(i)), s.text(i)})
			}
			data.Lines = append(data.Lines, line)
		}
	}
}

// gaps mark each point where no run passed across both panels.
func (p *sweepPlot) gaps(data *sweepSVG) {
	for i, s := range p.sums {
		if s.OK > 0 {
			continue
		}
		x := p.xs[i]
		what := fmt.Sprintf("%s=%s: %s", p.sw.Key, p.sw.Points[i].Label, swGapLabel)
		if s.Runs == 0 {
			what = fmt.Sprintf("%s=%s: no run", p.sw.Key, p.sw.Points[i].Label)
		}
		gap := sweepGap{Title: what, Label: svgLabel{f1(x), f1(swTop + swTopH/2), swGapLabel}}
		for _, top := range []struct{ y, h float64 }{{swTop, swTopH}, {swMsgTop, swMsgH}} {
			gap.Lines = append(gap.Lines, svgLine{f1(x), f1(x), f1(top.y), f1(top.y + top.h)})
		}
		data.Gaps = append(data.Gaps, gap)
	}
}

// legend places the items of what the plot draws, each as wide as its
// text needs.
func (p *sweepPlot) legend(data *sweepSVG) {
	x := swLeft
	add := func(it sweepLegendItem) {
		it.X, it.X2, it.CX, it.TextX = f1(x), f1(x+18), f1(x+9), f1(x+24)
		data.Legend = append(data.Legend, it)
		x += 24 + 6.2*float64(utf8.RuneCountInString(it.Text)) + 14
	}
	drawn := map[string]bool{}
	for _, l := range data.Lines {
		drawn[l.Class] = true
	}
	series := p.series()
	for _, s := range series[:3] {
		if drawn[s.class] || s.class == "p50" {
			add(sweepLegendItem{Kind: "line", Color: s.color, Dash: s.dash, Text: s.legend})
		}
	}
	add(sweepLegendItem{Kind: "dot", Color: swP50Color, Text: "a run"})
	add(sweepLegendItem{Kind: "band", Color: swBandColor, Text: "min to max"})
	add(sweepLegendItem{Kind: "line", Color: swMsgColor, Text: series[3].legend})
	data.LegendY, data.LegendRectY, data.LegendTextY = f1(swLegendY), f1(swLegendY-5), f1(swLegendY+4)
	if !p.anyPass {
		data.NoPassX = f1(x)
	}
}
