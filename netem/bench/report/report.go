package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/bench/results"
)

//go:embed report.html.tmpl
var reportTemplate string

//go:embed benches.html.tmpl
var benchesTemplate string

// reportTmpl is parsed on first use: every bullylab process, node
// processes included, would otherwise parse it at start.
var reportTmpl = sync.OnceValue(func() *template.Template { return reportTemplateParsed() })

// reportTemplateParsed is report.html.tmpl as "report" and
// benches.html.tmpl, which shares its pieces, as "benches".
func reportTemplateParsed() *template.Template {
	t := template.Must(template.New("report").Funcs(template.FuncMap{
		"ns":     results.FormatNS,
		"anchor": anchor,
		"mean":   results.FormatMean,
		"ints":   joinInts,
		"dur":    func(ns int64) string { return time.Duration(ns).String() },
		"utc":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
		"types":  func(s results.Summary) []string { return summaryTypes(s) },
		"msg":    func(s results.Summary, t string) results.Count { return s.Messages[t] },
		"runns": func(p *int64) string {
			if p == nil {
				return "-"
			}
			return results.FormatNS(*p)
		},
		// pct is a percentile's cell: "-" where n values do not support
		// it (results.PercentileShown), as in the summary table.
		"pct": func(name string, d results.Dist) string {
			i := slices.IndexFunc(results.TimePercentiles, func(p results.TimePercentile) bool { return p.Name == name })
			if i < 0 || !results.PercentileShown(name, d.N) {
				return "-"
			}
			return results.FormatNS(results.TimePercentiles[i].Of(&d))
		},
		"runmsgs":   runMessagesCell,
		"counters":  countersCell,
		"faults":    faultsOf,
		"overlaps":  overlapsCell,
		"later":     laterOf,
		"timing":    timingText,
		"overrides": results.OverridesText,
	}).Parse(reportTemplate))
	template.Must(t.New("benches").Parse(benchesTemplate))
	return t
}

type reportScenario struct {
	*results.ScenarioResult
	Plot template.HTML
	// Passed says how many runs passed; Notes explain the numbers
	// (ScenarioNotes); RunsLabel labels the list of runs.
	Passed    string
	Notes     []string
	RunsLabel string
	// FaultRun is the run whose fault checks the report lists: the first
	// whose checks failed, else the median run; nil when none has checks.
	FaultRun *results.Run
}

type reportSequence struct {
	Title   string
	SVG     template.HTML
	Note    string        // SequenceNote
	Capture string        // the run's pcapng, relative to the report
	Lanes   template.HTML // LeaderLanesSVG, "" when the run has none
}

type reportSweep struct {
	Title string
	SVG   template.HTML
	// Points link to the scenarios the sweep's points are.
	Points []string
}

type reportData struct {
	R *results.Results
	// Messages is the messages-against-N plot, "" without a leader-crash
	// run that passed; AlgorithmsText names the algorithms the bench ran.
	Messages       template.HTML
	AlgorithmsText string
	Scenarios      []reportScenario
	Sweeps         []reportSweep
	Sequences      []reportSequence
	// PercentileNote is PercentileSummary of the scenarios.
	PercentileNote string
	// LaterColumn is whether the summary has a column of later leader
	// changes: some scenario counted them.
	LaterColumn bool
	// TriggerWindow is how long before an election the capture analysis
	// looks for the record that triggered it.
	TriggerWindow string
}

// Write writes report.html: one self-contained page (inline CSS and
// SVG, no script, no reference to anything outside it) with the summary
// table, time to leader and messages against the swept value of every
// sweep (Sweeps), the time-to-leader distribution of every scenario, its
// runs with their captures linked, and a space-time diagram of each
// election in seqs beside a link to its capture.
func Write(w io.Writer, r *results.Results, seqs ...Sequence) error {
	d := reportData{R: r, TriggerWindow: capture.DefaultTriggerWindow.String()}
	for i := range r.Scenarios {
		sc := &r.Scenarios[i]
		if sc.Summary.Runs == 0 && len(sc.Runs) > 0 {
			sc.Summary = results.Summarize(sc.Runs)
		}
		var ttl []int64
		for _, run := range sc.Runs {
			if run.OK {
				ttl = append(ttl, run.TimeToLeaderNS)
			}
		}
		d.LaterColumn = d.LaterColumn || sc.Summary.LaterChanges != nil
		title := fmt.Sprintf("time to leader of %s of %s", results.PassedRunsPhrase(len(ttl)), sc.Key())
		d.Scenarios = append(d.Scenarios, reportScenario{ScenarioResult: sc, Plot: template.HTML(DistributionSVG(ttl, title)),
			Passed: passedText(sc.Summary), Notes: ScenarioNotes(sc), RunsLabel: runsLabel(len(sc.Runs)), FaultRun: faultRun(sc)})
	}
	d.PercentileNote = results.PercentileSummary(r.Scenarios)
	if pts := MessagesPoints(r); len(pts) > 0 {
		d.Messages = template.HTML(MessagesByNSVG(pts))
		d.AlgorithmsText = strings.Join(r.Algorithms(), " and ")
	}
	for _, sw := range Sweeps(r.Scenarios) {
		rs := reportSweep{Title: sw.Title(), SVG: template.HTML(SweepSVG(sw))}
		for _, pt := range sw.Points {
			rs.Points = append(rs.Points, pt.Scenario.Key())
		}
		d.Sweeps = append(d.Sweeps, rs)
	}
	for _, s := range seqs {
		svg, note := SequenceFigure(s)
		rs := reportSequence{Title: s.Title, SVG: template.HTML(svg), Note: note, Capture: s.Capture}
		if s.Lanes != nil {
			rs.Lanes = template.HTML(LeaderLanesSVG(*s.Lanes))
		}
		d.Sequences = append(d.Sequences, rs)
	}
	return reportTmpl().Execute(w, d)
}

// laterOf is the run's later leader changes, 0 when it counted none.
func laterOf(r results.Run) int {
	if r.LaterLeaderChanges == nil {
		return 0
	}
	return *r.LaterLeaderChanges
}

// passedText is "29 of 30 runs passed", "The one run passed", "The one run
// failed", "No run".
func passedText(s results.Summary) string {
	if s.Runs == 0 {
		return "No run"
	}
	if s.Runs == 1 {
		if s.OK == 1 {
			return "The one run passed"
		}
		return "The one run failed"
	}
	return fmt.Sprintf("%d of %d runs passed", s.OK, s.Runs)
}

// anchor makes a scenario key an HTML id: keys hold spaces and '='.
func anchor(key string) string {
	return "sc-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '-'
	}, key)
}

func summaryTypes(s results.Summary) []string {
	seen := map[string]bool{}
	for t := range s.Messages {
		seen[t] = true
	}
	return results.SortMessageTypes(seen)
}

// MedianRun returns the run of sc whose time to leader is the median
// (nearest-rank p50) of the runs that passed: the election to draw when a
// report shows one. ok is false when no run passed.
func MedianRun(sc *results.ScenarioResult) (run results.Run, ok bool) {
	var ttl []int64
	for _, r := range sc.Runs {
		if r.OK {
			ttl = append(ttl, r.TimeToLeaderNS)
		}
	}
	if len(ttl) == 0 {
		return results.Run{}, false
	}
	p50 := results.Percentile(ttl, 50)
	for _, r := range sc.Runs {
		if r.OK && r.TimeToLeaderNS == p50 {
			return r, true
		}
	}
	return results.Run{}, false
}

// SequenceTitle is the caption of a run's election diagram: the run, the
// roles it plays among the runs (fastest, median, slowest) and its time to leader,
// or how it failed, then its availability's verdict and unavailability
// when it measured them (AvailabilityText).
func SequenceTitle(sc *results.ScenarioResult, run results.Run, roles ...string) string {
	s := fmt.Sprintf("%s, run %d (seed %d)", sc.Key(), run.Index, run.Seed)
	if len(roles) > 0 {
		last := len(roles) - 1
		s += ", the "
		if last > 0 {
			s += strings.Join(roles[:last], ", the ") + " and the "
		}
		s += roles[last] + " run"
	}
	avail := ""
	if a := AvailabilityText(run); a != "" {
		avail = "; " + a
	}
	if !run.OK {
		return strings.TrimSpace(fmt.Sprintf("%s: failed (%s)%s", s, run.FailureKind, avail))
	}
	return strings.TrimSpace(fmt.Sprintf("%s: leader %s after %s%s", s, run.Leader, results.FormatNS(run.TimeToLeaderNS), avail))
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}
