package report_test

import (
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
	"github.com/bullylab/bullylab/topologies"
)

func TestReportHeaderOverrides(t *testing.T) {
	r := resultstest.Sample(1)
	r.Topology.Overrides = results.OverridesOf([]topologies.SettingOverride{{Name: "failure_timeout", Value: 600 * time.Millisecond, Was: 500 * time.Millisecond}})
	var b strings.Builder
	if err := report.Write(&b, r); err != nil {
		t.Fatal(err)
	}
	header := b.String()[:strings.Index(b.String(), "</header>")]
	if !strings.Contains(header, "<b>failure_timeout 600ms (topology: 500ms) by --set</b>") {
		t.Errorf("the header does not show the override:\n%s", header)
	}
	b.Reset()
	if err := report.WriteBenches(&b, []report.Bench{{Source: "a/results.json", Results: r}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "failure_timeout 600ms (topology: 500ms) by --set") {
		t.Error("the report of several benches does not show the override")
	}
}
