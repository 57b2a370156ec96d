package scenario_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem/scenario"
)

func TestParseSelector(t *testing.T) {
	for _, s := range []string{"leader", "highest", "lowest", "all", "rest", "random", "random:3",
		"top:2", "bottom:1", "rank:3", "minority", "majority", "minority:random", "majority:random", "side:2",
		"n7", "site-a", "node:leader", "group:top"} {
		sel, err := scenario.ParseSelector(s)
		if err != nil {
			t.Errorf("%q: %v", s, err)
			continue
		}
		if sel.String() != s {
			t.Errorf("%q prints as %q", s, sel.String())
		}
	}
	if sel, _ := scenario.ParseSelector("random:1"); sel.String() != "random" {
		t.Errorf("random:1 prints as %q, want random", sel)
	}
	for _, s := range []string{"", "top:0", "top:1001", "rank:0", "rank:1001", "rank", "rank:-1", "random:-1", "side:x", "minority:low",
		"node:", "group:Bad", "Leader", "-n1", "n1,n2", "top", "x:y", "a-very-long-node-name"} {
		if sel, err := scenario.ParseSelector(s); err == nil {
			t.Errorf("%q parsed as %v", s, sel)
		}
	}
}

// A testbed of seven nodes whose IDs do not follow their names: c is the
// lowest, g the highest.
func sevenView() scenario.View {
	v := scenario.InitialView([]string{"c", "a", "f", "b", "e", "d", "g"}, map[string][]string{"west": {"a", "b"}}, scenario.StartStable)
	return v
}

func resolveOne(t *testing.T, v scenario.View, yaml string) (scenario.Action, error) {
	t.Helper()
	sc, err := scenario.Parse("t.yaml", []byte("steps:\n  - "+yaml+"\n  - wait_leader: {measure: true}\n"))
	if err != nil {
		t.Fatalf("%s: %v", yaml, err)
	}
	sched, err := scenario.Resolve(sc, v, scenario.NewRand(1))
	if err != nil {
		return scenario.Action{}, err
	}
	return sched[0], nil
}

func TestResolveSelectors(t *testing.T) {
	v := sevenView()
	v.Nodes[1].Status = scenario.StatusCrashed // a
	v.Nodes[5].Status = scenario.StatusPaused  // d
	// Live, lowest ID first: c f b e g. Five live nodes: minority 2, majority 3.
	checkResolved(t, v, []struct{ step, want string }{
		{"inject: {crash: leader}", "crash g"},
		{"inject: {crash: highest}", "crash g"},
		{"inject: {crash: lowest}", "crash c"},
		{"inject: {crash: 'top:2'}", "crash e,g"},
		{"inject: {crash: 'bottom:2'}", "crash c,f"},
		{"inject: {crash: minority}", "crash e,g"},
		{"inject: {crash: majority}", "crash b,e,g"},
		{"inject: {crash: [leader, highest]}", "crash e,g"}, // highest of what leader left
		{"inject: {crash: [f, c]}", "crash c,f"},            // ID order, not file order
		{"inject: {restart: all}", "restart a"},             // the pool of restart: crashed nodes
		{"inject: {resume: highest}", "resume d"},
		{"inject: {campaign: all}", "campaign c,f,b,e,g"},
		{"inject: {pause: west}", ""}, // a is crashed: not in the pool
		{"inject: {delay: {nodes: west, delay: 5ms}}", "delay 5ms on a,b"},
		{"inject: {partition: {groups: [minority, rest]}}", "partition e,g | c,a,f,b,d"},
		{"inject: {partition: {groups: [rest, [a, 'top:1']]}}", "partition c,f,b,e,d | a,g"},
		{"inject: {partition: {groups: [leader, rest], one_way: true}}", "partition g -> c,a,f,b,e,d"},
	})
}

// checkResolved resolves each case's step against v: it must come out as
// want without its "inject ", or fail where want is "".
func checkResolved(t *testing.T, v scenario.View, cases []struct{ step, want string }) {
	t.Helper()
	for _, tc := range cases {
		a, err := resolveOne(t, v, tc.step)
		if tc.want == "" {
			if err == nil {
				t.Errorf("%s: resolved to %q, want an error", tc.step, a)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.step, err)
			continue
		}
		if got := strings.TrimPrefix(a.String(), "inject "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.step, got, tc.want)
		}
	}
}

func TestResolveErrors(t *testing.T) {
	v := sevenView()
	for _, tc := range []struct{ step, want string }{
		{"inject: {crash: 'top:8'}", "step 1 (inject): crash: top:8: needs 8 live nodes, 7 left to choose from"},
		{"inject: {restart: a}", "step 1 (inject): restart: a is live, not crashed"},
		{"inject: {restart: all}", "step 1 (inject): restart: all: no crashed node to select"},
		{"inject: {crash: zz}", `step 1 (inject): crash: unknown node or group "zz"`},
		{"inject: {crash: 'group:a'}", `step 1 (inject): crash: unknown group "a"`},
		{"inject: {partition: {groups: [[a, b], [b, c]]}}", "step 1 (inject): partition: b is in groups[0] and groups[1]"},
		{"inject: {partition: {groups: [a, b]}}", "step 1 (inject): partition: c,f,e,d,g in no group (add rest as a group)"},
		{"inject: {crash: 'side:1'}", "step 1 (inject): crash: side:1: no partition in force"},
		{"inject: {unisolate: all}", "step 1 (inject): unisolate: all: no isolated node to select"},
	} {
		_, err := resolveOne(t, v, tc.step)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s:\n got %v\nwant %s", tc.step, err, tc.want)
		}
	}

	cold := scenario.InitialView([]string{"a", "b"}, nil, scenario.StartCold)
	if _, err := resolveOne(t, cold, "inject: {crash: leader}"); err == nil || !strings.Contains(err.Error(), "follow no leader") {
		t.Errorf("leader on a cold testbed: %v", err)
	}
	two := scenario.InitialView([]string{"a", "b"}, nil, scenario.StartStable)
	if _, err := resolveOne(t, two, "inject: {isolate: minority}"); err == nil || !strings.Contains(err.Error(), "no node to select among 2 live nodes") {
		t.Errorf("minority of two: %v", err)
	}
}

// wait_leader waits for the largest connected part of the network.
func TestResolveConnectedPart(t *testing.T) {
	v := scenario.InitialView([]string{"n1", "n2", "n3", "n4", "n5", "n6"}, nil, scenario.StartStable)
	for _, tc := range []struct{ steps, want string }{
		{"inject: {crash: n2}", "n1,n3,n4,n5,n6"},
		{"inject: {isolate: [n6, n1]}", "n2,n3,n4,n5"},
		{"inject: {partition: {groups: [[n1, n2], rest]}}", "n3,n4,n5,n6"},
		// A tie goes to the side with the highest node.
		{"inject: {partition: {groups: [[n1, n2, n6], rest]}}", "n1,n2,n6"},
		// Live nodes count: crashing three of the larger side turns the tables.
		{"inject: {crash: [n3, n4, n5]}\n  - inject: {partition: {groups: [[n1, n2], rest]}}", "n1,n2"},
		{"inject: {partition: {groups: ['top:4', rest], one_way: true}}", "n1,n2"},
		{"inject: {partition: {groups: [minority, rest]}}\n  - wait_leader: {among: 'side:1'}\n  - heal", "n5,n6"},
		{"inject: {partition: {groups: [minority, rest]}}\n  - heal", "n1,n2,n3,n4,n5,n6"},
	} {
		sc, err := scenario.Parse("t.yaml", []byte("steps:\n  - "+tc.steps+"\n  - wait_leader: {measure: true}\n"))
		if err != nil {
			t.Fatalf("%s: %v", tc.steps, err)
		}
		sched, err := scenario.Resolve(sc, v, scenario.NewRand(1))
		if err != nil {
			t.Errorf("%s: %v", tc.steps, err)
			continue
		}
		// The first wait_leader of the schedule.
		for _, a := range sched {
			if a.Kind == scenario.StepWaitLeader {
				if got := strings.Join(a.Nodes, ","); got != tc.want {
					t.Errorf("%s: waits for %s, want %s", tc.steps, got, tc.want)
				}
				break
			}
		}
	}
}

func TestResolveSameSeedSameSchedule(t *testing.T) {
	f := starFake(16)
	scs, err := scenario.Builtin("chaos", scenario.Params{Nodes: 16, Seed: 3, Faults: 30})
	if err != nil {
		t.Fatal(err)
	}
	sc := scs[0]
	v := f.view()
	a, err := scenario.Resolve(sc, v, scenario.NewRand(42))
	if err != nil {
		t.Fatal(err)
	}
	b, err := scenario.Resolve(sc, v, scenario.NewRand(42))
	if err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Fatalf("one seed, two schedules:\n%s\n%s", a, b)
	}
	distinct := map[string]bool{}
	for seed := range int64(10) {
		s, err := scenario.Resolve(sc, v, scenario.NewRand(seed))
		if err != nil {
			t.Fatal(err)
		}
		distinct[s.String()] = true
	}
	if len(distinct) < 9 {
		t.Errorf("10 seeds gave %d distinct schedules of 30 random faults", len(distinct))
	}
}

// A step draws from a generator of its own, so the draws of earlier steps
// do not move its choice.
func TestResolveStepsDrawIndependently(t *testing.T) {
	v := starFake(16).view()
	pick := func(first string) string {
		sc, err := scenario.Parse("t.yaml", []byte(fmt.Sprintf(`
steps:
  - inject: {campaign: '%s'}
  - inject: {campaign: random}
  - wait_leader
`, first)))
		if err != nil {
			t.Fatal(err)
		}
		s, err := scenario.Resolve(sc, v, scenario.NewRand(9))
		if err != nil {
			t.Fatal(err)
		}
		return s[1].String()
	}
	if a, b := pick("random"), pick("random:12"); a != b {
		t.Errorf("step 2 picked %q after a random, %q after a random:12", a, b)
	}
}

// TestCheckNames: a step naming a node or group the topology lacks is
// found before anything runs, with the file, the step's line and field,
// and the name.
func TestCheckNames(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4", "n5"}
	groups := map[string][]string{"site-a": {"n1", "n2"}, "site-b": {"n3", "n4", "n5"}}
	for _, tc := range []struct{ src, want string }{
		{"steps:\n  - inject: {crash: n9}\n  - wait_leader\n",
			`s.yaml:2: steps[0].inject.crash: topology two-site has no node or group "n9" (its 5 nodes are n1 to n5; its groups are site-a, site-b)`},
		{"steps:\n  - inject: {crash: [leader, 'node:site-a']}\n  - wait_leader\n",
			`s.yaml:2: steps[0].inject.crash: topology two-site has no node "site-a" (its 5 nodes are n1 to n5)`},
		{"steps:\n  - inject: {crash: leader}\n  - wait_leader: {among: ['group:n1']}\n",
			`s.yaml:3: steps[1].wait_leader.among: topology two-site has no group "n1" (its groups are site-a, site-b)`},
		{"steps:\n  - wait: 1s\n  - inject: {partition: {groups: [site-a, [n3, x]]}}\n  - wait_leader\n",
			`s.yaml:3: steps[1].inject.partition.groups[1]: topology two-site has no node or group "x"`},
		{"steps:\n  - inject: {delay: {nodes: n6, delay: 5ms}}\n  - wait_leader\n",
			`s.yaml:2: steps[0].inject.delay.nodes: topology two-site has no node or group "n6"`},
		{"steps:\n  - inject: {crash: [site-b, n1]}\n  - inject: {restart: 'node:n1'}\n  - wait_leader: {among: [group:site-a]}\n", ""},
	} {
		sc, err := scenario.Parse("s.yaml", []byte(tc.src))
		if err != nil {
			t.Fatal(err)
		}
		err = sc.CheckNames("two-site", nodes, groups)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.src, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%q:\n got %v\nwant %s", tc.src, err, tc.want)
		}
	}
	// Built-ins name no node: they fit every topology.
	for _, name := range scenario.BuiltinNames() {
		scs, err := scenario.Builtin(name, scenario.Params{Nodes: 5})
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range scs {
			if err := sc.CheckNames("star5", nodes, nil); err != nil {
				t.Errorf("built-in %s: %v", name, err)
			}
		}
	}
}
