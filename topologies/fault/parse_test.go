package fault

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseWords(t *testing.T) {
	good := []struct {
		words []string
		opts  WordOptions
		want  Fault
	}{
		{[]string{"crash", "n1", "n2"}, WordOptions{}, Fault{Kind: Crash, Nodes: []string{"n1", "n2"}}},
		{[]string{"clear"}, WordOptions{}, Fault{Kind: Clear, Nodes: []string{}}},
		{[]string{"clear", "n1", "h2"}, WordOptions{}, Fault{Kind: Clear, Nodes: []string{"n1", "h2"}}},
		{[]string{"clear", "h1:h2"}, WordOptions{}, Fault{Kind: Clear, Nodes: []string{"h1"}, Peers: []string{"h2"}}},
		{[]string{"heal"}, WordOptions{}, Fault{Kind: Heal}},
		{[]string{"partition", "n1, n2", "site-b"}, WordOptions{OneWay: true},
			Fault{Kind: Partition, Groups: [][]string{{"n1", "n2"}, {"site-b"}}, OneWay: true}},
		{[]string{"delay", "n1:n2", "50ms"}, WordOptions{Jitter: "5ms"},
			Fault{Kind: Delay, Nodes: []string{"n1"}, Peers: []string{"n2"}, Impair: &Impairment{Delay: 50 * time.Millisecond, Jitter: 5 * time.Millisecond}}},
		{[]string{"loss", "n3", "12.5%"}, WordOptions{}, Fault{Kind: Loss, Nodes: []string{"n3"}, Impair: &Impairment{Loss: 12.5}}},
		{[]string{"cut", "n1:n2", "n3:n1"}, WordOptions{}, Fault{Kind: Cut, Links: [][2]string{{"n1", "n2"}, {"n3", "n1"}}}},
		{[]string{"cut", "n1:n2"}, WordOptions{OneWay: true, Mode: "reset"},
			Fault{Kind: Cut, Links: [][2]string{{"n1", "n2"}}, OneWay: true, Mode: ModeReset}},
		{[]string{"partition", "n1", "n2"}, WordOptions{Mode: "drop"}, Fault{Kind: Partition, Groups: [][]string{{"n1"}, {"n2"}}, Mode: ModeDrop}},
		{[]string{"isolate", "n1"}, WordOptions{Mode: "reset"}, Fault{Kind: Isolate, Nodes: []string{"n1"}, Mode: ModeReset}},
		{[]string{"clock", "n3", "+90s", "500ppm"}, WordOptions{}, Fault{Kind: Clock, Nodes: []string{"n3"}, Clock: &ClockSkew{Offset: 90 * time.Second, RatePPM: 500}}},
		{[]string{"clock", "n1", "n2", "-2m"}, WordOptions{}, Fault{Kind: Clock, Nodes: []string{"n1", "n2"}, Clock: &ClockSkew{Offset: -2 * time.Minute}}},
		{[]string{"clock", "n1", "0"}, WordOptions{}, Fault{Kind: Clock, Nodes: []string{"n1"}, Clock: &ClockSkew{}}},
	}
	for _, tc := range good {
		got, err := ParseWords(tc.words, tc.opts)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseWords(%q, %+v) = %+v, %v; want %+v", tc.words, tc.opts, got, err, tc.want)
		}
	}

	bad := []struct {
		words []string
		opts  WordOptions
		want  string
	}{
		{nil, WordOptions{}, "fault: no kind given (want crash, restart, pause, resume, isolate, unisolate, partition, heal, delay, loss, clear, campaign, leave, join, cut, clock)"},
		{[]string{"explode", "n1"}, WordOptions{}, `fault: unknown fault "explode" (want crash, restart,`},
		{[]string{"explode"}, WordOptions{OneWay: true}, "fault explode: --one-way is for partition"},
		{[]string{"crash", "n1"}, WordOptions{Jitter: "1ms"}, "fault crash: --jitter is for delay"},
		{[]string{"pause"}, WordOptions{}, "fault pause: name the nodes (like n1 n2)"},
		{[]string{"heal", "n1"}, WordOptions{}, `fault heal: takes no arguments, got "n1"`},
		{[]string{"partition", "n1,n2"}, WordOptions{}, "fault partition: want two or more groups (like n1,n2 n3,n4 or site-a site-b), got 1"},
		{[]string{"partition", "n1,,n2", "n3"}, WordOptions{}, `fault partition: group "n1,,n2" has an empty name`},
		{[]string{"delay", "n1"}, WordOptions{}, "fault delay: want NODE[:PEER] DURATION, got 1 arguments"},
		{[]string{"loss", "n1", "1", "2"}, WordOptions{}, "fault loss: want NODE[:PEER] PERCENT, got 3 arguments"},
		{[]string{"loss", "n1:", "1"}, WordOptions{}, `fault loss: "n1:": want NODE or NODE:PEER`},
		{[]string{"delay", "n1", "soon"}, WordOptions{}, `fault delay: delay "soon": want a duration like 50ms`},
		{[]string{"delay", "n1", "1ms"}, WordOptions{Jitter: "-1ms"}, `fault delay: --jitter "-1ms": want a duration like 50ms`},
		{[]string{"loss", "n1", "120%"}, WordOptions{}, `fault loss: "120%": want a percentage from 0 to 100 (like 10%)`},
		{[]string{"crash", "n1"}, WordOptions{OneWay: true}, "fault crash: --one-way is for partition and cut"},
		{[]string{"cut"}, WordOptions{}, "fault cut: name the node pairs (like n1:n2 n3:n4)"},
		{[]string{"clear", "n1:n2", "n3"}, WordOptions{}, `fault clear: "n1:n2": want NODE... or one NODE:PEER, as delay and loss take`},
		{[]string{"clear", "n1:"}, WordOptions{}, `fault clear: "n1:": want NODE... or one NODE:PEER`},
		{[]string{"clear", "h1:h2:h3"}, WordOptions{}, `fault clear: "h1:h2:h3": want NODE... or one NODE:PEER`},
		{[]string{"cut", "n1:n2", "n3"}, WordOptions{}, `fault cut: "n3": want NODE:NODE`},
		{[]string{"cut", "n1:"}, WordOptions{}, `fault cut: "n1:": want NODE:NODE`},
		{[]string{"cut", "n1:n2:n3"}, WordOptions{}, `fault cut: "n1:n2:n3": want NODE:NODE`},
		{[]string{"cut", "n1:n1"}, WordOptions{}, `fault cut: "n1:n1": a node cannot be cut from itself`},
		{[]string{"crash", "n1"}, WordOptions{Mode: "reset"}, "fault crash: --mode is for partition, isolate and cut"},
		{[]string{"cut", "n1:n2"}, WordOptions{Mode: "rst"}, `fault cut: --mode "rst": want drop or reset`},
		{[]string{"clock", "n1"}, WordOptions{}, "fault clock: want NODE... OFFSET [RATEppm] (like n3 +90s 500ppm)"},
		{[]string{"clock", "+90s", "500ppm"}, WordOptions{}, "fault clock: want NODE... OFFSET [RATEppm]"},
		{[]string{"clock", "n1", "soon"}, WordOptions{}, `fault clock: offset "soon": want a signed duration like +90s or -2m`},
		{[]string{"clock", "n1", "1s", "fastppm"}, WordOptions{}, `fault clock: rate "fastppm": want parts per million like 500ppm or -20ppm`},
		{[]string{"clock", "n1", "1s", "NaNppm"}, WordOptions{}, `fault clock: rate "NaNppm": want parts per million`},
		{[]string{"clock", "n1", "1s", "200000ppm"}, WordOptions{}, "fault clock: clock rate 200000 ppm: beyond ±100000 ppm"},
		{[]string{"clock", "n1", "1000000h"}, WordOptions{}, "fault clock: clock offset 1000000h0m0s: beyond"},
	}
	for _, tc := range bad {
		_, err := ParseWords(tc.words, tc.opts)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ParseWords(%q, %+v): error %v, want %q", tc.words, tc.opts, err, tc.want)
		}
	}
}

func TestKindsAllDescribed(t *testing.T) {
	for _, k := range Kinds {
		if !k.Known() || k.Args() == 0 {
			t.Errorf("kind %s: known %v, args %d", k, k.Known(), k.Args())
		}
	}
	if Kind("testbed").Known() || Kind("").Args() != 0 || Kind("end").Process() != ProcessKept || Kind("x").Everywhere() {
		t.Error("an unknown kind has properties")
	}
}

// FuzzParseWords checks that whatever the words, ParseWords returns a
// fault of the shape its kind takes or a one-line error naming the kind.
// Words are separated by tabs.
func FuzzParseWords(f *testing.F) {
	for _, s := range []string{"crash\tn1", "partition\tn1,n2\tn3", "delay\tn1:n2\t5ms", "loss\tn1\t10%",
		"heal", "clear", "heal\tx", "bogus", "clock\tn3\t+90s\t500ppm", "clock\tn1\t-1m", "clock\tppm", "partition\ta,,b\tc", "delay\t:x\t1ms", "loss\tn1\tNaN", ""} {
		f.Add(s, false, "", "")
		f.Add(s, true, "", "")
		f.Add(s, false, "1ms", "")
		f.Add(s, false, "", "reset")
	}
	for _, s := range []string{"cut\tn1:n2", "cut\tn1:n2\tn2:n3", "cut\tn1", "cut\t:n2", "cut\tn1:n1", "isolate\tn1"} {
		f.Add(s, true, "", "reset")
		f.Add(s, false, "", "drop")
		f.Add(s, false, "", "bogus")
	}
	f.Fuzz(func(t *testing.T, line string, oneWay bool, jitter, mode string) {
		var words []string
		if line != "" {
			words = strings.Split(line, "\t")
		}
		got, err := ParseWords(words, WordOptions{OneWay: oneWay, Jitter: jitter, Mode: mode})
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\r\n") || !strings.HasPrefix(msg, "fault") {
				t.Fatalf("ParseWords(%q): error %q is not one line starting with fault", words, msg)
			}
			return
		}
		if got.Kind != Kind(words[0]) || !got.Kind.Known() {
			t.Fatalf("ParseWords(%q): kind %q", words, got.Kind)
		}
		switch got.Kind.Args() {
		case ArgsNodes:
			if len(got.Nodes) == 0 {
				t.Fatalf("ParseWords(%q): no nodes", words)
			}
		case ArgsGroups:
			if len(got.Groups) < 2 {
				t.Fatalf("ParseWords(%q): %d groups", words, len(got.Groups))
			}
			for _, g := range got.Groups {
				for _, n := range g {
					if n == "" || n != strings.TrimSpace(n) {
						t.Fatalf("ParseWords(%q): group name %q", words, n)
					}
				}
			}
		case ArgsLinks:
			if len(got.Links) == 0 {
				t.Fatalf("ParseWords(%q): no links", words)
			}
			for _, l := range got.Links {
				if l[0] == "" || l[1] == "" || l[0] == l[1] || strings.Contains(l[0]+l[1], ":") {
					t.Fatalf("ParseWords(%q): link %q", words, l)
				}
			}
		case ArgsDelay, ArgsLoss:
			if got.Impair == nil || len(got.Nodes) != 1 || got.Nodes[0] == "" || got.Impair.Delay < 0 || got.Impair.Jitter < 0 {
				t.Fatalf("ParseWords(%q): %+v", words, got)
			}
		case ArgsClock:
			if got.Clock == nil || len(got.Nodes) == 0 || got.Clock.Validate() != nil {
				t.Fatalf("ParseWords(%q): %+v", words, got)
			}
		}
		if got.Mode != CutMode(mode) || !got.Mode.Valid() || got.Mode != "" && !got.Kind.Severs() {
			t.Fatalf("ParseWords(%q, mode %q): mode %q for %s", words, mode, got.Mode, got.Kind)
		}
		if got.OneWay && got.Kind.Args() != ArgsGroups && got.Kind.Args() != ArgsLinks ||
			got.Impair != nil && !got.Kind.Impairs() || len(got.Links) > 0 && got.Kind.Args() != ArgsLinks ||
			got.Clock != nil && got.Kind != Clock {
			t.Fatalf("ParseWords(%q): %+v has what its kind does not take", words, got)
		}
	})
}
