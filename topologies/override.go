package topologies

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bullylab/bullylab/wire/bounded"
	"github.com/bullylab/bullylab/wire/suggest"
)

// SettingOverride is one election timing set for every node of a
// topology from outside its file (bench --set NAME=DURATION), so that a
// slower failure timeout needs no copy of the YAML.
type SettingOverride struct {
	// Name is the setting as a topology file names it: heartbeat,
	// failure_timeout, election_timeout or detection_stagger.
	Name  string
	Value time.Duration
	// Was is the value most of the topology's nodes had before, set by
	// WithSettings.
	Was time.Duration
}

// SettingNames are the timings a SettingOverride may set, as a topology
// file's settings name them.
func SettingNames() []string { return slices.Clone(settingsFields) }

// ParseSettingOverride reads NAME=DURATION, such as failure_timeout=600ms.
// An unknown name is an error listing the valid ones; a duration that is
// not one, or below the setting's floor, an error naming the setting.
func ParseSettingOverride(s string) (SettingOverride, error) {
	name, value, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok {
		return SettingOverride{}, fmt.Errorf("%s: want NAME=DURATION, such as failure_timeout=600ms (names: %s)",
			bounded.Quote(s), strings.Join(settingsFields, ", "))
	}
	if !slices.Contains(settingsFields, name) {
		return SettingOverride{}, fmt.Errorf("unknown setting %s%s (names: %s)",
			bounded.Quote(name), suggest.Hint(name, settingsFields), strings.Join(settingsFields, ", "))
	}
	d, err := time.ParseDuration(strings.TrimSpace(value))
	if err != nil {
		return SettingOverride{}, fmt.Errorf("%s: %s is not a duration (want e.g. 600ms or 1.5s)", name, bounded.Quote(value))
	}
	if d < 0 {
		return SettingOverride{}, fmt.Errorf("%s: %s is negative", name, d)
	}
	if d == 0 && name != "detection_stagger" {
		return SettingOverride{}, fmt.Errorf("%s: must be positive", name)
	}
	if floor := settingFloors[name]; d < floor && !(name == "detection_stagger" && d == 0) {
		return SettingOverride{}, fmt.Errorf("%s: %s is below the floor of %s", name, d, floor)
	}
	return SettingOverride{Name: name, Value: d}, nil
}

// WithSettings returns a copy of t whose every node has the timings sets
// give, a node's own timings in the file included, and sets with each one's
// Was filled in. A later set of a name wins over an earlier one. The file's
// rules still hold: a node whose heartbeat is not below its failure
// timeout is an error naming both.
func (t *Topology) WithSettings(sets []SettingOverride) (*Topology, []SettingOverride, error) {
	var applied []SettingOverride
	for _, s := range sets {
		if !slices.Contains(settingsFields, s.Name) {
			return nil, nil, fmt.Errorf("unknown setting %s (names: %s)", bounded.Quote(s.Name), strings.Join(settingsFields, ", "))
		}
		s.Was = t.commonSetting(s.Name)
		if i := slices.IndexFunc(applied, func(a SettingOverride) bool { return a.Name == s.Name }); i >= 0 {
			applied[i] = s
		} else {
			applied = append(applied, s)
		}
	}
	out := *t
	out.Nodes = slices.Clone(t.Nodes)
	for i := range out.Nodes {
		n := &out.Nodes[i]
		for _, s := range applied {
			*settingField(&n.Settings, s.Name) = s.Value
		}
		if n.Settings.Heartbeat >= n.Settings.FailureTimeout {
			return nil, nil, fmt.Errorf("node %s: heartbeat %s must be below failure_timeout %s", n.Name, n.Settings.Heartbeat, n.Settings.FailureTimeout)
		}
	}
	return &out, applied, nil
}

// commonSetting is the value most of t's nodes have for the setting name.
func (t *Topology) commonSetting(name string) time.Duration {
	counts := map[time.Duration]int{}
	var common time.Duration
	for i := range t.Nodes {
		v := *settingField(&t.Nodes[i].Settings, name)
		counts[v]++
		if counts[v] > counts[common] {
			common = v
		}
	}
	return common
}

// settingField is the field of s a settings name names; name must be one
// of settingsFields.
func settingField(s *Settings, name string) *time.Duration {
	switch name {
	case "heartbeat":
		return &s.Heartbeat
	case "failure_timeout":
		return &s.FailureTimeout
	case "election_timeout":
		return &s.ElectionTimeout
	case "detection_stagger":
		return &s.DetectionStagger
	}
	panic("topologies: no setting " + name)
}
