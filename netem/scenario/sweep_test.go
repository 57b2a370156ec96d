package scenario_test

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/topologies/fault"
)

func keysOf(scs []*scenario.Scenario) []string {
	var keys []string
	for _, sc := range scs {
		keys = append(keys, sc.Key())
	}
	return keys
}

// TestLossSweep: loss expands into one scenario per percentage, labelled
// loss=PCT, the way latency-sweep does per delay; a lone Params.Loss is a
// one-point sweep with the key loss had before it swept.
func TestLossSweep(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    scenario.Params
		want []string
	}{
		{"default", scenario.Params{}, []string{"loss loss=1", "loss loss=5", "loss loss=10", "loss loss=20"}},
		{"one Loss", scenario.Params{Loss: 20}, []string{"loss loss=20"}},
		{"one Loss, fraction", scenario.Params{Loss: 2.5}, []string{"loss loss=2.5"}},
		{"Losses", scenario.Params{Losses: []float64{20, 0.5, 100}}, []string{"loss loss=20", "loss loss=0.5", "loss loss=100"}},
		{"Losses and the same Loss", scenario.Params{Loss: 7, Losses: []float64{7}}, []string{"loss loss=7"}},
	} {
		scs, err := scenario.Builtin("loss", tc.p)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := keysOf(scs); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: keys %v, want %v", tc.name, got, tc.want)
		}
		for _, sc := range scs {
			// Each point injects its own percentage, then kills the
			// leader with the loss in force.
			inj := sc.Steps[0].Fault
			if inj == nil || inj.Kind != fault.Loss || strconv.FormatFloat(inj.Loss, 'g', -1, 64) != sc.Labels["loss"] {
				t.Errorf("%s: %s: first step %+v", tc.name, sc.Key(), sc.Steps[0])
			}
			if sc.Name != "loss" || sc.Source != "built-in loss" || sc.Measured() != 3 {
				t.Errorf("%s: %s: name %q source %q measured step %d", tc.name, sc.Key(), sc.Name, sc.Source, sc.Measured())
			}
		}
	}
	if got := scenario.DefaultLosses; !reflect.DeepEqual(got, []float64{1, 5, 10, 20}) {
		t.Errorf("DefaultLosses %v", got)
	}
	for _, tc := range []struct {
		name string
		p    scenario.Params
		want string
	}{
		{"empty", scenario.Params{Losses: []float64{}}, "no losses"},
		{"zero", scenario.Params{Losses: []float64{5, 0}}, "loss 0% is not in (0, 100]"},
		{"over", scenario.Params{Loss: 101}, "loss 101% is not in (0, 100]"},
		{"negative", scenario.Params{Losses: []float64{-1}}, "not in (0, 100]"},
		{"twice", scenario.Params{Losses: []float64{5, 10, 5}}, "loss 5% is listed twice"},
		{"both", scenario.Params{Loss: 5, Losses: []float64{1, 5}}, "given besides the sweep"},
	} {
		if _, err := scenario.Builtin("loss", tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}
