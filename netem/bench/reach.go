package bench

import (
	"sort"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
)

// connectivity is which nodes run and which of their links carry traffic
// over a run, as its fault records say: a piecewise-constant state that
// changes at each record's Time. Impairments (delay, loss) leave a link
// up; only what the lab drops outright (a partition, an isolation, a cut)
// takes it down.
type connectivity struct {
	states []netState // by time; the first from the zero time: all up
}

// netState is the network and the processes from at on.
type netState struct {
	at time.Time
	// stopped are nodes whose processes do not run: crashed, left (until
	// a restart or join) or paused (until resumed).
	stopped map[string]bool
	// group is each node's group in the partition in force, from 0 (a
	// new partition replaces it); a node in no group is not in it.
	group    map[string]int
	oneWay   bool
	isolated map[string]bool
	// severs holds the directed links the cut in force severs, from and
	// to (a new cut replaces it): both ways unless the cut is one-way.
	severs map[[2]string]bool
}

// newConnectivity replays faults, in the order applied, from a network
// in which every node runs and reaches every other.
func newConnectivity(faults []fault.Fault) *connectivity {
	c := &connectivity{states: []netState{{stopped: map[string]bool{}, isolated: map[string]bool{}}}}
	for _, f := range faults {
		s := c.states[len(c.states)-1].clone()
		s.at = f.Time
		switch f.Kind {
		case fault.Partition:
			s.group, s.oneWay = groupIndex(f.Groups), f.OneWay
		case fault.Isolate:
			for _, n := range f.Nodes {
				s.isolated[n] = true
			}
		case fault.Unisolate:
			for _, n := range f.Nodes {
				delete(s.isolated, n)
			}
		case fault.Cut:
			s.severs = severedLinks(f.Links, f.OneWay)
		case fault.Heal:
			s.group, s.oneWay, s.severs = nil, false, nil
			s.isolated = map[string]bool{}
		default:
			switch f.Kind.Process() {
			case fault.ProcessEnded, fault.ProcessStopped:
				for _, n := range f.Nodes {
					s.stopped[n] = true
				}
			case fault.ProcessStarted, fault.ProcessContinued:
				for _, n := range f.Nodes {
					delete(s.stopped, n)
				}
			default:
				continue // nothing this model tracks changed
			}
		}
		c.states = append(c.states, s)
	}
	return c
}

func (s netState) clone() netState {
	out := s
	out.stopped = make(map[string]bool, len(s.stopped))
	for n := range s.stopped {
		out.stopped[n] = true
	}
	out.isolated = make(map[string]bool, len(s.isolated))
	for n := range s.isolated {
		out.isolated[n] = true
	}
	return out
}

// at is the state in force at t: that of the last record at or before t.
func (c *connectivity) at(t time.Time) *netState {
	i := sort.Search(len(c.states), func(i int) bool { return c.states[i].at.After(t) })
	return &c.states[max(i-1, 0)]
}

// changes are the times at which the state changes.
func (c *connectivity) changes() []time.Time {
	out := make([]time.Time, 0, len(c.states)-1)
	for _, s := range c.states[1:] {
		out = append(out, s.at)
	}
	return out
}

// runs reports whether n's process runs at t.
func (c *connectivity) runs(n string, t time.Time) bool { return !c.at(t).stopped[n] }

// sends reports whether what from sends reaches to at t: both run and
// nothing in force drops it. A node always reaches itself.
func (c *connectivity) sends(from, to string, t time.Time) bool {
	s := c.at(t)
	if s.stopped[from] || s.stopped[to] {
		return false
	}
	if from == to {
		return true
	}
	return !s.isolated[from] && !s.isolated[to] && !s.partitioned(from, to) && !s.severed(from, to)
}

// connected reports whether a and b reach each other both ways at t.
func (c *connectivity) connected(a, b string, t time.Time) bool {
	return c.sends(a, b, t) && c.sends(b, a, t)
}

// partitioned reports whether the partition drops what from sends to to:
// they are in different groups (one-way: from in the first, to in the
// second). A node in no group reaches everyone.
func (s *netState) partitioned(from, to string) bool {
	gf, okf := s.group[from]
	gt, okt := s.group[to]
	if !okf || !okt || gf == gt {
		return false
	}
	return !s.oneWay || gf == 0 && gt == 1
}

// cutsNothing reports whether nothing in force drops traffic between
// running nodes.
func (s *netState) cutsNothing() bool {
	return len(s.group) == 0 && len(s.isolated) == 0 && len(s.severs) == 0
}

// groupIndex maps each node of a partition to its group. The records,
// read one per run and state, are indexed once rather than scanned on
// every question judge asks of them.
func groupIndex(groups [][]string) map[string]int {
	out := map[string]int{}
	for i, g := range groups {
		for _, n := range g {
			out[n] = i
		}
	}
	return out
}

// severedLinks are the directed links a cut of links severs.
func severedLinks(links [][2]string, oneWay bool) map[[2]string]bool {
	out := make(map[[2]string]bool, 2*len(links))
	for _, l := range links {
		out[l] = true
		if !oneWay {
			out[[2]string{l[1], l[0]}] = true
		}
	}
	return out
}

// severed reports whether the cut drops what from sends to to.
func (s *netState) severed(from, to string) bool {
	return s.severs[[2]string{from, to}]
}
