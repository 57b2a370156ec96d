package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bullylab/bullylab/wire"
)

// The report's explanatory text is computed here from the data rather than
// written as fixed sentences, which would be false for some benches (a
// sentence about 30 runs printed on a 5-run report).

// PercentileRanks says which run each nearest-rank percentile of n runs
// is, counted from the fastest or the slowest, whichever is nearer: "p50
// is the 15th fastest run; p95 is the 2nd slowest; p99 and max are the
// slowest" for 30 runs, "p50 is the 3rd fastest run; p95, p99 and max are
// the slowest" for 5, "p50, p95, p99 and max are all that one run" for 1.
// Percentiles that fall on the same run are named together. It returns ""
// for no run.
func PercentileRanks(n int) string {
	return percentileRanks(n, []string{"p50", "p95", "p99", "max"})
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

// runsOver says which runs a distribution covers: "the 29 runs that
// passed", "the one run that passed", or, when fewer measured it than
// passed, "12 of the 29 runs that passed (the others measured none)".
func runsOver(n, passed int) string {
	switch {
	case n == passed && n == 1:
		return "the one run that passed"
	case n == passed:
		return fmt.Sprintf("the %d runs that passed", n)
	}
	return fmt.Sprintf("%d of the %d runs that passed (the others measured none)", n, passed)
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
		var shown, left, need []string
		for _, p := range timePcts {
			switch {
			case pctShown(p.name, g.n):
				shown = append(shown, p.name)
			default:
				left = append(left, p.name)
				need = append(need, strconv.Itoa(pctMinRuns[p.name]))
			}
		}
		line := fmt.Sprintf("%s are nearest-rank over %s: %s", whose, passedRuns(g.n), percentileRanks(g.n, shown))
		switch len(left) {
		case 0:
		case 1:
			line += fmt.Sprintf("; %s is left out below %s runs", left[0], need[0])
		default:
			line += fmt.Sprintf("; %s are left out below %s runs", andList(left), andList(need))
		}
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

// ScenarioNotes are the sentences of a scenario's section that explain its
// numbers: for time to leader, detection and convergence, how many runs
// each distribution rests on and which run each percentile is; and in how
// many of them the first election message, where detection ends, was a
// HALT because no ELECTION was sent.
func ScenarioNotes(sc *ScenarioResult) []string {
	s := summaryOf(sc)
	if s.OK == 0 {
		return nil
	}
	var notes []string
	dist := func(what string, d *Dist, values string) {
		if d == nil || d.N == 0 {
			return
		}
		notes = append(notes, fmt.Sprintf("%s over %s (%s): %s.", what, runsOver(d.N, s.OK), values, PercentileRanks(d.N)))
	}
	ttl := s.TimeToLeader
	dist("Time to leader", &ttl, fmt.Sprintf("p50 %s, p95 %s, p99 %s, max %s", fmtNS(ttl.P50NS), fmtNS(ttl.P95NS), fmtNS(ttl.P99NS), fmtNS(ttl.MaxNS)))
	if d := s.Detection; d != nil {
		dist("Detection", d, fmt.Sprintf("p50 %s, p95 %s, max %s", fmtNS(d.P50NS), fmtNS(d.P95NS), fmtNS(d.MaxNS)))
		if halt, of := haltFirst(sc.Runs); halt > 0 {
			notes = append(notes, haltFirstNote(halt, of))
		}
	}
	if d := s.Convergence; d != nil {
		dist("Convergence", d, fmt.Sprintf("p50 %s, p95 %s, max %s", fmtNS(d.P50NS), fmtNS(d.P95NS), fmtNS(d.MaxNS)))
	}
	return notes
}

// haltFirst counts the runs that passed with a detection time (of), and
// among them those whose measured election held no ELECTION (halt): an
// election opens with an ELECTION or a HALT, so theirs opened with a
// HALT, where detection ended.
func haltFirst(runs []Run) (halt, of int) {
	el, h := wire.TypeElection.String(), wire.TypeHalt.String()
	for _, r := range runs {
		if !r.OK || r.DetectionNS == nil {
			continue
		}
		of++
		if r.Messages[el] == 0 && r.Messages[h] > 0 {
			halt++
		}
	}
	return halt, of
}

func haltFirstNote(halt, of int) string {
	switch {
	case halt == of && of == 1:
		return "That run's election held no ELECTION: its first election message, where detection ends, was a HALT."
	case halt == of:
		return fmt.Sprintf("None of these %d runs' elections held an ELECTION: the first election message, where detection ends, was a HALT in every one.", of)
	}
	return fmt.Sprintf("In %d of these %d runs the election held no ELECTION: its first election message, where detection ends, was a HALT.", halt, of)
}

// runsLabel is the label of a scenario's list of runs: "all 30 runs",
// "the one run", "no run".
func runsLabel(n int) string {
	switch n {
	case 0:
		return "no run"
	case 1:
		return "the one run"
	}
	return fmt.Sprintf("all %d runs", n)
}

// cell is a table cell of the report, Bad when it reports a problem.
type cell struct {
	Text string
	Bad  bool
}

// countersCell says how the run's counters compared with its capture: not
// at all when the run stopped before the comparison.
func countersCell(r Run) cell {
	c := r.Counters
	switch {
	case !c.OK && len(c.Mismatches) == 0:
		return cell{Text: "-"}
	case !c.OK && len(c.Mismatches) == 1:
		return cell{Text: c.Mismatches[0], Bad: true}
	case !c.OK:
		return cell{Text: fmt.Sprintf("%d mismatches, the first: %s", len(c.Mismatches), c.Mismatches[0]), Bad: true}
	case len(c.AtMost) > 0:
		return cell{Text: fmt.Sprintf("match (%s: upper bound only)", plural(len(c.AtMost), "node", "nodes"))}
	}
	return cell{Text: "match"}
}

// splitBrainCell lists the run's split-brain windows, "none", or "-" when
// the run stopped before its checks ran (every checked run has a
// convergence time or a liveness violation).
func splitBrainCell(r Run) cell {
	ch := r.Checks
	switch {
	case len(ch.SplitBrain) > 0:
		connected := 0
		for _, w := range ch.SplitBrain {
			if w.Connected {
				connected++
			}
		}
		text := plural(len(ch.SplitBrain), "window", "windows")
		if connected > 0 {
			text += fmt.Sprintf(", %d with the network connected", connected)
		}
		return cell{Text: text, Bad: connected > 0}
	case ch.ConvergenceNS == nil && len(ch.Violations) == 0:
		return cell{Text: "-"}
	}
	return cell{Text: "none"}
}

// runMessagesCell is the number of election messages of the run's measured
// election, "-" when the run measured none.
func runMessagesCell(r Run) string {
	if len(r.Messages) == 0 {
		return "-"
	}
	n := 0
	for _, c := range r.Messages {
		n += c
	}
	return strconv.Itoa(n)
}

// SequenceNote explains a space-time diagram from what it shows: the time
// origin, which arrows reach a receipt and which are drawn without one,
// and the gaps drawn shorter than they were. The legend in the diagram
// says what each mark is.
func SequenceNote(seq Sequence) string {
	d := newSeqDiagram(seq)
	s := []string{"Time runs down; the times on the left are from " + originText(seq) + "."}
	s = append(s, arrowsText(d.msgs)...)
	if len(d.cuts) > 0 {
		var gaps []string
		for _, c := range d.cuts {
			gaps = append(gaps, fmtNS(int64(c.gap)))
		}
		s = append(s, fmt.Sprintf("Grey bands mark %s drawn shorter than they were (%s): time runs to scale only between them.", plural(len(d.cuts), "long gap", "long gaps"), strings.Join(gaps, ", ")))
	}
	return strings.Join(s, " ")
}

// originText names the diagram's time zero: the fault at it, or the time.
func originText(seq Sequence) string {
	if seq.Origin.IsZero() {
		return "the first event shown"
	}
	for _, f := range seq.Faults {
		if f.Time.Equal(seq.Origin) {
			return "the fault " + f.Text
		}
	}
	return seq.Origin.UTC().Format("15:04:05.000 UTC")
}

// arrowsText says where the arrows start and end: at the send by the
// sender's TCP timestamp and the receipt its acknowledgement confirms, or
// level where the capture saw a frame whose send time is unknown.
func arrowsText(msgs []SequenceMessage) []string {
	if len(msgs) == 0 {
		return []string{"No message is shown."}
	}
	var sendKnown, dropped, unknownSend, unknownRecv int
	for _, m := range msgs {
		if m.Dropped {
			dropped++
		}
		switch {
		case m.SendUnknown:
			unknownSend++
		case !m.Dropped && m.RecvTime.IsZero():
			unknownRecv++
		default:
			sendKnown++
		}
	}
	var s []string
	if sendKnown > 0 {
		s = append(s, "An arrow starts when the sender's kernel sent the message (its TCP timestamp) and ends when the frame reached the receiver's port, which the receiver's acknowledgement confirms; a delay on the sender's egress makes it slope.")
	}
	if unknownSend == len(msgs) {
		s = append(s, "The capture holds no send times (the senders' TCP timestamps could not be read): every arrow is drawn level and dashed when the capture saw the frame enter the switch, after any delay the sender's egress added, so no arrow shows that delay.")
	} else if unknownSend > 0 {
		s = append(s, fmt.Sprintf("Messages without a send time (%d) are drawn level and dashed when the capture saw them, after any delay the sender's egress added.", unknownSend))
	}
	if unknownRecv > 0 {
		s = append(s, fmt.Sprintf("Messages whose receipt is unknown (%d) are drawn level and dashed at their send.", unknownRecv))
	}
	if dropped > 0 {
		s = append(s, fmt.Sprintf("Messages never acknowledged (%d) end in a cross short of the receiver, where the capture last saw them: dropped by a cut or a loss, or the capture ended first.", dropped))
	}
	return s
}

// timingText is the topology's shared timing for the report's header.
func timingText(t Timing) string {
	s := fmt.Sprintf("heartbeat %s, failure timeout %s, election timeout %s",
		time.Duration(t.HeartbeatNS), time.Duration(t.FailureTimeoutNS), time.Duration(t.ElectionTimeoutNS))
	if t.DetectionStaggerNS > 0 {
		s += fmt.Sprintf(", detection stagger %s", time.Duration(t.DetectionStaggerNS))
	}
	return s
}
