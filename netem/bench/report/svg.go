package report

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
	"strings"

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

// DistributionSVG draws times to leader (nanoseconds) as a histogram of
// runs with the cumulative distribution over it, the p50, p95 and p99
// marked, and every run as a tick under the axis.
func DistributionSVG(ns []int64, title string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="dist" width="%g" height="%g" viewBox="0 0 %g %g" role="img" aria-label="%s">`, distW, distH, distW, distH, esc(title))
	fmt.Fprintf(&b, `<title>%s</title>`, esc(title))
	if len(ns) == 0 {
		fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle" class="muted">no run passed: nothing to plot</text></svg>`, distW/2, distH/2)
		return b.String()
	}
	d := newDistPlot(ns)
	d.drawAxes(&b)
	d.drawBars(&b)
	d.drawRuns(&b)
	d.drawCDF(&b)
	d.drawPercentiles(&b)
	b.WriteString(`</svg>`)
	return b.String()
}

// distPlot is the distribution plot's data binned and its scales.
type distPlot struct {
	ms          []float64 // times in milliseconds, sorted
	start, end  float64   // of the time axis, on bin edges
	width       float64   // of a bin
	counts      []int     // runs by bin
	yStep, yMax float64   // of the runs axis
}

// newDistPlot bins ns, which holds at least one time.
func newDistPlot(ns []int64) *distPlot {
	ms := make([]float64, len(ns))
	for i, v := range ns {
		ms[i] = float64(v) / 1e6
	}
	slices.Sort(ms)
	n := len(ms)
	lo, hi := ms[0], ms[n-1]
	if hi-lo < 1e-3 {
		lo, hi = lo-0.5, hi+0.5
	}
	// About two bins per square root of the runs: 11 for 30 runs.
	bins := min(max(int(math.Ceil(2*math.Sqrt(float64(n)))), 6), 40)
	width := niceBin((hi - lo) / float64(bins))
	start := math.Floor(lo/width) * width
	// Here and on the axes, loops count steps rather than add them: at
	// absurd magnitudes (a corrupt file) adding a step to a float may not
	// change it.
	nb := min(max(int(math.Floor((hi-start)/width))+1, 1), 200)
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

// drawAxes draws the grid, the axes with their ticks and the labels: runs
// on the left, cumulative share on the right, time below.
func (d *distPlot) drawAxes(b *strings.Builder) {
	for i := 0; i <= 20 && float64(i)*d.yStep <= d.yMax+1e-9; i++ {
		c := float64(i) * d.yStep
		fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" class="grid"/>`, f1(distLeft), f1(distLeft+distPlotW), f1(d.yc(c)), f1(d.yc(c)))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end" class="tick">%s</text>`, f1(distLeft-6), f1(d.yc(c)+4), fmtTick(c, d.yStep))
	}
	xStep := niceStep((d.end - d.start) / 7)
	first := math.Ceil(d.start/xStep) * xStep
	for i := 0; i <= 20 && first+float64(i)*xStep <= d.end+1e-9; i++ {
		v := first + float64(i)*xStep
		fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" class="axis"/>`, f1(d.x(v)), f1(d.x(v)), f1(distTop+distPlotH), f1(distTop+distPlotH+5))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" class="tick">%s</text>`, f1(d.x(v)), f1(distTop+distPlotH+28), fmtTick(v, xStep))
	}
	for _, p := range []float64{0, .25, .5, .75, 1} {
		fmt.Fprintf(b, `<text x="%s" y="%s" class="tick">%d%%</text>`, f1(distLeft+distPlotW+6), f1(d.yp(p)+4), int(p*100))
	}
	fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" class="axis"/>`, f1(distLeft), f1(distLeft+distPlotW), f1(distTop+distPlotH), f1(distTop+distPlotH))
	fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" class="axis"/>`, f1(distLeft), f1(distLeft), f1(distTop), f1(distTop+distPlotH))
	fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" class="axis"/>`, f1(distLeft+distPlotW), f1(distLeft+distPlotW), f1(distTop), f1(distTop+distPlotH))
	fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" class="label">time to leader (ms)</text>`, f1(distLeft+distPlotW/2), f1(distH-10))
	fmt.Fprintf(b, `<text transform="translate(16 %s) rotate(-90)" text-anchor="middle" class="label">runs</text>`, f1(distTop+distPlotH/2))
	fmt.Fprintf(b, `<text transform="translate(%s %s) rotate(90)" text-anchor="middle" class="label">cumulative share of runs</text>`, f1(distW-12), f1(distTop+distPlotH/2))
}

// drawBars draws the histogram, each bar with its range and count as a
// tooltip.
func (d *distPlot) drawBars(b *strings.Builder) {
	for i, c := range d.counts {
		if c == 0 {
			continue
		}
		lo, hi := d.start+float64(i)*d.width, d.start+float64(i+1)*d.width
		x0, x1 := d.x(lo), d.x(hi)
		fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s" fill-opacity="0.75" stroke="#fff"><title>%s–%s ms: %d runs</title></rect>`,
			f1(x0), f1(d.yc(float64(c))), f1(x1-x0), f1(d.yc(0)-d.yc(float64(c))), distBarColor,
			fmtTick(lo, d.width), fmtTick(hi, d.width), c)
	}
}

// drawRuns draws every run as a tick under the axis, so that few runs
// still show.
func (d *distPlot) drawRuns(b *strings.Builder) {
	for _, v := range d.ms {
		fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-opacity="0.6"/>`, f1(d.x(v)), f1(d.x(v)), f1(distTop+distPlotH+7), f1(distTop+distPlotH+15), distCDFColor)
	}
}

// drawCDF draws the empirical cumulative distribution as a step line.
func (d *distPlot) drawCDF(b *strings.Builder) {
	var path strings.Builder
	fmt.Fprintf(&path, "M%s %s", f1(d.x(d.start)), f1(d.yp(0)))
	for i, v := range d.ms {
		fmt.Fprintf(&path, " H%s V%s", f1(d.x(v)), f1(d.yp(float64(i+1)/float64(len(d.ms)))))
	}
	fmt.Fprintf(&path, " H%s", f1(d.x(d.end)))
	fmt.Fprintf(b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.8"/>`, path.String(), distCDFColor)
}

// drawPercentiles marks the p50, p95 and p99, labelled above the plot; a
// label that would touch the one before goes a row higher, and labels near
// the right edge end at their line instead of centring on it.
func (d *distPlot) drawPercentiles(b *strings.Builder) {
	lastX, row := math.Inf(-1), 0
	for _, p := range []float64{50, 95, 99} {
		v := results.Percentile(d.ms, p)
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
		fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-dasharray="4 3"/>`, f1(px), f1(px), f1(ly+3), f1(distTop+distPlotH), distPctColor)
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="%s" class="pct">p%g %s</text>`, f1(px), f1(ly), anchor, p, esc(results.FormatNS(int64(v*1e6))))
	}
}
