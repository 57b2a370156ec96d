package bench

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bullylab/bullylab/capture"
)

//go:embed report.html.tmpl
var reportTemplate string

// reportTmpl is parsed on first use: every bullylab process, node
// processes included, would otherwise parse it at start.
var reportTmpl = sync.OnceValue(func() *template.Template { return reportTemplateParsed() })

func reportTemplateParsed() *template.Template {
	return template.Must(template.New("report").Funcs(template.FuncMap{
		"ns":     fmtNS,
		"anchor": anchor,
		"mean":   fmtMean,
		"ints":   joinInts,
		"dur":    func(ns int64) string { return time.Duration(ns).String() },
		"utc":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
		"types":  func(s Summary) []string { return summaryTypes(s) },
		"msg":    func(s Summary, t string) Count { return s.Messages[t] },
		"runns": func(p *int64) string {
			if p == nil {
				return "-"
			}
			return fmtNS(*p)
		},
		// pct is a percentile's cell: "-" where n values do not support
		// it (pctShown), as in the summary table.
		"pct": func(name string, d Dist) string {
			i := slices.IndexFunc(timePcts, func(p timePct) bool { return p.name == name })
			if i < 0 || !pctShown(name, d.N) {
				return "-"
			}
			return fmtNS(timePcts[i].of(&d))
		},
		"runmsgs":    runMessagesCell,
		"counters":   countersCell,
		"faults":     faultsOf,
		"splitbrain": splitBrainCell,
		"timing":     timingText,
	}).Parse(reportTemplate))
}

type reportScenario struct {
	*ScenarioResult
	Plot template.HTML
	// Passed says how many runs passed; Notes explain the numbers
	// (ScenarioNotes); RunsLabel labels the list of runs.
	Passed    string
	Notes     []string
	RunsLabel string
	// FaultRun is the run whose fault checks the report lists: the first
	// whose checks failed, else the median run; nil when none has checks.
	FaultRun *Run
}

type reportSequence struct {
	Title   string
	SVG     template.HTML
	Note    string // SequenceNote
	Capture string // the run's pcapng, relative to the report
}

type reportSweep struct {
	Title string
	SVG   template.HTML
	// Points link to the scenarios the sweep's points are.
	Points []string
}

type reportData struct {
	R         *Results
	Scenarios []reportScenario
	Sweeps    []reportSweep
	Sequences []reportSequence
	// PercentileNote is PercentileSummary of the scenarios.
	PercentileNote string
	// TriggerWindow is how long before an election the capture analysis
	// looks for the record that triggered it.
	TriggerWindow string
}

// WriteReport writes report.html: one self-contained page (inline CSS and
// SVG, no script, no reference to anything outside it) with the summary
// table, time to leader and messages against the swept value of every
// sweep (Sweeps), the time-to-leader distribution of every scenario, its
// runs with their captures linked, and a space-time diagram of each
// election in seqs beside a link to its capture.
func WriteReport(w io.Writer, r *Results, seqs ...Sequence) error {
	d := reportData{R: r, TriggerWindow: capture.DefaultTriggerWindow.String()}
	for i := range r.Scenarios {
		sc := &r.Scenarios[i]
		if sc.Summary.Runs == 0 && len(sc.Runs) > 0 {
			sc.Summary = Summarize(sc.Runs)
		}
		var ttl []int64
		for _, run := range sc.Runs {
			if run.OK {
				ttl = append(ttl, run.TimeToLeaderNS)
			}
		}
		title := fmt.Sprintf("time to leader of %s of %s", passedRuns(len(ttl)), sc.Key())
		d.Scenarios = append(d.Scenarios, reportScenario{ScenarioResult: sc, Plot: template.HTML(DistributionSVG(ttl, title)),
			Passed: passedText(sc.Summary), Notes: ScenarioNotes(sc), RunsLabel: runsLabel(len(sc.Runs)), FaultRun: faultRun(sc)})
	}
	d.PercentileNote = PercentileSummary(r.Scenarios)
	for _, sw := range Sweeps(r.Scenarios) {
		rs := reportSweep{Title: sw.Title(), SVG: template.HTML(SweepSVG(sw))}
		for _, pt := range sw.Points {
			rs.Points = append(rs.Points, pt.Scenario.Key())
		}
		d.Sweeps = append(d.Sweeps, rs)
	}
	for _, s := range seqs {
		d.Sequences = append(d.Sequences, reportSequence{Title: s.Title, SVG: template.HTML(SequenceSVG(s)), Note: SequenceNote(s), Capture: s.Capture})
	}
	return reportTmpl().Execute(w, d)
}

// passedRuns is "the 29 runs that passed", "the one run that passed", "no
// run that passed".
func passedRuns(n int) string {
	switch n {
	case 0:
		return "no run that passed"
	case 1:
		return "the one run that passed"
	}
	return fmt.Sprintf("the %d runs that passed", n)
}

// passedText is "29 of 30 runs passed", "The one run passed", "The one run
// failed", "No run".
func passedText(s Summary) string {
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

func summaryTypes(s Summary) []string {
	seen := map[string]bool{}
	for t := range s.Messages {
		seen[t] = true
	}
	return sortTypes(seen)
}

// MedianRun returns the run of sc whose time to leader is the median
// (nearest-rank p50) of the runs that passed: the election to draw when a
// report shows one. ok is false when no run passed.
func MedianRun(sc *ScenarioResult) (run Run, ok bool) {
	var ttl []int64
	for _, r := range sc.Runs {
		if r.OK {
			ttl = append(ttl, r.TimeToLeaderNS)
		}
	}
	if len(ttl) == 0 {
		return Run{}, false
	}
	p50 := Percentile(ttl, 50)
	for _, r := range sc.Runs {
		if r.OK && r.TimeToLeaderNS == p50 {
			return r, true
		}
	}
	return Run{}, false
}

// SequenceTitle is the caption of a run's election diagram: the run, the
// roles it plays among the runs (median, slowest) and its time to leader,
// or how it failed.
func SequenceTitle(sc *ScenarioResult, run Run, roles ...string) string {
	s := fmt.Sprintf("%s, run %d (seed %d)", sc.Key(), run.Index, run.Seed)
	if len(roles) > 0 {
		s += ", the " + strings.Join(roles, " and the ") + " run"
	}
	if !run.OK {
		return strings.TrimSpace(fmt.Sprintf("%s: failed (%s)", s, run.FailureKind))
	}
	return strings.TrimSpace(fmt.Sprintf("%s: leader %s after %s", s, run.Leader, fmtNS(run.TimeToLeaderNS)))
}
