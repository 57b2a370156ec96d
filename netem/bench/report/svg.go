package report

import (
	_ "embed"
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"github.com/bullylab/bullylab/netem/bench/results"
)

// The report's figures are SVG written here, inline in the page: no
// script, no font or style sheet from elsewhere, so report.html opens the
// same from a CI artifact, a mail attachment or a laptop offline.

// typeColors are distinct in colour and in lightness, so the diagram
// survives a grey-scale print.
var typeColors = map[string]string{
	"ELECTION":    "#d35400",
	"ANSWER":      "#2471a3",
	"HALT":        "#c0392b",
	"HALT_ACK":    "#d98880",
	"REJECT":      "#7d3c98",
	"COORDINATOR": "#1e8449",
	"HEARTBEAT":   "#99a3a4",
	"JOIN":        "#148f77",
	"LEAVE":       "#5d6d7e",
	"MEMBERS":     "#9a7d0a",
	// The ring's: a run going round, then its leader announced.
	"RING_ELECTION": "#b9770e",
	"ELECTED":       "#0e6655",
}

const otherColor = "#515a5a"

func colorOf(typ string) string {
	if c, ok := typeColors[typ]; ok {
		return c
	}
	return otherColor
}

// esc escapes text for SVG text content and attribute values.
func esc(s string) string { return html.EscapeString(s) }

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// niceStep returns the smallest of 1, 2, 2.5 and 5 times a power of ten
// that is at least raw: tick spacing for an axis.
func niceStep(raw float64) float64 { return nice(raw, []float64{1, 2, 2.5, 5, 10}, true) }

// niceCount is niceStep without 2.5, for axes that count runs.
func niceCount(raw float64) float64 { return math.Max(1, nice(raw, []float64{1, 2, 5, 10}, true)) }

// niceBin returns the largest of 1, 2, 2.5 and 5 times a power of ten that
// is at most raw: a bin width that gives at least the bins asked for.
func niceBin(raw float64) float64 { return nice(raw, []float64{1, 2, 2.5, 5, 10}, false) }

func nice(raw float64, mults []float64, up bool) float64 {
	if !(raw > 0) || math.IsInf(raw, 0) {
		return 1
	}
	exp := math.Pow(10, math.Floor(math.Log10(raw)))
	if up {
		for _, m := range mults {
			if m*exp >= raw*(1-1e-9) {
				return m * exp
			}
		}
		return 10 * exp
	}
	best := exp
	for _, m := range mults {
		if m*exp <= raw*(1+1e-9) {
			best = m * exp
		}
	}
	return best
}

// fmtTick prints a tick value with no more decimals than its step needs.
func fmtTick(v, step float64) string {
	dec := 0
	for s := step; s < 1 && dec < 6; s *= 10 {
		dec++
	}
	if math.Abs(step*math.Pow(10, float64(dec))-math.Round(step*math.Pow(10, float64(dec)))) > 1e-9 {
		dec++
	}
	return strconv.FormatFloat(v, 'f', dec, 64)
}

// Layout of the distribution plot.
const (
	distW, distH                             = 860.0, 330.0
	distLeft, distRight, distTop, distBottom = 58.0, 64.0, 44.0, 62.0
	distPlotW, distPlotH                     = distW - distLeft - distRight, distH - distTop - distBottom
	distBarColor, distCDFColor, distPctColor = "#5dade2", "#1b2631", "#922b21"
)

//go:embed distribution.svg.tmpl
var distributionTemplate string

var distributionTmpl = svgTemplate("distribution", distributionTemplate)

// svgTemplate parses one of this package's SVG templates, which escape
// their text with esc.
func svgTemplate(name, text string) *template.Template {
	return template.Must(template.New(name).Funcs(template.FuncMap{"esc": esc}).Parse(text))
}

// executeSVG draws data with t: both are this package's, so an error is a
// bug.
func executeSVG(t *template.Template, data any) string {
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		panic(err)
	}
	return b.String()
}

// DistributionSVG draws times to leader (nanoseconds) as a histogram of
// runs with the cumulative distribution over it, the percentiles the runs
// support and the max marked, and every run as a tick under the axis. The
// time axis starts at zero or, for runs far from it, at a round floor
// with a least span (distAxis), which its title says.
func DistributionSVG(ns []int64, title string) string {
	data := distSVG{W: distW, H: distH, Title: title, BarColor: distBarColor, CDFColor: distCDFColor, PctColor: distPctColor}
	if len(ns) == 0 {
		data.Empty, data.MidX, data.MidY = true, distW/2, distH/2
	} else {
		d := newDistPlot(ns)
		d.axes(&data)
		d.bars(&data)
		d.runs(&data)
		d.cdf(&data)
		d.percentiles(&data)
	}
	return executeSVG(distributionTmpl, data)
}

// distSVG is what distribution.svg.tmpl draws, its numbers formatted.
type distSVG struct {
	W, H                         float64
	Title                        string
	BarColor, CDFColor, PctColor string
	// Empty, with no run to plot, says so at MidX, MidY.
	Empty      bool
	MidX, MidY float64
	// Grid are the runs axis' grid lines and their labels, XTicks the
	// time axis' ticks and theirs, Shares the cumulative share's labels.
	Grid, XTicks []svgTick
	Shares       []svgLabel
	Axes         []svgLine
	// TimeLabel and ShareLabel place the axes' titles, RunsLabelY the
	// runs axis' one.
	TimeLabel, ShareLabel svgLabel
	RunsLabelY            string
	Bars                  []distBar
	Runs                  []svgLine
	CDF                   string // the path's d
	Percentiles           []distPct
}

type svgLine struct{ X1, X2, Y1, Y2 string }

type svgLabel struct{ X, Y, Text string }

// svgTick is a line with its label.
type svgTick struct {
	svgLine
	Label svgLabel
}

// distBar is a histogram bar: Runs from From to To.
type distBar struct {
	X, Y, W, H, From, To string
	Runs                 int
}

// distPct is a percentile's line and its label.
type distPct struct {
	Line   svgLine
	Label  svgLabel
	Anchor string
}

// distPlot is the distribution plot's data binned and its scales.
type distPlot struct {
	ms          []float64 // times in milliseconds, sorted
	start, end  float64   // of the time axis, on bin edges
	width       float64   // of a bin
	counts      []int     // runs by bin
	yStep, yMax float64   // of the runs axis
}

// Bounds of the distribution plot's time axis (distAxis).
const (
	// distMinSpan is the least span of the time axis, as a share of the
	// slowest run: runs 3.5 ms apart at 730 ms are drawn close together,
	// not across the whole width as if they were far apart.
	distMinSpan = 0.2
	// distZeroShare: when the fastest run is within this share of the
	// slowest from zero, the axis starts at zero.
	distZeroShare = 0.5
)

// distAxis is the range of the time axis for runs from lo to hi ms: from
// zero when lo is near it (distZeroShare), else from a round floor below
// lo with at least distMinSpan of hi (and 1 ms) up to hi, so that a small
// spread looks small.
func distAxis(lo, hi float64) (from, to float64) {
	minSpan := math.Max(hi*distMinSpan, 1)
	if lo <= hi*distZeroShare {
		return 0, math.Max(hi, minSpan)
	}
	from = hi - math.Max(hi-lo, minSpan)
	step := niceStep((hi - from) / 5)
	from = math.Floor(from/step) * step
	if from < 0 {
		from = 0
	}
	return from, math.Max(hi, from+minSpan)
}

// newDistPlot bins ns, which holds at least one time.
func newDistPlot(ns []int64) *distPlot {
	ms := make([]float64, len(ns))
	for i, v := range ns {
		ms[i] = float64(v) / 1e6
	}
	slices.Sort(ms)
	n := len(ms)
	lo, hi := distAxis(ms[0], ms[n-1])
	// About two bins per square root of the runs: 11 for 30 runs.
	bins := min(max(int(math.Ceil(2*math.Sqrt(float64(n)))), 6), 40)
	width := niceBin((hi - lo) / float64(bins))
	start := math.Floor(lo/width) * width
	// Here and on the axes, loops count steps rather than add them: at
	// absurd magnitudes (a corrupt file) adding a step to a float may not
	// change it.
	nb := min(max(int(math.Ceil((hi-start)/width-1e-9)), 1), 200)
	d := &distPlot{ms: ms, start: start, end: start + float64(nb)*width, width: width, counts: make([]int, nb)}
	for _, v := range ms {
		d.counts[min(max(int((v-start)/width), 0), nb-1)]++
	}
	maxCount := slices.Max(d.counts)
	d.yStep = niceCount(float64(maxCount) / 5)
	d.yMax = math.Ceil(float64(maxCount)/d.yStep) * d.yStep
	return d
}

// x is where a time falls; yc where a count of runs does, and yp a share
// of them.
func (d *distPlot) x(v float64) float64 { return distLeft + (v-d.start)/(d.end-d.start)*distPlotW }

func (d *distPlot) yc(c float64) float64 { return distTop + distPlotH - c/d.yMax*distPlotH }

func (d *distPlot) yp(p float64) float64 { return distTop + distPlotH - p*distPlotH }

// axes are the grid, the axes with their ticks and the labels: runs on
// the left, cumulative share on the right, time below.
func (d *distPlot) axes(data *distSVG) {
	for i := 0; i <= 20 && float64(i)*d.yStep <= d.yMax+1e-9; i++ {
		c := float64(i) * d.yStep
		data.Grid = append(data.Grid, svgTick{svgLine{f1(distLeft), f1(distLeft + distPlotW), f1(d.yc(c)), f1(d.yc(c))},
			svgLabel{f1(distLeft - 6), f1(d.yc(c) + 4), fmtTick(c, d.yStep)}})
	}
	xStep := niceStep((d.end - d.start) / 7)
	first := math.Ceil(d.start/xStep) * xStep
	for i := 0; i <= 20 && first+float64(i)*xStep <= d.end+1e-9; i++ {
		v := first + float64(i)*xStep
		data.XTicks = append(data.XTicks, svgTick{svgLine{f1(d.x(v)), f1(d.x(v)), f1(distTop + distPlotH), f1(distTop + distPlotH + 5)},
			svgLabel{f1(d.x(v)), f1(distTop + distPlotH + 28), fmtTick(v, xStep)}})
	}
	for _, p := range []float64{0, .25, .5, .75, 1} {
		data.Shares = append(data.Shares, svgLabel{f1(distLeft + distPlotW + 6), f1(d.yp(p) + 4), strconv.Itoa(int(p * 100))})
	}
	data.Axes = []svgLine{
		{f1(distLeft), f1(distLeft + distPlotW), f1(distTop + distPlotH), f1(distTop + distPlotH)},
		{f1(distLeft), f1(distLeft), f1(distTop), f1(distTop + distPlotH)},
		{f1(distLeft + distPlotW), f1(distLeft + distPlotW), f1(distTop), f1(distTop + distPlotH)},
	}
	label := "time to leader (ms, the axis from zero)"
	if d.start > 0 {
		label = "time to leader (ms; the axis starts at " + fmtTick(d.start, xStep) + ", not at zero)"
	}
	data.TimeLabel = svgLabel{X: f1(distLeft + distPlotW/2), Y: f1(distH - 10), Text: label}
	data.RunsLabelY = f1(distTop + distPlotH/2)
	data.ShareLabel = svgLabel{X: f1(distW - 12), Y: f1(distTop + distPlotH/2)}
}

// bars are the histogram, each bar with its range and count as a tooltip.
func (d *distPlot) bars(data *distSVG) {
	for i, c := range d.counts {
		if c == 0 {
			continue
		}
		lo, hi := d.start+float64(i)*d.width, d.start+float64(i+1)*d.width
		x0, x1 := d.x(lo), d.x(hi)
		data.Bars = append(data.Bars, distBar{X: f1(x0), Y: f1(d.yc(float64(c))), W: f1(x1 - x0), H: f1(d.yc(0) - d.yc(float64(c))),
			From: fmtTick(lo, d.width), To: fmtTick(hi, d.width), Runs: c})
	}
}

// runs are every run as a tick under the axis, so that few runs still
// show.
func (d *distPlot) runs(data *distSVG) {
	for _, v := range d.ms {
		data.Runs = append(data.Runs, svgLine{f1(d.x(v)), f1(d.x(v)), f1(distTop + distPlotH + 7), f1(distTop + distPlotH + 15)})
	}
}

// cdf is the empirical cumulative distribution as a step line.
func (d *distPlot) cdf(data *distSVG) {
	var path strings.Builder
	fmt.Fprintf(&path, "M%s %s", f1(d.x(d.start)), f1(d.yp(0)))
	for i, v := range d.ms {
		fmt.Fprintf(&path, " H%s V%s", f1(d.x(v)), f1(d.yp(float64(i+1)/float64(len(d.ms)))))
	}
	fmt.Fprintf(&path, " H%s", f1(d.x(d.end)))
	data.CDF = path.String()
}

// percentiles mark the p50, p95 and p99 that the runs support
// (results.PercentileShown) and the max, labelled above the plot; a label
// that would touch the one before goes a row higher, and labels near the
// right edge end at their line instead of centring on it.
func (d *distPlot) percentiles(data *distSVG) {
	lastX, row := math.Inf(-1), 0
	for _, p := range results.PercentilesOf(results.TimePercentiles, len(d.ms)) {
		v := d.ms[len(d.ms)-1]
		if p.Name != "max" {
			pv, _ := strconv.ParseFloat(strings.TrimPrefix(p.Name, "p"), 64)
			v = results.Percentile(d.ms, pv)
		}
		px := d.x(v)
		if px-lastX < 70 {
			row++
		} else {
			row = 0
		}
		lastX = px
		ly := distTop - 8 - float64(row)*13
		anchor := "middle"
		if px > distLeft+distPlotW-36 {
			anchor = "end"
		}
		data.Percentiles = append(data.Percentiles, distPct{Line: svgLine{f1(px), f1(px), f1(ly + 3), f1(distTop + distPlotH)},
			Label: svgLabel{f1(px), f1(ly), p.Name + " " + results.FormatNS(int64(v*1e6))}, Anchor: anchor})
	}
}
