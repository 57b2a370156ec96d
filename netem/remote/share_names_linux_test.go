package remote

import (
	"testing"

	"github.com/bullylab/bullylab/netem"
)

// The names the README gives a share's namespaces: host k's share of run
// mylab runs as mylabh<k>, its node n5's namespace mylabh2-n5 on the
// second host.
func TestShareNamespaces(t *testing.T) {
	if got := netem.NodeNamespace(ShareRun("mylab", 1), "n5"); got != "mylabh2-n5" {
		t.Errorf("the second host's n5 is in %s, want mylabh2-n5", got)
	}
	if got := netem.SwitchNamespace(ShareRun("mylab", 0)); got != "mylabh1-sw" {
		t.Errorf("the first host's switch is in %s, want mylabh1-sw", got)
	}
}
