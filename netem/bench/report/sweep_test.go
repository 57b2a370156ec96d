package report_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
)

// TestSweepGrouping: scenarios of one name that differ in one numeric
// label are a sweep, ordered by value; the rest are not.
func TestSweepGrouping(t *testing.T) {
	scs := []results.ScenarioResult{
		resultstest.ScenarioOfTimes("leader-crash", nil, 0, 700),
		resultstest.ScenarioOfTimes("latency-sweep", resultstest.Labels("delay", "100ms"), 0, 1),
		resultstest.ScenarioOfTimes("latency-sweep", resultstest.Labels("delay", "1s"), 0, 1),
		resultstest.ScenarioOfTimes("latency-sweep", resultstest.Labels("delay", "10ms"), 0, 1),
		resultstest.ScenarioOfTimes("latency-sweep", resultstest.Labels("delay", "0s"), 0, 1),
		resultstest.ScenarioOfTimes("cascade", resultstest.Labels("k", "3"), 0, 1), // one point
		resultstest.ScenarioOfTimes("loss", resultstest.Labels("loss", "20"), 0, 1),
		resultstest.ScenarioOfTimes("loss", resultstest.Labels("loss", "10"), 0, 1),
		resultstest.ScenarioOfTimes("loss", resultstest.Labels("loss", "1"), 0, 1),
		resultstest.ScenarioOfTimes("loss", resultstest.Labels("loss", "5"), 0, 1),
		resultstest.ScenarioOfTimes("loss", resultstest.Labels("loss", "2.5"), 0, 1),
		// Two labels vary: no one axis.
		resultstest.ScenarioOfTimes("two", resultstest.Labels("delay", "10ms", "loss", "1"), 0, 1),
		resultstest.ScenarioOfTimes("two", resultstest.Labels("delay", "20ms", "loss", "2"), 0, 1),
		// One varies, the other is fixed.
		resultstest.ScenarioOfTimes("fixed", resultstest.Labels("delay", "20ms", "variant", "a"), 0, 1),
		resultstest.ScenarioOfTimes("fixed", resultstest.Labels("delay", "0", "variant", "a"), 0, 1),
		// Not numbers, or not one unit, or not the same keys, or a repeat.
		resultstest.ScenarioOfTimes("words", resultstest.Labels("mode", "fast"), 0, 1),
		resultstest.ScenarioOfTimes("words", resultstest.Labels("mode", "slow"), 0, 1),
		resultstest.ScenarioOfTimes("mixed", resultstest.Labels("x", "10ms"), 0, 1),
		resultstest.ScenarioOfTimes("mixed", resultstest.Labels("x", "5"), 0, 1),
		resultstest.ScenarioOfTimes("keys", resultstest.Labels("x", "1"), 0, 1),
		resultstest.ScenarioOfTimes("keys", resultstest.Labels("y", "2"), 0, 1),
		resultstest.ScenarioOfTimes("repeat", resultstest.Labels("x", "1"), 0, 1),
		resultstest.ScenarioOfTimes("repeat", resultstest.Labels("x", "1.0"), 0, 1),
		resultstest.ScenarioOfTimes("unlabelled", nil, 0, 1),
		resultstest.ScenarioOfTimes("unlabelled", nil, 0, 1),
	}
	sws := report.Sweeps(scs)
	type got struct {
		Title, Key, Unit string
		Labels           []string
		Values           []float64
	}
	var gots []got
	for _, sw := range sws {
		g := got{Title: sw.Title(), Key: sw.Key, Unit: sw.Unit}
		for _, p := range sw.Points {
			g.Labels = append(g.Labels, p.Label)
			g.Values = append(g.Values, p.Value)
			if p.Scenario.Labels[sw.Key] != p.Label || p.Scenario.Name != sw.Name {
				t.Errorf("%s: point %s is scenario %s", sw.Title(), p.Label, p.Scenario.Key())
			}
		}
		gots = append(gots, g)
	}
	want := []got{
		{"latency-sweep by delay", "delay", "ms", []string{"0s", "10ms", "100ms", "1s"}, []float64{0, 10, 100, 1000}},
		{"loss by loss", "loss", "%", []string{"1", "2.5", "5", "10", "20"}, []float64{1, 2.5, 5, 10, 20}},
		{"fixed variant=a by delay", "delay", "ms", []string{"0", "20ms"}, []float64{0, 20}},
	}
	if !reflect.DeepEqual(gots, want) {
		t.Errorf("sweeps\n%+v\nwant\n%+v", gots, want)
	}

	for _, tc := range []struct {
		key, v string
		value  float64
		unit   string
		ok     bool
	}{
		{"delay", "1.5s", 1500, "ms", true},
		{"delay", "250µs", 0.25, "ms", true},
		{"loss", "0.5", 0.5, "%", true},
		{"x", "7%", 7, "%", true},
		{"k", "3", 3, "", true},
		{"k", "0", 0, "", true},
		{"x", "NaN", 0, "", false},
		{"x", "fast", 0, "", false},
	} {
		v, u, ok := report.SweepValue(tc.key, tc.v)
		if v != tc.value || u != tc.unit || ok != tc.ok {
			t.Errorf("SweepValue(%q, %q) = %v %q %v, want %v %q %v", tc.key, tc.v, v, u, ok, tc.value, tc.unit, tc.ok)
		}
	}
}

// svgElement is what the tests look at in an element of an SVG.
type svgElement struct {
	Name  string
	Class string
	Text  string
}

// parseSVG checks that s is well-formed XML and lists its elements.
func parseSVG(t *testing.T, s string) []svgElement {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(s))
	var els []svgElement
	var open []int
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, s)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := svgElement{Name: tok.Name.Local}
			for _, a := range tok.Attr {
				if a.Name.Local == "class" {
					e.Class = a.Value
				}
			}
			open = append(open, len(els))
			els = append(els, e)
		case xml.EndElement:
			open = open[:len(open)-1]
		case xml.CharData:
			if len(open) > 0 {
				els[open[len(open)-1]].Text += string(tok)
			}
		}
	}
	if len(els) == 0 || els[0].Name != "svg" {
		t.Fatalf("no svg element: %s", s)
	}
	return els
}

func countEls(els []svgElement, name, class string) int {
	n := 0
	for _, e := range els {
		if e.Name == name && e.Class == class {
			n++
		}
	}
	return n
}

func textsOf(els []svgElement, class string) []string {
	var out []string
	for _, e := range els {
		if e.Name == "text" && e.Class == class {
			out = append(out, e.Text)
		}
	}
	return out
}

// TestSweepSVG: the plot is well-formed, has a point per swept value
// where some run passed, a gap (not a zero) where none did, the values in
// order with their units and the runs each point rests on.
func TestSweepSVG(t *testing.T) {
	sws := report.Sweeps(resultstest.SweepSample().Scenarios)
	if len(sws) != 2 {
		t.Fatalf("%d sweeps, want latency-sweep and loss", len(sws))
	}
	lat, loss := sws[0], sws[1]
	s := report.SweepSVG(lat)
	if s != report.SweepSVG(lat) {
		t.Error("two drawings of one sweep differ")
	}
	els := parseSVG(t, s)
	// 0s, 10ms and 100ms have runs that passed; 50ms none.
	for _, class := range []string{"p50", "msgs"} {
		if n := countEls(els, "circle", class); n != 3 {
			t.Errorf("%d %s points, want 3 (one per value with a run that passed)", n, class)
		}
	}
	// No point rests on 20 runs: no p95 (results.PercentileShown); no
	// run measured a detection: no detection line. Every run that passed
	// is a dot: 3 + 2 + 2.
	for class, want := range map[string]int{"p95": 0, "det": 0, "run": 7} {
		if n := countEls(els, "circle", class); n != want {
			t.Errorf("%d %s circles, want %d", n, class, want)
		}
	}
	if strings.Contains(s, ">p95") {
		t.Error("the legend names a p95 the plot does not draw")
	}
	if n := countEls(els, "g", "gap"); n != 1 {
		t.Errorf("%d gaps, want 1 (50ms)", n)
	}
	// The line breaks at the gap: 0s-10ms is one path, 100ms stands alone.
	if n := countEls(els, "path", "p50"); n != 1 {
		t.Errorf("%d p50 paths, want 1", n)
	}
	if n := countEls(els, "polygon", "band") + countEls(els, "rect", "band"); n != 2 {
		t.Errorf("%d min-max bands, want 2 (one per stretch without a gap)", n)
	}
	ticks := textsOf(els, "tick")
	for _, want := range []string{"0s", "10ms", "50ms", "100ms", "no run passed"} {
		if !contains(ticks, want) {
			t.Errorf("no tick %q in %v", want, ticks)
		}
	}
	if got, want := textsOf(els, "tick runs"), []string{"n=3", "n=2", "n=0 of 2", "n=2 of 3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("runs under the points %v, want %v", got, want)
	}
	labels := strings.Join(textsOf(els, "label"), "|")
	for _, want := range []string{"time to leader (ms)", "delay (ms, to scale)", "messages", "n = runs that passed"} {
		if !strings.Contains(labels, want) {
			t.Errorf("axis labels %q lack %q", labels, want)
		}
	}
	// The 50ms gap is no zero: no point sits on the time axis's zero.
	if strings.Contains(s, `cy="282.0"`) {
		t.Error("a point drawn at zero time to leader")
	}

	els = parseSVG(t, report.SweepSVG(loss))
	if n := countEls(els, "circle", "p50"); n != 4 {
		t.Errorf("loss: %d p50 points, want 4", n)
	}
	if n := countEls(els, "g", "gap"); n != 0 {
		t.Errorf("loss: %d gaps", n)
	}
	ticks = textsOf(els, "tick")
	for _, want := range []string{"1%", "5%", "10%", "20%"} {
		if !contains(ticks, want) {
			t.Errorf("loss: no tick %q in %v", want, ticks)
		}
	}

	// 0s, 10ms, 100ms and 1s cannot be to scale with room for each tick.
	wide := report.Sweeps([]results.ScenarioResult{
		resultstest.ScenarioOfTimes("s", resultstest.Labels("delay", "0s"), 0, 600),
		resultstest.ScenarioOfTimes("s", resultstest.Labels("delay", "1s"), 0, 900),
		resultstest.ScenarioOfTimes("s", resultstest.Labels("delay", "10ms"), 0, 700),
		resultstest.ScenarioOfTimes("s", resultstest.Labels("delay", "100ms"), 0, 800),
	})
	els = parseSVG(t, report.SweepSVG(wide[0]))
	if labels := strings.Join(textsOf(els, "label"), "|"); !strings.Contains(labels, "not to scale") {
		t.Errorf("0s..1s: axis %q does not say it is not to scale", labels)
	}

	// Nothing passed anywhere, and text that needs escaping.
	none := report.Sweeps([]results.ScenarioResult{
		resultstest.ScenarioOfTimes(`a<b&"c"`, resultstest.Labels("x", "1"), 1),
		resultstest.ScenarioOfTimes(`a<b&"c"`, resultstest.Labels("x", "2"), 1),
	})
	els = parseSVG(t, report.SweepSVG(none[0]))
	if n := countEls(els, "g", "gap"); n != 2 {
		t.Errorf("nothing passed: %d gaps, want 2", n)
	}
	if n := countEls(els, "circle", "p50"); n != 0 {
		t.Errorf("nothing passed: %d points", n)
	}
	if els[1].Name != "title" || !strings.Contains(els[1].Text, `a<b&"c" by x`) {
		t.Errorf("title %+v", els[1])
	}
}

// TestSweepP95AndDetection: a point whose runs support a p95 gets one, the
// others none, and the detection p50 is drawn where runs measured it.
func TestSweepP95AndDetection(t *testing.T) {
	many := make([]float64, 20)
	for i := range many {
		many[i] = 700 + float64(i)
	}
	scs := []results.ScenarioResult{
		resultstest.ScenarioOfTimes("s", resultstest.Labels("delay", "0s"), 0, many...),
		resultstest.ScenarioOfTimes("s", resultstest.Labels("delay", "10ms"), 0, 760, 790, 800),
	}
	for i := range scs[0].Runs {
		d := int64(500e6 + int64(i)*1e6)
		scs[0].Runs[i].DetectionNS = &d
	}
	scs[0].Summary = results.Summarize(scs[0].Runs)
	s := report.SweepSVG(report.Sweeps(scs)[0])
	els := parseSVG(t, s)
	for class, want := range map[string]int{"p50": 2, "p95": 1, "det": 1, "run": 23} {
		if n := countEls(els, "circle", class); n != want {
			t.Errorf("%d %s circles, want %d", n, class, want)
		}
	}
	for _, want := range []string{"detection p50", "p95 (≥ 20 runs)", "a run"} {
		if !contains(textsOf(els, "tick"), want) {
			t.Errorf("legend lacks %q", want)
		}
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestReportSweeps: the report draws each sweep once, linking its points
// (the summary table links them too).
func TestReportSweeps(t *testing.T) {
	var buf bytes.Buffer
	if err := report.Write(&buf, resultstest.SweepSample()); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for want, n := range map[string]int{"Sweep: latency-sweep by delay": 1, "Sweep: loss by loss": 1,
		`href="#sc-latency-sweep-delay-50ms"`: 2, `href="#sc-loss-loss-20"`: 2, `href="#sc-leader-crash"`: 1} {
		if got := strings.Count(html, want); got != n {
			t.Errorf("report has %q %d times, want %d", want, got, n)
		}
	}
	if n := strings.Count(html, `<svg class="sweep"`); n != 2 {
		t.Errorf("%d sweep plots, want 2", n)
	}
}
