package scenario_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/topologies/fault"
)

func TestParseCutModeClock(t *testing.T) {
	src := `
steps:
  - inject: {cut: {links: [[leader, 'rank:2'], [[n1, n2], 'top:2']], one_way: true, mode: reset}}
  - inject: {cut: {links: [['bottom:3', 'bottom:3']]}}
  - inject: {partition: {groups: [minority, rest], mode: reset}}
  - inject: {isolate: {nodes: lowest, mode: drop}}
  - inject: {isolate: 'rank:3'}
  - inject: {clock: {nodes: [n1, n2], offset: -90s, rate: 500ppm}}
  - inject: {clock: {nodes: all, rate: -20}}
  - inject: {clock: {nodes: n3}}
  - wait_leader
`
	sc, err := scenario.Parse("c.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	cut := sc.Steps[0].Fault
	if len(cut.Links) != 2 || cut.Links[0].From.String() != "leader" || cut.Links[0].To.String() != "rank:2" ||
		cut.Links[1].From.String() != "n1,n2" || cut.Links[1].To.String() != "top:2" || !cut.OneWay || cut.Mode != fault.ModeReset {
		t.Errorf("cut: %+v", cut)
	}
	if m := sc.Steps[1].Fault.Mode; m != "" || sc.Steps[1].Fault.OneWay {
		t.Errorf("cut without mode or one_way: mode %q one-way %v", m, sc.Steps[1].Fault.OneWay)
	}
	if m := sc.Steps[2].Fault.Mode; m != fault.ModeReset {
		t.Errorf("partition mode %q", m)
	}
	if f := sc.Steps[3].Fault; f.Mode != fault.ModeDrop || f.Nodes.String() != "lowest" {
		t.Errorf("isolate long form: %+v", f)
	}
	if f := sc.Steps[4].Fault; f.Mode != "" || f.Nodes.String() != "rank:3" {
		t.Errorf("isolate short form: %+v", f)
	}
	if c := sc.Steps[5].Fault.Clock; c.Offset != -90*time.Second || c.RatePPM != 500 {
		t.Errorf("clock: %+v", c)
	}
	if c := sc.Steps[6].Fault.Clock; c.Offset != 0 || c.RatePPM != -20 {
		t.Errorf("clock rate alone: %+v", c)
	}
	if c := sc.Steps[7].Fault.Clock; c != (fault.ClockSkew{}) {
		t.Errorf("clock back to the host's: %+v", c)
	}
	out, err := scenario.Format(sc)
	if err != nil {
		t.Fatal(err)
	}
	back, err := scenario.Parse("c.yaml", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !sameScenario(sc, back) {
		t.Errorf("format and parse changed the scenario:\n%s", out)
	}
	for _, want := range []string{"one_way: true", "mode: reset", "offset: -1m30s", "rate: 500ppm", "rate: -20ppm", "isolate: {nodes: lowest, mode: drop}", "isolate: 'rank:3'"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("formatted file lacks %q:\n%s", want, out)
		}
	}
}

func TestParseCutModeClockErrors(t *testing.T) {
	checkParseErrors(t, []struct{ in, want string }{
		{"steps:\n  - inject: {cut: {one_way: true}}\n", "e.yaml:2: steps[0].inject.cut.links: missing"},
		{"steps:\n  - inject: {cut: {links: []}}\n", "e.yaml:2: steps[0].inject.cut.links: no links"},
		{"steps:\n  - inject: {cut: {links: [leader]}}\n", "e.yaml:2: steps[0].inject.cut.links[0]: want a link [SEL, SEL], got a single value"},
		{"steps:\n  - inject: {cut: {links: [[leader]]}}\n", "e.yaml:2: steps[0].inject.cut.links[0]: want a link [SEL, SEL], got 1 entries"},
		{"steps:\n  - inject: {cut: {links: [[leader, 'top:x']]}}\n", `e.yaml:2: steps[0].inject.cut.links[0][1]: "top:x": want top:N`},
		{"steps:\n  - inject: {cut: {links: [[leader, highest]], mode: rst}}\n", `e.yaml:2: steps[0].inject.cut.mode: unknown mode "rst" (want drop or reset)`},
		{"steps:\n  - inject: {cut: {links: [[a, b]], oneway: true}}\n", `e.yaml:2: steps[0].inject.cut.oneway: unknown field (want links, one_way, mode)`},
		{"steps:\n  - inject: {partition: {groups: [leader, rest], mode: ''}}\n", `e.yaml:2: steps[0].inject.partition.mode: unknown mode ""`},
		{"steps:\n  - inject: {isolate: {mode: reset}}\n", "e.yaml:2: steps[0].inject.isolate.nodes: missing"},
		{"steps:\n  - inject: {isolate: {nodes: leader, one_way: true}}\n", "e.yaml:2: steps[0].inject.isolate.one_way: unknown field (want nodes, mode)"},
		{"steps:\n  - inject: {crash: {nodes: leader, mode: reset}}\n", "e.yaml:2: steps[0].inject.crash: want a single value, got a mapping"},
		{"steps:\n  - inject: {clock: {offset: 1s}}\n", "e.yaml:2: steps[0].inject.clock.nodes: missing"},
		{"steps:\n  - inject: {clock: leader}\n", "e.yaml:2: steps[0].inject.clock: want a mapping"},
		{"steps:\n  - inject: {clock: {nodes: all, offset: soon}}\n", `e.yaml:2: steps[0].inject.clock.offset: "soon" is not a duration`},
		{"steps:\n  - inject: {clock: {nodes: all, offset: 1000000h}}\n", "e.yaml:2: steps[0].inject.clock.offset: clock offset 1000000h0m0s: beyond"},
		{"steps:\n  - inject: {clock: {nodes: all, rate: fast}}\n", `e.yaml:2: steps[0].inject.clock.rate: "fast" is not a rate in ppm`},
		{"steps:\n  - inject: {clock: {nodes: all, rate: 200000ppm}}\n", "e.yaml:2: steps[0].inject.clock.rate: clock rate 200000 ppm: beyond ±100000 ppm"},
		{"steps:\n  - inject: {clock: {nodes: all, rate: NaN}}\n", "e.yaml:2: steps[0].inject.clock.rate: clock rate NaN ppm"},
		{"steps:\n  - inject: {clock: {nodes: all, rate: -Inf}}\n", `e.yaml:2: steps[0].inject.clock.rate: "-Inf" is not a rate in ppm`},
		{"steps:\n  - inject: {crash: 'rank:0'}\n", `e.yaml:2: steps[0].inject.crash: "rank:0": want rank:N with N in 1..1000`},
		{"steps:\n  - inject: {crash: rank}\n", `e.yaml:2: steps[0].inject.crash: "rank" needs an argument after a colon`},
	})
}

// TestValidateCutModeClock: scenarios built in code are held to what the
// parser checks, with the field named.
func TestValidateCutModeClock(t *testing.T) {
	leader := scenario.Selectors{{Kind: scenario.SelLeader}}
	for _, tc := range []struct {
		ft   scenario.Injection
		want string
	}{
		{scenario.Injection{Kind: fault.Cut}, "steps[0].inject.cut.links: no links"},
		{scenario.Injection{Kind: fault.Cut, Links: []scenario.Link{{From: leader}}}, "steps[0].inject.cut.links[0][1]: selects no node"},
		{scenario.Injection{Kind: fault.Crash, Nodes: leader, Mode: fault.ModeReset}, "steps[0].inject.crash.mode: only partition, isolate and cut take a mode"},
		{scenario.Injection{Kind: fault.Isolate, Nodes: leader, Mode: "rst"}, `steps[0].inject.isolate.mode: unknown mode "rst"`},
		{scenario.Injection{Kind: fault.Isolate, Nodes: leader, OneWay: true}, "steps[0].inject.isolate.one_way: only partition and cut are one-way"},
		{scenario.Injection{Kind: fault.Clock}, "steps[0].inject.clock.nodes: selects no node"},
		{scenario.Injection{Kind: fault.Clock, Nodes: leader, Clock: fault.ClockSkew{RatePPM: 1e6}}, "steps[0].inject.clock.rate: clock rate"},
		{scenario.Injection{Kind: fault.Clock, Nodes: leader, Clock: fault.ClockSkew{Offset: -fault.MaxClockOffset - 1}}, "steps[0].inject.clock.offset: clock offset"},
	} {
		ft := tc.ft
		sc := &scenario.Scenario{Name: "v", Start: scenario.StartStable, Source: "code", Steps: []scenario.Step{
			{Kind: scenario.StepInject, Fault: &ft},
			{Kind: scenario.StepWaitLeader, Timeout: time.Second, Expect: scenario.ExpectAny},
		}}
		err := sc.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), "code: "+tc.want) {
			t.Errorf("%+v: %v, want %s...", tc.ft, err, tc.want)
		}
	}
}

func TestResolveCut(t *testing.T) {
	v := sevenView()
	v.Nodes[1].Status = scenario.StatusCrashed // a
	// Live, lowest ID first: c f b e d g; a is down.
	checkResolved(t, v, []struct{ step, want string }{
		{"inject: {cut: {links: [[leader, 'rank:2']]}}", "cut d-g"},
		{"inject: {cut: {links: [['rank:2', leader]], one_way: true, mode: reset}}", "cut d->g mode reset"},
		{"inject: {cut: {links: [['top:3', 'top:3']]}}", "cut e-d,e-g,d-g"},
		{"inject: {cut: {links: [['top:2', 'top:2']], one_way: true}}", "cut d->g,g->d"},
		{"inject: {cut: {links: [[a, all]]}}", "cut c-a,a-f,a-b,a-e,a-d,a-g"}, // a name may be down
		{"inject: {cut: {links: [[west, 'rank:1'], [g, b]]}}", "cut a-g,b-g"}, // each pair once
		{"inject: {cut: {links: [[[c, 'rank:1'], 'rank:2']]}}", "cut c-d,d-g"},
		{"inject: {isolate: {nodes: 'rank:6', mode: reset}}", "isolate c mode reset"},
		{"inject: {partition: {groups: [['rank:1', 'rank:2'], rest], mode: reset}}", "partition d,g | c,a,f,b,e mode reset"},
		{"inject: {clock: {nodes: [leader, 'rank:2'], offset: 90s, rate: -500ppm}}", "clock offset +1m30s rate -500ppm on d,g"},
		{"inject: {clock: {nodes: a, offset: 1s}}", "clock offset +1s on a"}, // down: gets it when it starts
		{"inject: {clock: {nodes: all}}", "clock host clock on c,a,f,b,e,d,g"},
		{"inject: {crash: ['rank:2', 'rank:3']}", "crash e,d"}, // ranks count the whole pool
		{"inject: {crash: ['top:1', 'rank:1']}", "crash g"},
		{"inject: {restart: 'rank:1'}", "restart a"},
		{"inject: {crash: 'rank:7'}", ""},
		{"inject: {cut: {links: [[g, g]]}}", ""},
		{"inject: {cut: {links: [[g, 'rank:9']]}}", ""},
	})
	for _, tc := range []struct{ step, want string }{
		{"inject: {cut: {links: [[g, g]]}}", "step 1 (inject): cut: links[0] joins g to itself"},
		{"inject: {cut: {links: [[g, 'rank:9']]}}", "step 1 (inject): cut: links[0][1]: rank:9: needs 9 live nodes, the testbed has 6"},
		{"inject: {crash: 'rank:7'}", "step 1 (inject): crash: rank:7: needs 7 live nodes, the testbed has 6"},
	} {
		if _, err := resolveOne(t, v, tc.step); err == nil || err.Error() != tc.want {
			t.Errorf("%s:\n got %v\nwant %s", tc.step, err, tc.want)
		}
	}
}

// TestResolveWaitUnderCut: wait_leader waits for the largest connected
// component of the links up both ways, every live node when the cut
// leaves the graph connected; heal undoes the cuts; side:N needs a
// partition.
func TestResolveWaitUnderCut(t *testing.T) {
	names := []string{"n1", "n2", "n3", "n4", "n5"}
	for _, tc := range []struct{ steps, want string }{
		// A chain n5-n1-n4 plus n2, n3: connected.
		{"- inject: {cut: {links: [[n5, [n4, n3, n2]]]}}\n- wait_leader\n", "2. wait_leader among n1,n2,n3,n4,n5"},
		// n5 and n4 cut from everyone: n1..n3 remain.
		{"- inject: {cut: {links: [['top:2', all]]}}\n- wait_leader\n", "2. wait_leader among n1,n2,n3"},
		// One way is enough to break a link for agreement.
		{"- inject: {cut: {links: [[n5, all]], one_way: true}}\n- wait_leader\n", "2. wait_leader among n1,n2,n3,n4"},
		// Two components of two, n1 alone: the tie goes to the higher.
		{"- inject: {cut: {links: [[[n4, n5], [n1, n2, n3]], [n1, [n2, n3]]]}}\n- wait_leader\n", "2. wait_leader among n4,n5"},
		// A partition and a cut inside one side.
		{"- inject: {partition: {groups: [[n1, n2], rest]}}\n- inject: {cut: {links: [[n5, all]]}}\n- wait_leader\n", "3. wait_leader among n3,n4"},
		// An isolated node is a component of its own.
		{"- inject: {isolate: n1}\n- inject: {cut: {links: [[n5, n4]]}}\n- wait_leader\n", "3. wait_leader among n2,n3,n4,n5"},
		// A cut replaces the one in force, and heal undoes it.
		{"- inject: {cut: {links: [['top:2', all]]}}\n- inject: {cut: {links: [[n1, all]]}}\n- wait_leader\n- heal\n- wait_leader\n",
			"3. wait_leader among n2,n3,n4,n5 expect highest-live timeout 30s\n4. heal uncut n1-n2,n1-n3,n1-n4,n1-n5\n5. wait_leader among n1,n2,n3,n4,n5"},
		{"- inject: {cut: {links: [[n5, all]]}}\n- inject: heal\n- wait_leader\n", "3. wait_leader among n1,n2,n3,n4,n5"},
	} {
		sc, err := scenario.Parse("w.yaml", []byte("steps:\n"+tc.steps))
		if err != nil {
			t.Fatalf("%s: %v", tc.steps, err)
		}
		sched, err := scenario.Resolve(sc, scenario.InitialView(names, nil, scenario.StartStable), scenario.NewRand(1))
		if err != nil {
			t.Errorf("%s: %v", tc.steps, err)
			continue
		}
		if !strings.Contains(sched.String(), tc.want) {
			t.Errorf("%s:\n%s\nwant %q", tc.steps, sched, tc.want)
		}
	}
	sc, err := scenario.Parse("w.yaml", []byte("steps:\n- inject: {cut: {links: [[n5, n4]]}}\n- inject: {crash: 'side:1'}\n- wait_leader\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = scenario.Resolve(sc, scenario.InitialView(names, nil, scenario.StartStable), scenario.NewRand(1))
	if want := "step 2 (inject): crash: side:1: no partition in force (a cut has no sides)"; err == nil || err.Error() != want {
		t.Errorf("side under a cut: %v, want %s", err, want)
	}
}

// reach is who each node reaches after the cut of links (both ways).
func reach(names []string, links [][2]string) map[string][]string {
	cut := map[[2]string]bool{}
	for _, l := range links {
		cut[l], cut[[2]string{l[1], l[0]}] = true, true
	}
	out := map[string][]string{}
	for _, a := range names {
		for _, b := range names {
			if a != b && !cut[[2]string{a, b}] {
				out[a] = append(out[a], b)
			}
		}
	}
	return out
}

// TestBuiltinCuts resolves chained, quorum-loss and bridge on star
// topologies of several sizes and checks what each node still reaches
// against the definitions (r1 the highest node), that the cut is held,
// healed, and the recovery measured among every node; and that too few
// nodes are refused, naming the scenario and the minimum.
func TestBuiltinCuts(t *testing.T) {
	for _, n := range []int{3, 4, 5, 16} {
		f := starFake(n)
		names := f.names()
		r := func(k int) string { return names[n-k] }
		for _, name := range []string{"chained", "quorum-loss", "bridge"} {
			scs, err := scenario.Builtin(name, scenario.Params{Nodes: n, Hold: 5 * time.Second})
			if name == "bridge" && n < 4 {
				if want := "scenario bridge: bridge needs at least 4 nodes, the topology has 3"; err == nil || err.Error() != want {
					t.Errorf("bridge at N = %d: %v, want %s", n, err, want)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s at N = %d: %v", name, n, err)
			}
			sc := scs[0]
			sched, err := scenario.Resolve(sc, scenario.InitialView(names, nil, scenario.StartStable), scenario.NewRand(1))
			if err != nil {
				t.Fatalf("%s at N = %d: %v", name, n, err)
			}
			if len(sched) != 4 || sched[0].Fault != fault.Cut || sched[0].OneWay || sched[1].Kind != scenario.StepWait ||
				sched[1].Duration != 5*time.Second || sched[2].Kind != scenario.StepHeal || !sched[2].Healed ||
				!slices.Equal(sched[2].Links, sched[0].Links) || !sched[3].Measure || sched[3].Expect != scenario.ExpectHighestLive ||
				!slices.Equal(sched[3].Nodes, names) {
				t.Errorf("%s at N = %d: schedule\n%s", name, n, sched)
			}
			got := reach(names, sched[0].Links)
			want := map[string][]string{}
			switch name {
			case "chained":
				want = reach(names, [][2]string{{r(1), r(2)}})
			case "quorum-loss":
				for _, a := range names {
					if a == r(n) {
						want[a] = slices.DeleteFunc(slices.Clone(names), func(x string) bool { return x == a })
					} else {
						want[a] = []string{r(n)}
					}
				}
			case "bridge":
				want[r(1)], want[r(2)] = []string{r(n)}, []string{r(n - 1)}
				for k := 3; k <= n; k++ {
					var others []string
					for j := 3; j <= n; j++ {
						if j != k {
							others = append(others, r(j))
						}
					}
					if k == n {
						others = append(others, r(1))
					}
					if k == n-1 {
						others = append(others, r(2))
					}
					slices.SortFunc(others, func(a, b string) int { return slices.Index(names, a) - slices.Index(names, b) })
					want[r(k)] = others
				}
			}
			for _, a := range names {
				if !slices.Equal(got[a], want[a]) {
					t.Errorf("%s at N = %d: %s reaches %v, want %v\n%s", name, n, a, got[a], want[a], sched)
				}
			}
			// The printed schedule lists the pairs; Execute does what it says.
			if !strings.HasPrefix(sched.String(), "1. inject cut "+strings.TrimPrefix(sched[0].String(), "inject cut ")) ||
				!strings.Contains(sched[0].String(), r(1)+"-") && !strings.Contains(sched[0].String(), "-"+r(1)) {
				t.Errorf("%s at N = %d: schedule does not show the pairs:\n%s", name, n, sched)
			}
		}
	}
	for _, tc := range []struct {
		name string
		p    scenario.Params
		want string
	}{
		{"chained", scenario.Params{Nodes: 2}, "scenario chained: chained needs at least 3 nodes, the topology has 2"},
		{"quorum-loss", scenario.Params{Nodes: 2}, "scenario quorum-loss: quorum-loss needs at least 3 nodes, the topology has 2"},
		{"bridge", scenario.Params{}, "scenario bridge: bridge needs the topology's node count"},
		{"chained", scenario.Params{Nodes: 3, Hold: -time.Second}, "scenario chained: hold -1s is negative"},
	} {
		if _, err := scenario.Builtin(tc.name, tc.p); err == nil || err.Error() != tc.want {
			t.Errorf("%s %+v: %v, want %s", tc.name, tc.p, err, tc.want)
		}
	}
	scs, err := scenario.Builtin("chained", scenario.Params{Nodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	sched, err := scenario.Resolve(scs[0], scenario.InitialView([]string{"n1", "n2", "n3"}, nil, scenario.StartStable), scenario.NewRand(1))
	if err != nil {
		t.Fatal(err)
	}
	if want := "1. inject cut n2-n3\n2. wait 30s\n3. heal uncut n2-n3\n4. wait_leader among n1,n2,n3 expect highest-live timeout 30s (measured)\n"; sched.String() != want {
		t.Errorf("chained at N = 3, default hold:\n%s\nwant\n%s", sched, want)
	}
}

// TestExecuteCut: Execute applies the resolved pairs, the mode and the
// clock as fault.Fault fields, and a heal step heals a cut alone.
func TestExecuteCut(t *testing.T) {
	f := starFake(4)
	sc, err := scenario.Parse("x.yaml", []byte(`
steps:
  - inject: {cut: {links: [['rank:1', 'rank:2'], ['rank:1', lowest]], one_way: true, mode: reset}}
  - inject: {isolate: {nodes: 'rank:4', mode: reset}}
  - inject: {clock: {nodes: 'rank:3', offset: 1s, rate: 5ppm}}
  - wait: 1ms
  - heal
  - wait_leader: {measure: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := scenario.Execute(context.Background(), sc, f, scenario.NewRand(1), nil); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"cut (reset) n4->n1,n4->n3",
		"isolate (reset) n1",
		"clock 1s 5ppm n2",
		"heal ",
		"wait_leader n1,n2,n3,n4",
	}
	if !slices.Equal(f.calls, want) {
		t.Errorf("calls:\n%s\nwant\n%s", strings.Join(f.calls, "\n"), strings.Join(want, "\n"))
	}
}

func ExampleResolve_bridge() {
	scs, err := scenario.Builtin("bridge", scenario.Params{Nodes: 5, Hold: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	sched, err := scenario.Resolve(scs[0], scenario.InitialView([]string{"n1", "n2", "n3", "n4", "n5"}, nil, scenario.StartStable), scenario.NewRand(1))
	if err != nil {
		panic(err)
	}
	fmt.Print(sched)
	// Output:
	// 1. inject cut n1-n4,n2-n5,n3-n4,n3-n5,n4-n5
	// 2. wait 10s
	// 3. heal uncut n1-n4,n2-n5,n3-n4,n3-n5,n4-n5
	// 4. wait_leader among n1,n2,n3,n4,n5 expect highest-live timeout 30s (measured)
}

// TestCheckNamesCutClock: a name a testbed lacks is found in a link's end
// and in a clock's nodes, with the field named.
func TestCheckNamesCutClock(t *testing.T) {
	for _, tc := range []struct{ step, want string }{
		{"inject: {cut: {links: [[n1, [n2, zz]]]}}", `n.yaml:3: steps[0].inject.cut.links[0][1]: topology t has no node or group "zz"`},
		{"inject: {clock: {nodes: 'node:zz', rate: 1}}", `n.yaml:3: steps[0].inject.clock.nodes: topology t has no node "zz"`},
		{"inject: {isolate: {nodes: 'group:zz', mode: reset}}", `n.yaml:3: steps[0].inject.isolate.nodes: topology t has no group "zz"`},
	} {
		sc, err := scenario.Parse("n.yaml", []byte("steps:\n\n  - "+tc.step+"\n  - wait_leader\n"))
		if err != nil {
			t.Fatalf("%s: %v", tc.step, err)
		}
		err = sc.CheckNames("t", []string{"n1", "n2"}, nil)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %s...", tc.step, err, tc.want)
		}
	}
}
