package node

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node/election"
)

// simView is what one node believes at an instant of a recorded run.
type simView struct {
	up     bool
	status election.Status
	leader int    // the node it follows or leads, -1 for none
	epoch  uint64 // its leader's epoch
}

// leads reports whether node i, whose view v is, declares itself leader.
func (v simView) leads(i int) bool {
	return v.up && v.status == election.StatusNormal && v.leader == i
}

// simRecord records, over virtual time, the leader each node believes in,
// whether it leads, and each change of its epoch and of its leader, so that
// a test can measure a run of faults it cannot see the end of.
type simRecord struct {
	s *simNetwork
	// views[k] is every node's view from at[k] until at[k+1].
	at    []time.Duration
	views [][]simView
	// wins and follows are the election_won and leader_changed events by
	// time; epochs the changes of each node's highest-seen epoch.
	wins    []simMark
	follows []simMark
	epochs  []simMark
	last    []uint64
	scratch []simView // reused by sample
}

// simMark is one recorded change: node moved to epoch at at.
type simMark struct {
	at    time.Duration
	node  int
	epoch uint64
}

// recordSim starts recording s from its current instant; sample must run
// after every event (runUntil's check) and after every fault that changes
// a view (a crash or a start).
func recordSim(s *simNetwork) *simRecord {
	r := &simRecord{s: s, last: make([]uint64, len(s.nodes))}
	for i, n := range s.nodes {
		if n.up {
			r.last[i] = n.m.Epoch()
		}
	}
	s.observe = func(n *simNode, e election.Event) {
		switch e.Kind {
		case election.EventElectionWon:
			r.wins = append(r.wins, simMark{s.now, n.idx, e.Epoch})
		case election.EventLeaderChanged:
			r.follows = append(r.follows, simMark{s.now, n.idx, e.Epoch})
		}
	}
	r.sample()
	return r
}

// sample records the views when they changed since the last sample.
func (r *simRecord) sample() {
	views := r.scratch[:0]
	for i, n := range r.s.nodes {
		v := simView{leader: -1}
		if n.up {
			v.up, v.status = true, n.m.Status()
			l, e := n.m.Leader()
			if ln := r.s.byID[l]; ln != nil {
				v.leader, v.epoch = ln.idx, e
			}
			if ep := n.m.Epoch(); ep != r.last[i] {
				r.last[i] = ep
				r.epochs = append(r.epochs, simMark{r.s.now, i, ep})
			}
		}
		views = append(views, v)
	}
	r.scratch = views
	if k := len(r.views); k > 0 && slices.Equal(r.views[k-1], views) {
		return
	}
	views = slices.Clone(views)
	if k := len(r.at); k > 0 && r.at[k-1] == r.s.now {
		r.views[k-1] = views
		return
	}
	r.at = append(r.at, r.s.now)
	r.views = append(r.views, views)
}

// simFigures is what a recorded window of a run measures. Reachability is
// the network's when figures is called: a window spans one fault state,
// measured before the next fault changes it.
type simFigures struct {
	// NoLeader is, per node, the time it was up without a leader it
	// reaches both ways (itself, when it leads).
	NoLeader []time.Duration
	// Unavailable is the time from the window's start until every live node
	// follows one leader it reaches both ways, and keeps doing so to the
	// window's end; -1 when that never happened.
	Unavailable time.Duration
	// Wins counts the elections won (a node declaring itself leader of a
	// new epoch): the leader changes. Follows counts the nodes' changes of
	// leader or of its epoch.
	Wins, Follows int
	// Leaders are the nodes that declared themselves leader at some point.
	Leaders []int
	// DualLeaders is the time two self-declared leaders that reach each
	// other both ways coexisted.
	DualLeaders time.Duration
	// EpochChanges counts the changes of the nodes' highest-seen epochs.
	EpochChanges int
	// Quiet is the time from the window's start to the last election won
	// or leader followed in it (0 for none): when the views settled, into a
	// leader or not.
	Quiet time.Duration
	// Verdict is converged (one reachable leader for all from some time
	// on to the window's end), flapping (not converged, two or more
	// elections won in the window, one within its last quarter), or stuck
	// (neither: the views stopped changing without converging). These are
	// the bench's rules (netem/bench's availability), so that a verdict
	// predicted here and one measured on a testbed mean the same.
	Verdict string
}

func (f simFigures) String() string {
	unavail := "never"
	if f.Unavailable >= 0 {
		unavail = f.Unavailable.Round(time.Millisecond).String()
	}
	maxNo := time.Duration(0)
	for _, d := range f.NoLeader {
		maxNo = max(maxNo, d)
	}
	return fmt.Sprintf("%s unavailable=%s wins=%d leaders=%v dual=%v epochs=%d quiet=%v max-no-leader=%v",
		f.Verdict, unavail, f.Wins, f.Leaders, f.DualLeaders.Round(time.Millisecond), f.EpochChanges, f.Quiet.Round(time.Millisecond), maxNo.Round(time.Millisecond))
}

// figures measures the window [from, to] of the recording.
func (r *simRecord) figures(from, to time.Duration) simFigures {
	n := len(r.s.nodes)
	reach := func(a, b int) bool { return r.s.reaches(a, b) && r.s.reaches(b, a) }
	f := simFigures{NoLeader: make([]time.Duration, n), Unavailable: -1}
	leaders := map[int]bool{}
	settledSince, settledOn := time.Duration(-1), -1
	for k, views := range r.views {
		start, end := max(r.at[k], from), to
		if k+1 < len(r.at) {
			end = min(r.at[k+1], to)
		}
		if end <= start {
			continue
		}
		span := end - start
		var leading []int
		for i, v := range views {
			if v.leads(i) {
				leading = append(leading, i)
				leaders[i] = true
			}
		}
		one := -1
		settled := true
		for i, v := range views {
			if !v.up {
				continue
			}
			led := v.status == election.StatusNormal && v.leader >= 0 &&
				views[v.leader].leads(v.leader) && reach(i, v.leader)
			if !led {
				f.NoLeader[i] += span
				settled = false
			} else if one == -1 {
				one = v.leader
			} else if one != v.leader {
				settled = false
			}
		}
		switch {
		case !settled || one == -1:
			settledSince = -1
		case settledSince < 0 || one != settledOn:
			settledSince, settledOn = start, one
		}
	dual:
		for a := range leading {
			for _, b := range leading[a+1:] {
				if reach(leading[a], b) {
					f.DualLeaders += span
					break dual
				}
			}
		}
	}
	if settledSince >= 0 {
		f.Unavailable = settledSince - from
	}
	f.Leaders = slices.Sorted(func(yield func(int) bool) {
		for l := range leaders {
			if !yield(l) {
				return
			}
		}
	})
	lastQuarter := to - (to-from)/4
	late := 0
	for _, w := range r.wins {
		if w.at > from && w.at <= to {
			f.Wins++
			if w.at >= lastQuarter {
				late++
			}
		}
	}
	for _, marks := range [][]simMark{r.wins, r.follows} {
		for _, m := range marks {
			if m.at > from && m.at <= to {
				f.Quiet = max(f.Quiet, m.at-from)
			}
		}
	}
	for _, m := range r.follows {
		if m.at > from && m.at <= to {
			f.Follows++
		}
	}
	for _, m := range r.epochs {
		if m.at > from && m.at <= to {
			f.EpochChanges++
		}
	}
	switch {
	case settledSince >= 0:
		f.Verdict = "converged"
	case late > 0 && f.Wins >= 2:
		f.Verdict = "flapping"
	default:
		f.Verdict = "stuck"
	}
	return f
}

// describe spells out every node's view at the end of the recording.
func (r *simRecord) describe() string {
	if len(r.views) == 0 {
		return ""
	}
	var parts []string
	for i, v := range r.views[len(r.views)-1] {
		switch {
		case !v.up:
			parts = append(parts, fmt.Sprintf("n%d:down", i))
		case v.leader < 0:
			parts = append(parts, fmt.Sprintf("n%d:%s", i, v.status))
		default:
			parts = append(parts, fmt.Sprintf("n%d:%s/n%d@%d", i, v.status, v.leader, v.epoch))
		}
	}
	return strings.Join(parts, " ")
}

// TestSimRecordLeaderCrash checks the recorder's figures on a run whose
// outcome is known: the leader of five Bully nodes crashes, the next
// highest takes over within one detection and one HALT round, and the
// window converges.
func TestSimRecordLeaderCrash(t *testing.T) {
	cfg := election.DefaultConfig()
	s := newSimNetwork(t, 3, 5, cfg)
	s.maxDly = simMaxDelay
	for i := range 5 {
		s.start(i)
	}
	s.runUntil(3*time.Second, nil)
	rec := recordSim(s)
	from := s.now
	s.crash(4)
	rec.sample() // a fault changes views between events
	s.runUntil(from+10*time.Second, rec.sample)
	f := rec.figures(from, from+10*time.Second)
	bound := cfg.FailureTimeout + cfg.HeartbeatInterval + cfg.ElectionTimeout
	if f.Verdict != "converged" || f.Unavailable <= 0 || f.Unavailable > bound {
		t.Errorf("verdict %s, unavailable %v: want converged within %v", f.Verdict, f.Unavailable, bound)
	}
	if f.Wins != 1 || !slices.Equal(f.Leaders, []int{3}) || f.DualLeaders != 0 {
		t.Errorf("wins %d, leaders %v, two reachable leaders for %v: want n3 winning once, alone", f.Wins, f.Leaders, f.DualLeaders)
	}
	for i, d := range f.NoLeader[:4] {
		if d <= 0 || d > f.Unavailable {
			t.Errorf("n%d without a leader for %v, want some of the %v unavailable", i, d, f.Unavailable)
		}
	}
	if f.NoLeader[4] != 0 {
		t.Errorf("the crashed n4 counted %v without a leader", f.NoLeader[4])
	}
}
