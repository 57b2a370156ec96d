package results

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The report's explanatory text is computed here from the data rather than
// written as fixed sentences, which would be false for some benches (a
// sentence about 30 runs printed on a 5-run report).

// PercentileRanks says which run each nearest-rank percentile that n
// runs support (PercentileShown) is, counted from the fastest or the
// slowest, whichever is nearer, and which it leaves out: "p50 is the 15th
// fastest run; p95 is the 2nd slowest; max is the slowest; p99 is left
// out below 100 runs" for 30 runs, "p50 is the 3rd fastest run; max is
// the slowest; p95 and p99 are left out below 20 and 100 runs" for 5.
// Percentiles that fall on the same run are named together. It returns ""
// for no run.
func PercentileRanks(n int) string {
	if n <= 0 {
		return ""
	}
	return percentileRanks(n, PercentileNames(PercentilesOf(TimePercentiles, n))) + PercentilesLeftOut(n)
}

// PercentilesLeftOut is "; p95 and p99 are left out below 20 and 100
// runs": the percentiles n runs do not support, "" when they support all.
func PercentilesLeftOut(n int) string {
	var left, need []string
	for _, p := range TimePercentiles {
		if !PercentileShown(p.Name, n) {
			left = append(left, p.Name)
			need = append(need, strconv.Itoa(pctMinRuns[p.Name]))
		}
	}
	switch len(left) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("; %s is left out below %s runs", left[0], need[0])
	}
	return fmt.Sprintf("; %s are left out below %s runs", andList(left), andList(need))
}

// percentileRanks is PercentileRanks of the percentiles names only.
func percentileRanks(n int, names []string) string {
	if n <= 0 {
		return ""
	}
	if n == 1 {
		return andList(names) + " are all that one run"
	}
	type group struct {
		names []string
		rank  int
	}
	var groups []group
	for _, name := range names {
		r := n
		if name != "max" {
			p, _ := strconv.ParseFloat(strings.TrimPrefix(name, "p"), 64)
			r = rank(n, p)
		}
		if k := len(groups) - 1; k >= 0 && groups[k].rank == r {
			groups[k].names = append(groups[k].names, name)
			continue
		}
		groups = append(groups, group{names: []string{name}, rank: r})
	}
	parts := make([]string, len(groups))
	for i, g := range groups {
		verb := "is"
		if len(g.names) > 1 {
			verb = "are"
		}
		run := ""
		if i == 0 {
			run = " run"
		}
		parts[i] = fmt.Sprintf("%s %s %s%s", andList(g.names), verb, rankName(g.rank, n), run)
	}
	return strings.Join(parts, "; ")
}

// rankName names the run of 1-based rank r of n in ascending order, from
// whichever end is nearer: "the fastest", "the 3rd fastest", "the 2nd
// slowest", "the slowest".
func rankName(r, n int) string {
	fromTop := n - r + 1
	switch {
	case r == n:
		return "the slowest"
	case r == 1:
		return "the fastest"
	case r <= fromTop:
		return "the " + ordinal(r) + " fastest"
	}
	return "the " + ordinal(fromTop) + " slowest"
}

// ordinal is 1st, 2nd, 3rd, 4th... 11th, 12th, 13th, 21st...
func ordinal(n int) string {
	s := strconv.Itoa(n)
	if n%100 >= 11 && n%100 <= 13 {
		return s + "th"
	}
	switch n % 10 {
	case 1:
		return s + "st"
	case 2:
		return s + "nd"
	case 3:
		return s + "rd"
	}
	return s + "th"
}

// andList joins "a", "a and b", "a, b and c".
func andList(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// plural is "1 run", "2 runs".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// passGroup is the scenarios in which n runs passed.
type passGroup struct {
	n    int
	keys []string
}

// passGroups groups scenarios by how many of their runs passed, fewest
// first.
func passGroups(scs []ScenarioResult) []passGroup {
	var groups []passGroup
	for i := range scs {
		n := summaryOf(&scs[i]).TimeToLeader.N
		k := slices.IndexFunc(groups, func(g passGroup) bool { return g.n == n })
		if k < 0 {
			groups = append(groups, passGroup{n: n})
			k = len(groups) - 1
		}
		groups[k].keys = append(groups[k].keys, scs[i].Key())
	}
	slices.SortStableFunc(groups, func(a, b passGroup) int { return a.n - b.n })
	return groups
}

// PercentileSummary is the report's note on the summary table: the
// percentiles' method, then per number of runs that passed which run each
// percentile of time to leader is, naming the scenarios when they differ;
// and which scenarios' detection percentiles rest on fewer runs.
func PercentileSummary(scs []ScenarioResult) string {
	var b strings.Builder
	b.WriteString("Percentiles are nearest-rank over the runs that passed: the p-th percentile of n runs is the run of rank ⌈p × n / 100⌉ from the fastest, a time one run measured.")
	groups := passGroups(scs)
	for _, g := range groups {
		switch {
		case g.n == 0:
			fmt.Fprintf(&b, " No run of %s passed: no percentile.", andList(g.keys))
		case len(groups) == 1 && len(scs) > 1:
			fmt.Fprintf(&b, " In every scenario %s passed: %s.", plural(g.n, "run", "runs"), PercentileRanks(g.n))
		default:
			fmt.Fprintf(&b, " %s, %s passed: %s.", andList(g.keys), plural(g.n, "run", "runs"), PercentileRanks(g.n))
		}
	}
	var fewer []string
	for i := range scs {
		s := summaryOf(&scs[i])
		if s.Detection != nil && s.Detection.N != s.TimeToLeader.N {
			fewer = append(fewer, fmt.Sprintf("%s (%d of %d)", scs[i].Key(), s.Detection.N, s.TimeToLeader.N))
		}
	}
	if len(fewer) > 0 {
		fmt.Fprintf(&b, " Detection percentiles rest on the runs that passed and measured a detection, fewer in %s.", andList(fewer))
	}
	return b.String()
}

// percentileLines are the lines under the summary table that say which
// run each percentile of time to leader it shows is, and which it left
// out for too few runs (pctMinRuns), one per number of runs that passed.
func percentileLines(scs []ScenarioResult) []string {
	groups := passGroups(scs)
	var lines []string
	for _, g := range groups {
		if g.n == 0 {
			continue
		}
		whose := "percentiles"
		if len(groups) > 1 {
			whose = "percentiles of " + andList(g.keys)
		}
		shown := PercentileNames(PercentilesOf(TimePercentiles, g.n))
		line := fmt.Sprintf("%s are nearest-rank over %s: %s%s", whose, PassedRunsPhrase(g.n), percentileRanks(g.n, shown), PercentilesLeftOut(g.n))
		lines = append(lines, line)
	}
	return lines
}

// summaryOf is sc's summary, computed when sc holds runs but none.
func summaryOf(sc *ScenarioResult) Summary {
	if sc.Summary.Runs == 0 && len(sc.Runs) > 0 {
		return Summarize(sc.Runs)
	}
	return sc.Summary
}

// PassedRunsPhrase is "the 29 runs that passed", "the one run that
// passed", "no run that passed".
func PassedRunsPhrase(n int) string {
	switch n {
	case 0:
		return "no run that passed"
	case 1:
		return "the one run that passed"
	}
	return fmt.Sprintf("the %d runs that passed", n)
}
