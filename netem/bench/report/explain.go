package report

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/wire"
)

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

// summaryOf is sc's summary, computed when sc holds runs but none.
func summaryOf(sc *results.ScenarioResult) results.Summary {
	if sc.Summary.Runs == 0 && len(sc.Runs) > 0 {
		return results.Summarize(sc.Runs)
	}
	return sc.Summary
}

// shortPcts are the percentiles the notes give of detection and
// convergence: p50, p95 and max.
var shortPcts = []results.TimePercentile{results.TimePercentiles[0], results.TimePercentiles[1], results.TimePercentiles[3]}

// ScenarioNotes are the sentences of a scenario's section that explain its
// numbers: for time to leader, detection and convergence, how many runs
// each distribution rests on and which run each percentile is; and in how
// many of them the first election message, where detection ends, was a
// HALT because no ELECTION was sent.
func ScenarioNotes(sc *results.ScenarioResult) []string {
	s := summaryOf(sc)
	if s.OK == 0 {
		return nil
	}
	var notes []string
	dist := func(what string, d *results.Dist, values string) {
		if d == nil || d.N == 0 {
			return
		}
		notes = append(notes, fmt.Sprintf("%s over %s (%s): %s.", what, runsOver(d.N, s.OK), values, results.PercentileRanks(d.N)))
	}
	ttl := s.TimeToLeader
	dist("Time to leader", &ttl, results.PercentilesText(ttl, results.TimePercentiles))
	if d := s.Detection; d != nil {
		dist("Detection", d, results.PercentilesText(*d, shortPcts))
		if by := results.DetectedByText(s); by != "" {
			notes = append(notes, "Detected by: "+by+".")
		}
		if halt, of := haltFirst(sc.Runs); halt > 0 {
			notes = append(notes, haltFirstNote(halt, of))
		}
	}
	if d := s.Convergence; d != nil {
		dist("Convergence", d, results.PercentilesText(*d, shortPcts))
	}
	return notes
}

// haltFirst counts the runs that passed with a detection time (of), and
// among them those whose measured election held no ELECTION (halt): an
// election opens with an ELECTION or a HALT, so theirs opened with a
// HALT, where detection ended.
func haltFirst(runs []results.Run) (halt, of int) {
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
func countersCell(r results.Run) cell {
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

// overlapsCell says how often several nodes led at once in the run: dual
// leaders (a violation) and leaders apart (expected across a cut) named
// apart, "none", or "-" when the run stopped before its checks ran (every
// checked run has a convergence time or a liveness violation).
func overlapsCell(r results.Run) cell {
	ch := r.Checks
	dual, apart := len(ch.DualLeaders()), len(ch.LeadersApart())
	switch {
	case dual > 0 && apart > 0:
		return cell{Text: fmt.Sprintf("dual leaders %d, apart %d", dual, apart), Bad: true}
	case dual > 0:
		return cell{Text: fmt.Sprintf("dual leaders %d", dual), Bad: true}
	case apart > 0:
		return cell{Text: fmt.Sprintf("apart %d (expected)", apart)}
	case ch.ConvergenceNS == nil && len(ch.Violations) == 0:
		return cell{Text: "-"}
	}
	return cell{Text: "none"}
}

// runMessagesCell is the number of election messages of the run's measured
// election, "-" when the run measured none.
func runMessagesCell(r results.Run) string {
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
	_, note := SequenceFigure(seq)
	return note
}

// note is SequenceNote of seq, laid out as d.
func (d *seqDiagram) note(seq Sequence) string {
	s := []string{"Time runs down; the times on the left are from " + originText(seq) + "."}
	s = append(s, arrowsText(d.msgs)...)
	if len(d.cuts) > 0 {
		var gaps []string
		for _, c := range d.cuts {
			gaps = append(gaps, results.FormatNS(int64(c.gap)))
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
	var sendKnown, dropped, lost, resent, unknownSend, unknownRecv int
	for _, m := range msgs {
		switch {
		case m.Dropped && (m.Resent || m.CutDrop):
			lost++
		case m.Dropped:
			dropped++
		case m.Copy > 0:
			resent++
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
	if lost > 0 {
		s = append(s, fmt.Sprintf("Copies lost on the wire (%d: sent again before any acknowledgement, or while a fault cut the link) end in a cross where they were lost; each TCP retransmission that delivered one (%d) has an arrow of its own, from a ring at its resend to its receipt.", lost, resent))
	}
	return s
}

// timingText is the topology's shared timing for the report's header.
func timingText(t results.Timing) string {
	s := fmt.Sprintf("heartbeat %s, failure timeout %s, election timeout %s",
		time.Duration(t.HeartbeatNS), time.Duration(t.FailureTimeoutNS), time.Duration(t.ElectionTimeoutNS))
	if t.DetectionStaggerNS > 0 {
		s += fmt.Sprintf(", detection stagger %s", time.Duration(t.DetectionStaggerNS))
	}
	return s
}
