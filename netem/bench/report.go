package bench

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strings"
	"sync"
	"time"
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
		"runmsgs": func(r Run) int {
			n := 0
			for _, c := range r.Messages {
				n += c
			}
			return n
		},
		// A colour for a style attribute: html/template would refuse a
		// string there.
		"color": func(t string) template.CSS { return template.CSS(colorOf(t)) },
	}).Parse(reportTemplate))
}

type reportScenario struct {
	*ScenarioResult
	Plot template.HTML
}

type reportSequence struct {
	Title string
	SVG   template.HTML
	Types []string
}

type reportData struct {
	R         *Results
	Scenarios []reportScenario
	Sequences []reportSequence
}

// WriteReport writes report.html: one self-contained page (inline CSS and
// SVG, no script, no reference to anything outside it) with the summary
// table, the time-to-leader distribution of every scenario, its runs, and
// a message sequence diagram of each election in seqs.
func WriteReport(w io.Writer, r *Results, seqs ...Sequence) error {
	d := reportData{R: r}
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
		title := fmt.Sprintf("time to leader of the %d runs of %s that passed", len(ttl), sc.Key())
		d.Scenarios = append(d.Scenarios, reportScenario{ScenarioResult: sc, Plot: template.HTML(DistributionSVG(ttl, title))})
	}
	for _, s := range seqs {
		used := map[string]bool{}
		for _, m := range s.Messages {
			used[m.Type] = true
		}
		d.Sequences = append(d.Sequences, reportSequence{Title: s.Title, SVG: template.HTML(SequenceSVG(s)), Types: sortTypes(used)})
	}
	return reportTmpl().Execute(w, d)
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

// SequenceTitle is the caption of a run's election diagram.
func SequenceTitle(sc *ScenarioResult, run Run) string {
	return strings.TrimSpace(fmt.Sprintf("%s, run %d (seed %d): leader %s after %s", sc.Key(), run.Index, run.Seed, run.Leader, fmtNS(run.TimeToLeaderNS)))
}
