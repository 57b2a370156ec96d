package results

import (
	"fmt"
	"math"
)

// LaterChanges are a scenario's runs whose leader changed again after the
// run had settled (Run.LaterLeaderChanges).
type LaterChanges struct {
	// Measured counts the runs that measured it, Runs lists by index
	// those whose leader changed again.
	Measured int   `json:"measured"`
	Runs     []int `json:"runs,omitempty"`
	// Most is the most later changes of one run.
	Most int `json:"most,omitempty"`
}

// CountLaterLeaderChanges counts the leader tenures among ts, by (node,
// epoch), that began after settledNS, the run's time to leader, and
// before untilNS, the next fault after the measured one: changes of
// leader that no fault explains once the measured election had settled.
// A tenure resumed after a pause is not a change, nor is the run's own
// leader's lead, begun before it settled.
func CountLaterLeaderChanges(ts []TenureRecord, settledNS, untilNS int64) int {
	type lead struct {
		node  string
		epoch uint64
	}
	first := map[lead]int64{}
	for _, t := range ts {
		l := lead{t.Node, t.Epoch}
		if s, ok := first[l]; !ok || t.StartNS < s {
			first[l] = t.StartNS
		}
	}
	n := 0
	for _, start := range first {
		if start > settledNS && start < untilNS {
			n++
		}
	}
	return n
}

// NoLaterFault is CountLaterLeaderChanges' untilNS for a run with no
// fault after the measured one.
const NoLaterFault = math.MaxInt64

// summarizeLaterChanges is the runs' LaterChanges, nil when no run
// measured them (a results.json from before they were).
func summarizeLaterChanges(runs []Run) *LaterChanges {
	var lc LaterChanges
	for _, r := range runs {
		if r.LaterLeaderChanges == nil {
			continue
		}
		lc.Measured++
		if n := *r.LaterLeaderChanges; n > 0 {
			lc.Runs = append(lc.Runs, r.Index)
			lc.Most = max(lc.Most, n)
		}
	}
	if lc.Measured == 0 {
		return nil
	}
	return &lc
}

// laterChangesCell is the summary table's cell: the runs whose leader
// changed again after settling, of those that measured it, "-" when none
// did.
func laterChangesCell(s Summary) string {
	if s.LaterChanges == nil {
		return "-"
	}
	cell := fmt.Sprintf("%d/%d", len(s.LaterChanges.Runs), s.LaterChanges.Measured)
	if len(s.LaterChanges.Runs) > 0 {
		cell += " !"
	}
	return cell
}

// laterChangesDefinition says under the summary table what its column of
// later leader changes counts.
const laterChangesDefinition = "later leader changes: runs whose leader changed again after settling (a new leader tenure after the time to leader, before any later fault), of the runs that counted them; ! flags a scenario with some"

// laterChangesLine flags, under the summary table, a scenario whose
// leader changed again after settling, naming the runs.
func laterChangesLine(key string, s Summary) string {
	lc := s.LaterChanges
	if lc == nil || len(lc.Runs) == 0 {
		return ""
	}
	which := "run " + joinInts(lc.Runs)
	if len(lc.Runs) > 1 {
		which = "runs " + joinInts(lc.Runs)
	}
	return fmt.Sprintf("%s: the leader changed again after settling in %d of %d runs (%s; at most %s): a leader change after the time to leader that no later fault explains",
		key, len(lc.Runs), lc.Measured, which, pluralChanges(lc.Most))
}

func pluralChanges(n int) string {
	if n == 1 {
		return "1 change"
	}
	return fmt.Sprintf("%d changes", n)
}

// anyLaterChanges reports whether some scenario of r measured later
// leader changes: the summary table then has their column.
func anyLaterChanges(rows []Summary) bool {
	for _, s := range rows {
		if s.LaterChanges != nil {
			return true
		}
	}
	return false
}
