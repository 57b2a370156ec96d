package scenario_test

import (
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/topologies/fault"
)

func TestParseExample(t *testing.T) {
	sc, err := scenario.Parse("example.yaml", scenario.Example)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Name != "example" || sc.Start != scenario.StartStable || sc.Labels["variant"] != "demo" {
		t.Errorf("header: name %q start %q labels %v", sc.Name, sc.Start, sc.Labels)
	}
	var kinds []string
	for _, st := range sc.Steps {
		k := string(st.Kind)
		if st.Fault != nil {
			k += ":" + string(st.Fault.Kind)
		}
		kinds = append(kinds, k)
	}
	want := []string{"inject:delay", "wait_leader", "inject:partition", "wait_election", "inject:crash",
		"wait_leader", "wait", "inject:loss", "inject:isolate", "inject:cut", "inject:clock", "wait", "heal",
		"inject:clock", "inject:restart", "wait_leader", "inject:campaign", "wait_leader"}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("steps\n got %v\nwant %v", kinds, want)
	}
	if m := sc.Measured(); m != 5 {
		t.Errorf("Measured() = %d, want 5 (the wait_leader marked measure)", m)
	}
	d := sc.Steps[0].Fault
	if d.Delay != 5*time.Millisecond || d.Jitter != time.Millisecond || d.Nodes.String() != "all" {
		t.Errorf("delay step: %+v", d)
	}
	p := sc.Steps[2].Fault
	if !p.OneWay || len(p.Groups) != 2 || p.Groups[0].String() != "leader" || p.Groups[1].String() != "rest" {
		t.Errorf("partition step: %+v", p)
	}
	if l := sc.Steps[7].Fault; l.Loss != 20 || l.Nodes.String() != "random:2" {
		t.Errorf("loss step: %+v", l)
	}
	if c := sc.Steps[9].Fault; len(c.Links) != 2 || c.Mode != fault.ModeReset || c.Links[1].From.String() != "top:3" {
		t.Errorf("cut step: %+v", c)
	}
	if c := sc.Steps[10].Fault; c.Clock.Offset != -90*time.Second || c.Clock.RatePPM != 500 {
		t.Errorf("clock step: %+v", c)
	}
	if st := sc.Steps[15]; st.Expect != scenario.ExpectAny || st.Timeout != scenario.DefaultTimeout {
		t.Errorf("wait_leader defaults: %+v", st)
	}
	if st := sc.Steps[2]; st.Line != 36 {
		t.Errorf("partition step on line %d, want 36", st.Line)
	}
}

// Every built-in prints as a file that parses back to the same scenario.
func TestBuiltinsFormatRoundTrip(t *testing.T) {
	p := scenario.Params{Nodes: 16, Seed: 7, K: 2, Delays: []time.Duration{0, 25 * time.Millisecond}, Loss: 2.5}
	for _, name := range scenario.BuiltinNames() {
		scs, err := scenario.Builtin(name, p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, sc := range scs {
			data, err := scenario.Format(sc)
			if err != nil {
				t.Fatalf("%s: format: %v", name, err)
			}
			back, err := scenario.Parse(name+".yaml", data)
			if err != nil {
				t.Fatalf("%s: parse of formatted:\n%s\n%v", name, data, err)
			}
			if !sameScenario(sc, back) {
				t.Errorf("%s: round trip changed it:\n%s", name, data)
			}
		}
	}
}

// sameScenario compares all but where the scenario came from.
func sameScenario(a, b *scenario.Scenario) bool {
	ca, cb := *a, *b
	ca.Source, cb.Source = "", ""
	ca.Steps, cb.Steps = nil, nil
	if !reflect.DeepEqual(ca, cb) || len(a.Steps) != len(b.Steps) {
		return false
	}
	for i := range a.Steps {
		sa, sb := a.Steps[i], b.Steps[i]
		sa.Line, sb.Line = 0, 0
		if !reflect.DeepEqual(sa, sb) {
			return false
		}
	}
	return true
}

func TestParseShorthands(t *testing.T) {
	sc, err := scenario.Parse("s.yaml", []byte(`
steps:
  - inject: {crash: [leader, 'random']}
  - wait_leader
  - wait: 1s
  - wait: {duration: 2s}
  - wait_election
  - inject: heal
  - inject: {heal: {}}
  - heal
  - heal: {}
  - inject: {partition: {groups: [[n1, 'group:g'], rest]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Name != "s" {
		t.Errorf("name from file name: %q", sc.Name)
	}
	if got := sc.Steps[0].Fault.Nodes.String(); got != "leader,random" {
		t.Errorf("selector list: %q", got)
	}
	if sc.Steps[2].Duration != time.Second || sc.Steps[3].Duration != 2*time.Second {
		t.Errorf("wait forms: %v %v", sc.Steps[2].Duration, sc.Steps[3].Duration)
	}
	for _, i := range []int{5, 6} {
		if sc.Steps[i].Fault.Kind != fault.Heal {
			t.Errorf("steps[%d] is %v, want an inject heal", i, sc.Steps[i].Fault.Kind)
		}
	}
	for _, i := range []int{7, 8} {
		if sc.Steps[i].Kind != scenario.StepHeal {
			t.Errorf("steps[%d] is %v, want a heal step", i, sc.Steps[i].Kind)
		}
	}
	g := sc.Steps[9].Fault.Groups
	if len(g) != 2 || g[0].String() != "n1,group:g" || g[1].String() != "rest" {
		t.Errorf("nested groups: %v", g)
	}
	if sc.Measured() != 1 {
		t.Errorf("Measured() = %d, want 1: the first wait_leader after a fault", sc.Measured())
	}
}

func TestParseErrors(t *testing.T) {
	checkParseErrors(t, []struct{ in, want string }{
		{"", "e.yaml: empty scenario (want at least steps:)"},
		{"name: x\n", "e.yaml:1: steps: missing"},
		{"steps: []\n", "e.yaml:1: steps: no steps"},
		{"stepz: []\n", `e.yaml:1: stepz: unknown field (want name, description, start, labels, steps)`},
		{"steps:\n  - inject: {crash: leader}\n  - wait_leader: {timeout: 1s, expekt: any}\n",
			`e.yaml:3: steps[1].wait_leader.expekt: unknown field (want timeout, expect, among, measure)`},
		{"steps:\n  - inject: {crash: 'top:x'}\n", `e.yaml:2: steps[0].inject.crash: "top:x": want top:N with N in 1..1000`},
		{"steps:\n  - inject: {crash: Leader}\n", `e.yaml:2: steps[0].inject.crash: unknown selector "Leader"`},
		{"steps:\n  - inject: {smash: leader}\n", `e.yaml:2: steps[0].inject.smash: unknown field (want crash, restart, pause, resume, isolate, unisolate, partition, heal, delay, loss, clear, campaign, leave, join, cut, clock)`},
		{"steps:\n  - inject: {crash: leader, pause: n1}\n", `e.yaml:2: steps[0].inject: want one fault`},
		{"steps:\n  - inject: {crash: leader}\n  - wait: 0s\n", `e.yaml:3: steps[1].wait: must be positive`},
		{"steps:\n  - inject: {crash: leader}\n  - wait: soon\n", `e.yaml:3: steps[1].wait: "soon" is not a duration`},
		{"steps:\n  - inject: {loss: {percent: 120%}}\n", `e.yaml:2: steps[0].inject.loss.percent: "120%" is not a percentage in (0, 100]`},
		{"steps:\n  - inject: {partition: {groups: [leader]}}\n", `e.yaml:2: steps[0].inject.partition.groups: want at least two groups, got 1`},
		{"steps:\n  - inject: {partition: {groups: [leader, rest, n1], one_way: true}}\n  - wait_leader\n", `e.yaml:2: steps[0].inject.partition.groups: a one-way partition cuts one group from another`},
		{"steps:\n  - inject: {partition: {groups: [rest, rest]}}\n  - wait_leader\n", `e.yaml:2: steps[0].inject.partition.groups[1]: rest is already groups[0]`},
		{"steps:\n  - inject: {crash: rest}\n", `e.yaml:2: steps[0].inject.crash: rest stands alone, as a whole partition group`},
		{"steps:\n  - wait_leader\n", `e.yaml: steps: no wait_leader after a fault: nothing to measure`},
		{"steps:\n  - wait_leader: {measure: true}\n  - inject: {crash: leader}\n", `e.yaml:2: steps[0].wait_leader.measure: no fault before the measured wait_leader`},
		{"steps:\n  - inject: {crash: leader}\n  - wait_leader: {measure: true}\n  - wait_leader: {measure: true}\n", `e.yaml:4: steps[2].wait_leader.measure: steps[1] is measured already`},
		{"steps:\n  - inject: {crash: leader}\n  - wait_leader: {measure: yes please}\n", `e.yaml:3: steps[1].wait_leader.measure: want true or false, got "yes please"`},
		{"steps:\n  - inject: {crash: leader}\n  - wait_leader: {timeout: 1s, timeout: 2s}\n", `e.yaml:3: steps[1].wait_leader.timeout: repeated (first at line 3)`},
		{"start: warm\nsteps: []\n", `e.yaml:1: start: unknown start "warm" (want stable or cold)`},
		{"labels: {topology: x}\nsteps: []\n", `e.yaml:1: labels.topology: "topology" is reserved for benchmark names`},
		{"labels: {k: a b}\nsteps: []\n", `e.yaml:1: labels.k: invalid value "a b"`},
		{"name: a/b\nsteps: []\n", `e.yaml:1: name: invalid name "a/b"`},
		{"description: \"two\\nlines\"\nsteps: []\n", `e.yaml:1: description: must be one line`},
		{"steps:\n  - {inject: {crash: leader}, wait: 1s}\n", `e.yaml:2: steps[0]: want one key naming the step`},
		{"steps:\n  - wait\n", `e.yaml:2: steps[0]: wait needs arguments, as in {wait: ...}`},
		{"steps:\n  - inject: {crash: top}\n", `e.yaml:2: steps[0].inject.crash: "top" needs an argument after a colon`},
		{"steps: [\n", "e.yaml:1: did not find expected node content"},
		{"a: 1\n---\nb: 2\n", "e.yaml:2: more than one YAML document"},
		{"steps:\n  - heal: {x: 1}\n", "e.yaml:2: steps[0].heal: takes no arguments, got a mapping"},
	})
}

// checkParseErrors parses each case's in as e.yaml: it must fail with a
// one-line error starting with want.
func checkParseErrors(t *testing.T, cases []struct{ in, want string }) {
	t.Helper()
	for _, tc := range cases {
		_, err := scenario.Parse("e.yaml", []byte(tc.in))
		if err == nil {
			t.Errorf("%q: parsed, want error %q", tc.in, tc.want)
			continue
		}
		if !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q:\n got %v\nwant %s...", tc.in, err, tc.want)
		}
		if strings.ContainsAny(err.Error(), "\r\n") {
			t.Errorf("%q: error is not one line: %q", tc.in, err)
		}
	}
}

func TestLookup(t *testing.T) {
	scs, err := scenario.Lookup("latency-sweep", scenario.Params{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, sc := range scs {
		keys = append(keys, sc.Key())
	}
	want := []string{"latency-sweep delay=0s", "latency-sweep delay=10ms", "latency-sweep delay=50ms", "latency-sweep delay=100ms"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("latency-sweep keys %v, want %v", keys, want)
	}
	if _, err := scenario.Lookup("leader-crsh", scenario.Params{}); err == nil || !strings.Contains(err.Error(), "built in: cold-start, leader-crash") {
		t.Errorf("unknown built-in: %v", err)
	}
	if _, err := scenario.Lookup("testdata/none.yaml", scenario.Params{}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := scenario.Lookup("chaos", scenario.Params{}); err == nil || !strings.Contains(err.Error(), "node count") {
		t.Errorf("chaos without a node count: %v", err)
	}
	if _, err := scenario.Lookup("cascade", scenario.Params{Nodes: 3, K: 3}); err == nil {
		t.Error("cascade of every node accepted")
	}
}

// /dev/zero is refused by the size bound, a FIFO nobody writes to reads as
// empty instead of blocking: one line each, naming the file.
func TestLoadSpecialFiles(t *testing.T) {
	_, err := scenario.Lookup("/dev/zero", scenario.Params{})
	if want := "scenario /dev/zero: larger than 1 MiB"; err == nil || err.Error() != want {
		t.Errorf("/dev/zero: %v, want %s", err, want)
	}
	fifo := filepath.Join(t.TempDir(), "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = scenario.Lookup(fifo, scenario.Params{})
	if want := fifo + ": empty scenario"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("FIFO: %v, want prefix %s", err, want)
	}
}

// TestLongValuesInErrors: an error quoting a value of the file shows its
// start and its length, not all of it.
func TestLongValuesInErrors(t *testing.T) {
	long := strings.Repeat("x", scenario.MaxFileSize-100)
	for _, src := range []string{
		"start: " + long + "\nsteps: [heal]\n",
		"labels: {a: " + long + "}\nsteps: [heal]\n",
		"steps: [" + long + "]\n",
		"steps: [{inject: {crash: " + long + "}}]\n",
		"steps: [{inject: {crash: node:" + long + "}}]\n",
		"steps: [{inject: {crash: top:" + long + "}}]\n",
		"steps: [{inject: {crash: minority:" + long + "}}]\n",
		"steps: [{inject: {crash: " + long + ":1}}]\n",
		"steps: [{inject: " + long + "}]\n",
		"steps: [{wait_leader: {expect: " + long + "}}]\n",
		"steps: [{wait: " + long + "}]\n",
		"steps: [{inject: {loss: {percent: " + long + "}}}]\n",
		"name: " + long + "\nsteps: [heal]\n",
	} {
		_, err := scenario.Parse("long.yaml", []byte(src))
		if err == nil {
			t.Errorf("%.40q... parsed", src)
			continue
		}
		msg := err.Error()
		if len(msg) > 400 || strings.ContainsAny(msg, "\r\n") || !strings.HasPrefix(msg, "long.yaml:") || !strings.Contains(msg, "bytes)") {
			t.Errorf("%.40q...: error of %d bytes: %.500s", src, len(msg), msg)
		}
	}
}
