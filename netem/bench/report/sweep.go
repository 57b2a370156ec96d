package report

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/scenario"
)

// Sweep is a family of scenarios that differ in one numeric label: the
// points of latency-sweep (delay=...) or of loss (loss=...), or of any
// scenario file run with one label varied. The report draws it as curves
// against the swept value.
type Sweep struct {
	Name string // the scenarios' name
	Key  string // the label that varies
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
// with the same label keys, all but one of them equal, the one left
// numeric (SweepValue) in one unit and different in each. Families come in
// the order of their first scenario, points by value.
func Sweeps(scs []results.ScenarioResult) []Sweep {
	var names []string
	byName := map[string][]*results.ScenarioResult{}
	for i := range scs {
		sc := &scs[i]
		if _, ok := byName[sc.Name]; !ok {
			names = append(names, sc.Name)
		}
		byName[sc.Name] = append(byName[sc.Name], sc)
	}
	var out []Sweep
	for _, name := range names {
		if sw, ok := sweepOf(byName[name]); ok {
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
	swBandColor          = "#5dade2"
	swMsgColor           = "#1e8449"
	swGapColor           = "#aab7b8"
	swGapLabel           = "no run passed"
)

// SweepSVG draws a sweep: per point the time to leader of the runs that
// passed (p50 and p95 lines over a min-max band) and below it the mean
// election messages per run, each point's runs under the axis. A point
// where no run passed is a gap in the lines, marked as such, not a zero.
func SweepSVG(sw Sweep) string {
	var b strings.Builder
	title := "time to leader and messages per election of " + sw.Title()
	fmt.Fprintf(&b, `<svg class="sweep" width="%g" height="%g" viewBox="0 0 %g %g" role="img" aria-label="%s">`, swW, swH, swW, swH, esc(title))
	fmt.Fprintf(&b, `<title>%s</title>`, esc(title))
	p := newSweepPlot(sw)
	p.drawAxes(&b)
	p.drawBand(&b)
	p.drawLines(&b)
	p.drawGaps(&b)
	p.drawLegend(&b)
	b.WriteString(`</svg>`)
	return b.String()
}

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

func (p *sweepPlot) drawAxes(b *strings.Builder) {
	hline := func(x0, x1, y float64, class string) {
		fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" class="%s"/>`, f1(x0), f1(x1), f1(y), f1(y), class)
	}
	vline := func(x, y0, y1 float64, class string) {
		fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" class="%s"/>`, f1(x), f1(x), f1(y0), f1(y1), class)
	}
	for i := 0; i <= 20 && float64(i)*p.tStep <= p.tMax+1e-9; i++ {
		v := float64(i) * p.tStep
		hline(swLeft, swLeft+swPlotW, p.yt(v), "grid")
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end" class="tick">%s</text>`, f1(swLeft-6), f1(p.yt(v)+4), fmtTick(v, p.tStep))
	}
	for i := 0; i <= 20 && float64(i)*p.mStep <= p.mMax+1e-9; i++ {
		v := float64(i) * p.mStep
		hline(swLeft, swLeft+swPlotW, p.ym(v), "grid")
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end" class="tick">%s</text>`, f1(swLeft-6), f1(p.ym(v)+4), fmtTick(v, p.mStep))
	}
	for _, top := range []struct{ y, h float64 }{{swTop, swTopH}, {swMsgTop, swMsgH}} {
		hline(swLeft, swLeft+swPlotW, top.y+top.h, "axis")
		vline(swLeft, top.y, top.y+top.h, "axis")
	}
	axisY := swMsgTop + swMsgH
	for i, pt := range p.sw.Points {
		x := p.xs[i]
		vline(x, swTop, swTop+swTopH, "grid")
		vline(x, swMsgTop, axisY, "grid")
		vline(x, axisY, axisY+5, "axis")
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" class="tick">%s</text>`, f1(x), f1(axisY+18), esc(p.unitText(pt)))
		s := p.sums[i]
		runs := "n=" + strconv.Itoa(s.OK)
		if s.OK != s.Runs {
			runs += " of " + strconv.Itoa(s.Runs)
		}
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" class="tick runs">%s</text>`, f1(x), f1(axisY+32), esc(runs))
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
	fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" class="label">%s</text>`, f1(swLeft+swPlotW/2), f1(swH-8), esc(xTitle))
	fmt.Fprintf(b, `<text transform="translate(%s %s) rotate(-90)" text-anchor="middle" class="label">time to leader (ms)</text>`, f1(16), f1(swTop+swTopH/2))
	fmt.Fprintf(b, `<text transform="translate(%s %s) rotate(-90)" text-anchor="middle" class="label">messages</text>`, f1(16), f1(swMsgTop+swMsgH/2))
	fmt.Fprintf(b, `<text x="%s" y="%s" class="label">mean election messages per run that passed</text>`, f1(swLeft+6), f1(swMsgTop+-8))
}

// segments are the runs of consecutive points where some run passed: the
// lines break at the others.
func (p *sweepPlot) segments() [][]int {
	var segs [][]int
	var cur []int
	for i, s := range p.sums {
		if s.OK == 0 {
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

func (p *sweepPlot) drawBand(b *strings.Builder) {
	for _, seg := range p.segments() {
		if len(seg) == 1 {
			i := seg[0]
			d := p.sums[i].TimeToLeader
			y0, y1 := p.yt(float64(d.MaxNS)/1e6), p.yt(float64(d.MinNS)/1e6)
			fmt.Fprintf(b, `<rect class="band" x="%s" y="%s" width="%s" height="%s" fill="%s" fill-opacity="0.3"/>`,
				f1(p.xs[i]-5.0), f1(y0), f1(2*5.0), f1(math.Max(y1-y0, 0.5)), swBandColor)
			continue
		}
		var pts []string
		for _, i := range seg {
			pts = append(pts, f1(p.xs[i])+","+f1(p.yt(float64(p.sums[i].TimeToLeader.MaxNS)/1e6)))
		}
		for _, i := range slices.Backward(seg) {
			pts = append(pts, f1(p.xs[i])+","+f1(p.yt(float64(p.sums[i].TimeToLeader.MinNS)/1e6)))
		}
		fmt.Fprintf(b, `<polygon class="band" points="%s" fill="%s" fill-opacity="0.3"/>`, strings.Join(pts, " "), swBandColor)
	}
}

func (p *sweepPlot) drawLines(b *strings.Builder) {
	type series struct {
		class, color, dash string
		y                  func(i int) float64
		text               func(i int) string
	}
	ttl := func(i int) string {
		d := p.sums[i].TimeToLeader
		return fmt.Sprintf("%s=%s: time to leader p50 %s, p95 %s, min %s, max %s over %s",
			p.sw.Key, p.sw.Points[i].Label, results.FormatNS(d.P50NS), results.FormatNS(d.P95NS), results.FormatNS(d.MinNS), results.FormatNS(d.MaxNS), passedRuns(p.sums[i].OK))
	}
	all := []series{
		{"p50", swP50Color, "", func(i int) float64 { return p.yt(float64(p.sums[i].TimeToLeader.P50NS) / 1e6) }, ttl},
		{"p95", swP95Color, ` stroke-dasharray="6 3"`, func(i int) float64 { return p.yt(float64(p.sums[i].TimeToLeader.P95NS) / 1e6) }, ttl},
		{"msgs", swMsgColor, "", func(i int) float64 { return p.ym(p.sums[i].MessagesTotal.Mean) }, func(i int) string {
			return fmt.Sprintf("%s=%s: %s election messages per run, mean over %s (most %d)",
				p.sw.Key, p.sw.Points[i].Label, results.FormatMean(p.sums[i].MessagesTotal.Mean), passedRuns(p.sums[i].OK), p.sums[i].MessagesTotal.Max)
		}},
	}
	for _, s := range all {
		for _, seg := range p.segments() {
			if len(seg) > 1 {
				var d strings.Builder
				for j, i := range seg {
					cmd := " L"
					if j == 0 {
						cmd = "M"
					}
					fmt.Fprintf(&d, "%s%s %s", cmd, f1(p.xs[i]), f1(s.y(i)))
				}
				fmt.Fprintf(b, `<path class="%s" d="%s" fill="none" stroke="%s" stroke-width="1.8"%s/>`, s.class, d.String(), s.color, s.dash)
			}
			for _, i := range seg {
				fmt.Fprintf(b, `<circle class="%s" cx="%s" cy="%s" r="%g" fill="%s"><title>%s</title></circle>`,
					s.class, f1(p.xs[i]), f1(s.y(i)), swMarkerR, s.color, esc(s.text(i)))
			}
		}
	}
}

// drawGaps marks each point where no run passed across both panels.
func (p *sweepPlot) drawGaps(b *strings.Builder) {
	for i, s := range p.sums {
		if s.OK > 0 {
			continue
		}
		x := p.xs[i]
		what := fmt.Sprintf("%s=%s: %s", p.sw.Key, p.sw.Points[i].Label, swGapLabel)
		if s.Runs == 0 {
			what = fmt.Sprintf("%s=%s: no run", p.sw.Key, p.sw.Points[i].Label)
		}
		fmt.Fprintf(b, `<g class="gap"><title>%s</title>`, esc(what))
		for _, top := range []struct{ y, h float64 }{{swTop, swTopH}, {swMsgTop, swMsgH}} {
			fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-dasharray="3 3"/>`, f1(x), f1(x), f1(top.y), f1(top.y+top.h), swGapColor)
		}
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" class="tick">%s</text></g>`, f1(x), f1(swTop+swTopH/2), swGapLabel)
	}
}

func (p *sweepPlot) drawLegend(b *strings.Builder) {
	x := swLeft
	item := func(mark, text string, w float64) {
		b.WriteString(mark)
		fmt.Fprintf(b, `<text x="%s" y="%s" class="tick">%s</text>`, f1(x+24), f1(swLegendY+4), esc(text))
		x += w
	}
	item(fmt.Sprintf(`<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-width="1.8"/>`, f1(x), f1(x+18), f1(swLegendY), f1(swLegendY), swP50Color), "time to leader p50", 150)
	item(fmt.Sprintf(`<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-width="1.8" stroke-dasharray="6 3"/>`, f1(x), f1(x+18), f1(swLegendY), f1(swLegendY), swP95Color), "p95", 70)
	item(fmt.Sprintf(`<rect x="%s" y="%s" width="18" height="10" fill="%s" fill-opacity="0.3"/>`, f1(x), f1(swLegendY-5), swBandColor), "min to max", 110)
	item(fmt.Sprintf(`<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-width="1.8"/>`, f1(x), f1(x+18), f1(swLegendY), f1(swLegendY), swMsgColor), "messages per election (mean)", 230)
	if !p.anyPass {
		fmt.Fprintf(b, `<text x="%s" y="%s" class="tick">no point has a run that passed</text>`, f1(x), f1(swLegendY+4))
	}
}
