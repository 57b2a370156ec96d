//go:build linux

package main

import (
	"strings"
	"testing"
)

// TestBenchSetBadInput: a wrong --set is one line and exit status 2,
// before any testbed is built.
func TestBenchSetBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--topology", "star5", "--set", "failure_timout=600ms"},
			`bench: --set: unknown setting "failure_timout"; did you mean failure_timeout? (names: heartbeat, failure_timeout, election_timeout, detection_stagger)`},
		{[]string{"--topology", "star5", "--set", "failure_timeout=soon"}, `bench: --set: failure_timeout: "soon" is not a duration`},
		{[]string{"--topology", "star5", "--set", "failure_timeout=600ms", "--set", "heartbeat=700ms"},
			"bench: --set: topology star5: node n1: heartbeat 700ms must be below failure_timeout 600ms"},
		{[]string{"--topology", "star5", "--set", "election_timeout=5ms"}, "bench: --set: election_timeout: 5ms is below the floor of 20ms"},
	} {
		code, out := runCmd(t, benchCommand(), tc.args...)
		if code != 2 || !strings.HasPrefix(out, tc.want) || strings.Contains(out, "\n") {
			t.Errorf("%v: exit %d, want 2 and one line starting %s:\n%s", tc.args, code, tc.want, out)
		}
	}
}
