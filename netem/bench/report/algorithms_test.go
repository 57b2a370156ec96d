package report_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
)

// The closed forms of a leader crash the highest survivor detects, on
// the wire: the ring's twice round the survivors, Bully's three to each
// of the others.
func TestLeaderCrashMessages(t *testing.T) {
	for _, tc := range []struct {
		algorithm string
		n, want   int
	}{{"ring", 5, 8}, {"ring", 16, 30}, {"ring", 64, 126}, {"bully", 5, 9}, {"bully", 16, 42}, {"bully", 64, 186}} {
		if got, ok := report.LeaderCrashMessages(tc.algorithm, tc.n); !ok || got != tc.want {
			t.Errorf("%s on %d nodes: %d, %v; want %d", tc.algorithm, tc.n, got, ok, tc.want)
		}
	}
	if _, ok := report.LeaderCrashMessages("raft", 5); ok {
		t.Error("a closed form for an unknown algorithm")
	}
}

// A report of both algorithms keeps them apart: a distribution and a
// summary row each, their messages by type, and the messages-against-N
// plot with a measured point per algorithm over each closed form.
func TestReportTwoAlgorithms(t *testing.T) {
	r := resultstest.AlgorithmsSample()
	page := renderReport(t, r)
	for _, want := range []string{
		`<a href="#sc-leader-crash">leader-crash</a>`,
		`<a href="#sc-leader-crash-algorithm-ring">leader-crash algorithm=ring</a>`,
		">RING_ELECTION<", ">ELECTED<", ">HALT_ACK<",
		"Messages per election against N", "bully and ring",
		"ring: 2(N-1)", "bully: 3N-6",
		"ring on 5 nodes: 8.0 messages per election, the mean of the 3 runs that passed; closed form 8",
		"bully on 5 nodes: 9.0 messages per election, the mean of the 3 runs that passed; closed form 9",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if n := strings.Count(page, `<svg class="dist"`); n != 2 {
		t.Errorf("%d distribution plots, want one per algorithm", n)
	}

	// Benches of three sizes draw the growth: a point per algorithm and
	// size, two dashed closed forms.
	var rs []*results.Results
	for _, n := range []int{5, 16, 64} {
		b := resultstest.AlgorithmsSample()
		b.Topology.Nodes = n
		for i := range b.Scenarios {
			for j := range b.Scenarios[i].Runs {
				if a := b.Scenarios[i].AlgorithmName(); b.Scenarios[i].Runs[j].OK {
					m, _ := report.LeaderCrashMessages(a, n)
					b.Scenarios[i].Runs[j].Messages = map[string]int{"total": m}
				}
			}
		}
		b.Summarize()
		rs = append(rs, b)
	}
	pts := report.MessagesPoints(rs...)
	if len(pts) != 6 {
		t.Fatalf("%d points, want 6: %+v", len(pts), pts)
	}
	els := parseSVG(t, report.MessagesByNSVG(pts))
	count := map[string]int{}
	for _, e := range els {
		count[e.Class]++
	}
	if count["measured"] != 6 || count["closed-form"] != 2 {
		t.Errorf("%d measured points and %d closed forms, want 6 and 2", count["measured"], count["closed-form"])
	}
	if got := fmt.Sprint(pts[len(pts)-1].N); got != "64" {
		t.Errorf("the points end at N = %s", got)
	}
}
