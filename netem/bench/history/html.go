package history

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
)

// Chart geometry, in SVG user units.
const (
	chartWidth  = 1100
	chartHeight = 360
	chartLeft   = 80
	chartRight  = 20
	chartTop    = 40
	chartBottom = 70
)

// WriteHTML writes the report as one self-contained page: per series a
// trend chart in inline SVG (each run a faint dot, each entry's value a
// point, each segment's median a dashed line, each change point a
// vertical line labelled with its commit) under its verdict.
func (r *Report) WriteHTML(w io.Writer) error {
	b := bufio.NewWriter(w)
	verdict := "no regression"
	if r.Regressed() {
		verdict = "regression"
	}
	fmt.Fprintf(b, `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>bullylab history: %s at %s</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 2em; }
p.verdict { margin: .2em 0; } p.regression { color: #b00020; font-weight: bold; }
svg { max-width: 100%%; height: auto; } svg text { font: 12px system-ui, sans-serif; fill: #333; }
</style></head><body>
<h1>Regression history: %s at %s</h1>
<p>%d entries in %s. Each faint dot is one run, each solid point an entry's value, dashed lines the medians of the
segments between change points; vertical lines mark change points (E-Divisive means, p &lt;= %g), labelled with the commit
that starts the new segment: red a rise of %s or more, green a fall, grey a smaller change.</p>
`, verdict, html.EscapeString(r.Newest), verdict, html.EscapeString(r.Newest), r.Entries, html.EscapeString(r.File),
		r.Detect.Significance, percent(r.MinEffect))
	for i := range r.Series {
		s := &r.Series[i]
		class := "verdict"
		if s.Verdict == VerdictRegression || s.Verdict == VerdictNoneOK {
			class += " regression"
		}
		fmt.Fprintf(b, "<h2>%s</h2>\n<p class=%q>%s</p>\n", html.EscapeString(s.Title()), class, html.EscapeString(strings.TrimPrefix(s.VerdictLine(r.MinEffect), s.Title()+": ")))
		s.writeSVG(b)
	}
	b.WriteString("</body></html>\n")
	return b.Flush()
}

func (s *Series) writeSVG(b *bufio.Writer) {
	n := len(s.Entries)
	plotW, plotH := float64(chartWidth-chartLeft-chartRight), float64(chartHeight-chartTop-chartBottom)
	step := plotW / float64(n)
	x := func(i int) float64 { return chartLeft + (float64(i)+0.5)*step }
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range s.Entries {
		for _, v := range s.Metric.Samples(&s.Entries[i]) {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	for _, v := range s.Values {
		lo, hi = min(lo, v), max(hi, v)
	}
	if math.IsInf(lo, 0) {
		lo, hi = 0, 1
	}
	ticks := niceTicks(lo, hi)
	lo, hi = min(lo, ticks[0]), max(hi, ticks[len(ticks)-1])
	if hi == lo {
		hi = lo + 1
	}
	y := func(v float64) float64 { return chartTop + plotH - (v-lo)/(hi-lo)*plotH }

	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label=%q>`+"\n",
		chartWidth, chartHeight, chartWidth, chartHeight, s.Title())
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%g" height="%g" fill="#fafafa" stroke="#ccc"/>`+"\n", chartLeft, chartTop, plotW, plotH)
	for _, t := range ticks {
		fmt.Fprintf(b, `<line x1="%d" x2="%g" y1="%.1f" y2="%.1f" stroke="#e4e4e4"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			chartLeft, chartLeft+plotW, y(t), y(t), chartLeft-6, y(t)+4, html.EscapeString(tickLabel(s.Metric.Format(t))))
	}
	labelEvery := max(1, int(math.Ceil(float64(n)/40)))
	for i := range s.Entries {
		if i%labelEvery != 0 && i != n-1 {
			continue
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="end" transform="rotate(-45 %.1f %d)">%s</text>`+"\n",
			x(i), chartTop+int(plotH)+14, x(i), chartTop+int(plotH)+14, html.EscapeString(clip(s.Entries[i].Commit, 12)))
	}
	// Segment medians, between change points.
	from := 0
	for k := 0; k <= len(s.Shifts); k++ {
		to := len(s.Values)
		if k < len(s.Shifts) {
			to = s.Shifts[k].Index
		}
		if to > from {
			m := median(s.Values[from:to])
			fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#1f5fa8" stroke-width="1.5" stroke-dasharray="6 4" opacity="0.7"/>`+"\n",
				x(s.Points[from])-step*0.4, x(s.Points[to-1])+step*0.4, y(m), y(m))
		}
		from = to
	}
	for i := range s.Entries {
		samples := s.Metric.Samples(&s.Entries[i])
		for j, v := range samples {
			// Spread the runs across a third of the entry's width so that
			// equal values stay apart.
			dx := 0.0
			if len(samples) > 1 {
				dx = (float64(j)/float64(len(samples)-1) - 0.5) * step * 0.35
			}
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="#1f5fa8" opacity="0.22"/>`+"\n", x(i)+dx, y(v))
		}
	}
	var path []byte
	for k, i := range s.Points {
		cmd := "L"
		if k == 0 {
			cmd = "M"
		}
		path = fmt.Appendf(path, "%s%.1f %.1f ", cmd, x(i), y(s.Values[k]))
	}
	if len(path) > 0 {
		fmt.Fprintf(b, `<path d="%s" fill="none" stroke="#555" stroke-width="1"/>`+"\n", path)
	}
	for k, i := range s.Points {
		e := &s.Entries[i]
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="4.5" fill="#0b3d75"><title>%s %s: %s (%d/%d runs passed)</title></circle>`+"\n",
			x(i), y(s.Values[k]), html.EscapeString(e.Commit), e.Time.UTC().Format("2006-01-02 15:04:05"), s.Metric.Format(s.Values[k]), e.OK, e.Runs)
	}
	for i := range s.Entries {
		if s.Entries[i].OK == 0 {
			fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#b00020">✕</text>`+"\n", x(i), chartTop+14)
		}
	}
	for k := range s.Shifts {
		sh := &s.Shifts[k]
		color := "#888"
		switch {
		case sh.Effect && sh.Worse():
			color = "#c62828"
		case sh.Effect:
			color = "#2e7d32"
		}
		cx := x(s.Points[sh.Index]) - step/2
		if sh.Index > 0 {
			cx = (x(s.Points[sh.Index-1]) + x(s.Points[sh.Index])) / 2
		}
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%g" stroke="%s" stroke-width="2"/>`+"\n", cx, cx, chartTop-4, chartTop+plotH, color)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" fill="%s" style="font-weight:bold">%s %s</text>`+"\n",
			cx+4, chartTop-8, color, html.EscapeString(clip(sh.Commit, 12)), signedPercent(sh.Relative))
	}
	b.WriteString("</svg>\n")
}

// tickLabel drops the decimals of a round tick: "450ms", not "450.0ms".
func tickLabel(s string) string {
	for _, zeros := range []string{".00", ".0"} {
		if i := strings.Index(s, zeros); i >= 0 && strings.IndexAny(s[i+len(zeros):], "0123456789") < 0 {
			return s[:i] + s[i+len(zeros):]
		}
	}
	return s
}

// niceTicks are about five round values spanning lo..hi.
func niceTicks(lo, hi float64) []float64 {
	if hi <= lo {
		d := math.Max(math.Abs(lo)*0.05, 1)
		lo, hi = lo-d, hi+d
	}
	raw := (hi - lo) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, f := range []float64{1, 2, 2.5, 5, 10} {
		if f*mag >= raw {
			step = f * mag
			break
		}
	}
	var out []float64
	for v := math.Floor(lo/step) * step; v <= hi+step*0.999; v += step {
		out = append(out, v)
	}
	return slices.Compact(out)
}

// clip shortens a commit label to n characters, as a short hash.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}
