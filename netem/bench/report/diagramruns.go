package report

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/wire/bounded"
)

// DiagramRuns says which runs of each scenario the report draws an
// election diagram of (--diagram-runs). The zero value is
// DefaultDiagramRuns.
type DiagramRuns struct {
	// Fastest, Median and Slowest are the runs that passed with the
	// shortest, the median (MedianRun) and the longest time to leader.
	Fastest, Median, Slowest bool
	All                      bool
	// Runs are run numbers, from 1.
	Runs []int
}

// DefaultDiagramRuns is what the report draws unless told otherwise: the
// typical election and the worst one, one diagram when they are one run.
const DefaultDiagramRuns = "median,slowest"

// DiagramRunWords are the words --diagram-runs takes besides run numbers.
var DiagramRunWords = []string{"fastest", "median", "slowest", "all"}

// diagramRunWordList is DiagramRunWords as an error lists them.
func diagramRunWordList() string {
	last := len(DiagramRunWords) - 1
	return strings.Join(DiagramRunWords[:last], ", ") + " or " + DiagramRunWords[last]
}

// ParseDiagramRuns reads --diagram-runs: run numbers and the words
// fastest, median, slowest and all, separated by commas.
func ParseDiagramRuns(s string) (DiagramRuns, error) {
	var dr DiagramRuns
	if strings.TrimSpace(s) == "" {
		return dr, errors.New("empty: want run numbers, " + diagramRunWordList() + ", separated by commas")
	}
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		switch strings.ToLower(w) {
		case "fastest":
			dr.Fastest = true
		case "median":
			dr.Median = true
		case "slowest":
			dr.Slowest = true
		case "all":
			dr.All = true
		default:
			n, err := strconv.Atoi(w)
			if err != nil || n < 1 || strings.IndexFunc(w, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
				return DiagramRuns{}, fmt.Errorf("%s is not a run number (from 1), %s", bounded.Quote(w), diagramRunWordList())
			}
			if !slices.Contains(dr.Runs, n) {
				dr.Runs = append(dr.Runs, n)
			}
		}
	}
	slices.Sort(dr.Runs)
	return dr, nil
}

// String is dr as ParseDiagramRuns reads it.
func (dr DiagramRuns) String() string {
	var ws []string
	for _, w := range []struct {
		on   bool
		name string
	}{{dr.Fastest, "fastest"}, {dr.Median, "median"}, {dr.Slowest, "slowest"}, {dr.All, "all"}} {
		if w.on {
			ws = append(ws, w.name)
		}
	}
	for _, n := range dr.Runs {
		ws = append(ws, strconv.Itoa(n))
	}
	return strings.Join(ws, ",")
}

// IsZero says whether dr picks nothing, and so stands for the default.
func (dr DiagramRuns) IsZero() bool {
	return !dr.Fastest && !dr.Median && !dr.Slowest && !dr.All && len(dr.Runs) == 0
}

// CheckRuns says which run number dr names beyond the runs of a scenario.
func (dr DiagramRuns) CheckRuns(runs int) error {
	for _, n := range dr.Runs {
		if n > runs {
			return fmt.Errorf("run %d, but each scenario runs %d times", n, runs)
		}
	}
	return nil
}

// DiagramPick is a run to draw and why: the roles it plays (fastest,
// median, slowest) beyond being asked for.
type DiagramPick struct {
	Run   results.Run
	Roles []string
}

// Pick returns the runs of sr that dr draws, in run order, each once.
func (dr DiagramRuns) Pick(sr *results.ScenarioResult) []DiagramPick {
	if dr.IsZero() {
		dr, _ = ParseDiagramRuns(DefaultDiagramRuns)
	}
	roles := map[int][]string{}
	wanted := map[int]bool{}
	if fast, ok := fastestRun(sr); ok {
		roles[fast.Index] = append(roles[fast.Index], "fastest")
		wanted[fast.Index] = wanted[fast.Index] || dr.Fastest
	}
	if med, ok := MedianRun(sr); ok {
		roles[med.Index] = append(roles[med.Index], "median")
		wanted[med.Index] = wanted[med.Index] || dr.Median
	}
	if slow, ok := slowestRun(sr); ok {
		roles[slow.Index] = append(roles[slow.Index], "slowest")
		wanted[slow.Index] = wanted[slow.Index] || dr.Slowest
	}
	for _, n := range dr.Runs {
		wanted[n] = true
	}
	var picks []DiagramPick
	for _, r := range sr.Runs {
		if dr.All || wanted[r.Index] {
			picks = append(picks, DiagramPick{Run: r, Roles: roles[r.Index]})
		}
	}
	return picks
}

// Sequences are the elections of the runs of sr that dr picks, titled and
// with their captures; elections[i] is run i+1's, nil where none was kept.
func (dr DiagramRuns) Sequences(sr *results.ScenarioResult, elections []*Sequence) []Sequence {
	var seqs []Sequence
	for _, p := range dr.Pick(sr) {
		i := p.Run.Index - 1
		if i < 0 || i >= len(elections) || elections[i] == nil {
			continue
		}
		seq := *elections[i]
		seq.Title = SequenceTitle(sr, p.Run, p.Roles...)
		seq.Capture = p.Run.Capture
		seqs = append(seqs, seq)
	}
	return seqs
}

// fastestRun is the run of sr that passed with the shortest time to
// leader, the first of equals; ok is false when no run passed.
func fastestRun(sr *results.ScenarioResult) (run results.Run, ok bool) {
	for _, r := range sr.Runs {
		if r.OK && (!ok || r.TimeToLeaderNS < run.TimeToLeaderNS) {
			run, ok = r, true
		}
	}
	return run, ok
}

// slowestRun is the run of sr that passed with the longest time to
// leader, the first of equals; ok is false when no run passed.
func slowestRun(sr *results.ScenarioResult) (run results.Run, ok bool) {
	for _, r := range sr.Runs {
		if r.OK && (!ok || r.TimeToLeaderNS > run.TimeToLeaderNS) {
			run, ok = r, true
		}
	}
	return run, ok
}
