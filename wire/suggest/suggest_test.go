package suggest

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

var topologies = []string{"example", "star16", "star250", "star3", "star5", "star64", "two-site"}

var scenarios = []string{"cold-start", "leader-crash", "leader-pause", "crash-during-election", "cascade",
	"partition-minority", "partition-majority", "one-way-partition", "latency-sweep", "loss", "churn", "chaos"}

var commands = []string{"node", "keygen", "demo", "analyze", "bench", "compare", "up", "status", "fault", "exec", "down", "clean", "version", "completion"}

func TestSimilar(t *testing.T) {
	for _, tc := range []struct {
		name       string
		candidates []string
		want       []string
	}{
		{"star6", topologies, []string{"star16", "star3", "star5", "star64"}},
		{"Star5", topologies, nil}, // a candidate, case aside
		{"star05", topologies, []string{"star5"}},
		{"two-sites", topologies, []string{"two-site"}},
		{"leader-crsh", scenarios, []string{"leader-crash"}},
		{"leader-carsh", scenarios, []string{"leader-crash"}}, // a swap is one edit
		{"leader", scenarios, nil},                            // the prefix of two
		{"cold", scenarios, []string{"cold-start"}},           // the prefix of one
		{"partition-minorty", scenarios, []string{"partition-minority"}},
		{"benhc", commands, []string{"bench"}},
		{"stat", commands, []string{"status"}},
		{"dwn", commands, []string{"down"}},
		{"xy", commands, nil},
		{"explode", commands, nil},
		{"", commands, nil},
		{strings.Repeat("a", 100), commands, nil},
	} {
		if got := Similar(tc.name, tc.candidates); !slices.Equal(got, tc.want) {
			t.Errorf("Similar(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestHint(t *testing.T) {
	for name, want := range map[string]string{
		"leader-crsh": "; did you mean leader-crash?",
		"star6":       "; did you mean star16, star3, star5 or star64?",
		"nothing":     "",
	} {
		cands := append(append([]string{}, topologies...), scenarios...)
		if got := Hint(name, cands); got != want {
			t.Errorf("Hint(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"kitten", "sitting", 3},
		{"ab", "ba", 1}, {"ca", "abc", 3}, {"héllo", "hello", 1},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func FuzzSimilar(f *testing.F) {
	f.Add("star6", "star5")
	f.Add("leader-crsh", "leader-crash")
	f.Add("\xff", "")
	f.Fuzz(func(t *testing.T, a, b string) {
		d := Distance(a, b)
		if d != Distance(b, a) || d < 0 || d > max(utf8.RuneCountInString(a), utf8.RuneCountInString(b)) {
			t.Fatalf("Distance(%q, %q) = %d, Distance(b, a) = %d", a, b, d, Distance(b, a))
		}
		if (d == 0) != (string([]rune(a)) == string([]rune(b))) {
			t.Fatalf("Distance(%q, %q) = %d", a, b, d)
		}
		for _, s := range Similar(a, []string{b, "x" + b}) {
			if s != b && s != "x"+b {
				t.Fatalf("Similar(%q) returned %q, no candidate", a, s)
			}
		}
		if h := Hint(a, []string{b}); strings.Contains(h, "\n") && !strings.Contains(b, "\n") {
			t.Fatalf("Hint(%q, %q) = %q: more than one line", a, b, h)
		}
	})
}
