package results

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// DiffersLine says in one line how the testbed of bench nw differs from
// base's: its topology's name and size, and each timing with what set it
// (bench --set, or the topology), such as "new.json differs:
// failure_timeout 500ms -> 600ms (--set)"; "" when they ran alike.
func DiffersLine(baseName string, base *Results, newName string, nw *Results) string {
	var parts []string
	bt, nt := base.Topology, nw.Topology
	if bt.Name != nt.Name && bt.Name != "" && nt.Name != "" {
		parts = append(parts, fmt.Sprintf("topology %s -> %s", clip(bt.Name), clip(nt.Name)))
	}
	if bt.Nodes != nt.Nodes && bt.Nodes > 0 && nt.Nodes > 0 {
		parts = append(parts, fmt.Sprintf("nodes %d -> %d", bt.Nodes, nt.Nodes))
	}
	// bench.txt keeps no timings: nothing to tell.
	if bt.Settings != (Timing{}) && nt.Settings != (Timing{}) {
		for _, f := range timingFields {
			b, n := f.of(bt.Settings), f.of(nt.Settings)
			if b == n {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %v -> %v%s", f.name, time.Duration(b), time.Duration(n), setBy(f.name, bt, nt)))
		}
		if len(bt.NodeSettings) != len(nt.NodeSettings) {
			parts = append(parts, fmt.Sprintf("nodes with timings of their own %d -> %d", len(bt.NodeSettings), len(nt.NodeSettings)))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return newName + " differs: " + strings.Join(parts, ", ")
}

// timingFields are a Timing's fields as a topology file names them.
var timingFields = []struct {
	name string
	of   func(Timing) int64
}{
	{"heartbeat", func(t Timing) int64 { return t.HeartbeatNS }},
	{"failure_timeout", func(t Timing) int64 { return t.FailureTimeoutNS }},
	{"election_timeout", func(t Timing) int64 { return t.ElectionTimeoutNS }},
	{"detection_stagger", func(t Timing) int64 { return t.DetectionStaggerNS }},
}

// setBy says which side's --set made a timing differ, "" when neither
// set it: the topologies differ.
func setBy(name string, base, nw TopologyInfo) string {
	set := func(t TopologyInfo) bool {
		return slices.ContainsFunc(t.Overrides, func(o SettingOverride) bool { return o.Name == name })
	}
	switch b, n := set(base), set(nw); {
	case b && n:
		return " (--set on both)"
	case n:
		return " (--set)"
	case b:
		return " (--set on the base)"
	}
	return " (topology)"
}
