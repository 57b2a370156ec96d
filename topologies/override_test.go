package topologies_test

import (
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/topologies"
)

func TestParseSettingOverride(t *testing.T) {
	for _, c := range []struct {
		in   string
		want topologies.SettingOverride
	}{
		{"failure_timeout=600ms", topologies.SettingOverride{Name: "failure_timeout", Value: 600 * time.Millisecond}},
		{"heartbeat = 50ms", topologies.SettingOverride{Name: "heartbeat", Value: 50 * time.Millisecond}},
		{"election_timeout=1s", topologies.SettingOverride{Name: "election_timeout", Value: time.Second}},
		{"detection_stagger=0", topologies.SettingOverride{Name: "detection_stagger"}},
	} {
		got, err := topologies.ParseSettingOverride(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseSettingOverride(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"failure_timout=600ms", `unknown setting "failure_timout"; did you mean failure_timeout? (names: heartbeat, failure_timeout, election_timeout, detection_stagger)`},
		{"subnet=10.0.0.0/8", `unknown setting "subnet" (names: heartbeat, failure_timeout, election_timeout, detection_stagger)`},
		{"failure_timeout=fast", `failure_timeout: "fast" is not a duration (want e.g. 600ms or 1.5s)`},
		{"heartbeat=-5ms", "heartbeat: -5ms is negative"},
		{"heartbeat=0", "heartbeat: must be positive"},
		{"heartbeat=1ms", "heartbeat: 1ms is below the floor of 10ms"},
		{"failure_timeout", `"failure_timeout": want NAME=DURATION, such as failure_timeout=600ms (names: heartbeat, failure_timeout, election_timeout, detection_stagger)`},
	} {
		_, err := topologies.ParseSettingOverride(c.in)
		if err == nil || err.Error() != c.want {
			t.Errorf("ParseSettingOverride(%q) = %v, want the error %q", c.in, err, c.want)
		}
	}
}

func TestWithSettings(t *testing.T) {
	topo, err := topologies.Load("star5")
	if err != nil {
		t.Fatal(err)
	}
	sets := []topologies.SettingOverride{
		{Name: "failure_timeout", Value: 700 * time.Millisecond},
		{Name: "election_timeout", Value: 300 * time.Millisecond},
		{Name: "failure_timeout", Value: 600 * time.Millisecond},
	}
	got, applied, err := topo.WithSettings(sets)
	if err != nil {
		t.Fatal(err)
	}
	want := []topologies.SettingOverride{
		{Name: "failure_timeout", Value: 600 * time.Millisecond, Was: 500 * time.Millisecond},
		{Name: "election_timeout", Value: 300 * time.Millisecond, Was: 200 * time.Millisecond},
	}
	if len(applied) != len(want) || applied[0] != want[0] || applied[1] != want[1] {
		t.Errorf("applied = %+v, want %+v", applied, want)
	}
	for _, n := range got.Nodes {
		if n.Settings.FailureTimeout != 600*time.Millisecond || n.Settings.ElectionTimeout != 300*time.Millisecond || n.Settings.Heartbeat != 100*time.Millisecond {
			t.Errorf("node %s settings %+v", n.Name, n.Settings)
		}
	}
	if topo.Nodes[0].Settings.FailureTimeout != 500*time.Millisecond {
		t.Errorf("WithSettings changed the topology it was called on: %+v", topo.Nodes[0].Settings)
	}
	if n, ok := got.Node("n3"); !ok || n.Settings.FailureTimeout != 600*time.Millisecond {
		t.Errorf("Node(n3) of the copy = %+v, %v", n, ok)
	}

	_, _, err = topo.WithSettings([]topologies.SettingOverride{{Name: "heartbeat", Value: 500 * time.Millisecond}})
	if err == nil || !strings.Contains(err.Error(), "heartbeat 500ms must be below failure_timeout 500ms") {
		t.Errorf("heartbeat at the failure timeout: %v, want the topology's rule", err)
	}
}

func FuzzParseSettingOverride(f *testing.F) {
	for _, s := range []string{"failure_timeout=600ms", "heartbeat=", "=", "detection_stagger=0", "x=1h", "election_timeout=9223372036s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := topologies.ParseSettingOverride(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of %q spans lines: %q", s, err)
			}
			return
		}
		if o.Value < 0 || o.Value == 0 && o.Name != "detection_stagger" {
			t.Fatalf("%q read as %+v", s, o)
		}
	})
}
