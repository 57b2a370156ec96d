package scenario_test

import (
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/topologies/fault"
)

// FuzzParse checks that any input either parses into a scenario that
// Format prints and Parse reads back unchanged, or fails with one line
// naming the file.
func FuzzParse(f *testing.F) {
	f.Add(scenario.Example)
	for _, seed := range []string{
		"steps:\n  - inject: {crash: leader}\n  - wait_leader\n",
		"start: cold\nsteps:\n  - inject: {restart: all}\n  - wait_leader: {timeout: 5s, expect: any, measure: true}\n",
		"steps:\n  - inject: {partition: {groups: [[n1, 'group:g'], rest], one_way: true}}\n  - wait_leader: {among: 'side:2'}\n  - heal\n",
		"steps:\n  - inject: {delay: {nodes: 'random:3', delay: 1.5ms, jitter: 0s}}\n  - wait: {duration: 1m}\n  - inject: {loss: {percent: 0.5%}}\n  - wait_election: {timeout: 2s}\n  - wait_leader\n",
		"labels: {a: b, c-d: '1.5'}\nname: x.y\ndescription: 'quoted: yes'\nsteps: [{inject: heal}, wait_leader]\n",
		"x: &a [1, 2]\nsteps: *a\n",
		"steps: &s [{inject: {crash: *s}}]\n",
		"? [a]\n: 1\n",
		"\"a\\nb\": 1\n",
		"steps:\n  - inject: {crash: " + strings.Repeat("x", 300) + "}\n",
		"steps:\n  - inject: {cut: {links: [[leader, 'rank:2'], [[n1, 'group:g'], 'top:2']], one_way: true, mode: reset}}\n  - wait: 1s\n  - heal\n  - wait_leader: {measure: true}\n",
		"steps:\n  - inject: {partition: {groups: [minority, rest], mode: drop}}\n  - inject: {isolate: {nodes: 'rank:3', mode: reset}}\n  - wait_leader\n",
		"steps:\n  - inject: {clock: {nodes: all, offset: -90s, rate: 500ppm}}\n  - inject: {clock: {nodes: n1, rate: -0.5}}\n  - wait_leader\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := scenario.Parse("fuzz.yaml", data)
		if err != nil {
			msg := err.Error()
			if strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("error is not one line: %q", msg)
			}
			if !strings.HasPrefix(msg, "fuzz.yaml") {
				t.Fatalf("error does not name the file: %q", msg)
			}
			if len(msg) > 1024 {
				t.Fatalf("error of %d bytes: %.2000q", len(msg), msg)
			}
			return
		}
		for i, st := range sc.Steps {
			ft := st.Fault
			if ft == nil {
				continue
			}
			if !ft.Mode.Valid() || ft.Mode != "" && ft.Kind != fault.Partition && ft.Kind != fault.Isolate && ft.Kind != fault.Cut {
				t.Fatalf("steps[%d]: %s with mode %q", i, ft.Kind, ft.Mode)
			}
			if err := ft.Clock.Validate(); err != nil {
				t.Fatalf("steps[%d]: %v", i, err)
			}
			for j, l := range ft.Links {
				if len(l.From) == 0 || len(l.To) == 0 {
					t.Fatalf("steps[%d]: link %d has an empty end: %+v", i, j, l)
				}
			}
			if (len(ft.Links) > 0) != (ft.Kind == fault.Cut) {
				t.Fatalf("steps[%d]: %s with %d links", i, ft.Kind, len(ft.Links))
			}
		}
		if err := sc.CheckNames("t", []string{"n1", "n2", "leader"}, map[string][]string{"g": {"n1"}}); err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\r\n") || !strings.HasPrefix(msg, "fuzz.yaml") || len(msg) > 1024 {
				t.Fatalf("CheckNames error is not one short line naming the file: %.2000q", msg)
			}
		}
		out, err := scenario.Format(sc)
		if err != nil {
			t.Fatalf("parsed scenario does not format: %v", err)
		}
		back, err := scenario.Parse("fuzz.yaml", out)
		if err != nil {
			t.Fatalf("formatted scenario does not parse: %v\n%s", err, out)
		}
		if !sameScenario(sc, back) {
			t.Fatalf("format and parse changed the scenario:\n%s", out)
		}
	})
}

func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{"leader", "top:3", "random", "random:2", "minority:random", "side:1", "rank:1", "rank:", "node:x", "group:g", "n1", "top:", ":", "random:01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := scenario.ParseSelector(s)
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\r\n") || len(msg) > 1024 {
				t.Fatalf("error is not one short line: %.2000q", msg)
			}
			return
		}
		back, err := scenario.ParseSelector(sel.String())
		if err != nil || back != sel {
			t.Fatalf("%q parsed as %+v, which prints as %q and reads back as %+v, %v", s, sel, sel.String(), back, err)
		}
	})
}
