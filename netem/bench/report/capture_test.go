package report_test

import (
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/google/uuid"
)

// TestWriteCapturesNoTestbed: a capture of real hosts has no testbed
// record; its page says so and shows each node's UUID, and with
// authenticated frames and no key says they are not verified.
func TestWriteCapturesNoTestbed(t *testing.T) {
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	id := uuid.MustParse("6f1c2a3e-0d4b-4c8e-9a7f-2b5d8e9c1a40")
	rep := &capture.Report{Start: start, End: start.Add(time.Second), DurationNS: int64(time.Second), Packets: 10, Frames: 8,
		Nodes: []capture.NodeReport{{Name: "10.0.0.7", ID: id}},
		Auth:  &capture.AuthReport{Frames: 8, WithoutHello: 2}}
	var b strings.Builder
	if err := report.WriteCaptures(&b, []*report.CaptureReport{{Source: "hosts.pcapng", Report: rep}}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		"<h1>bullylab capture: hosts.pcapng</h1>",
		"No testbed record",
		"<code>6f1c2a3e-0d4b-4c8e-9a7f-2b5d8e9c1a40</code>",
		"8 authenticated frames not verified: no cluster key given",
		"The capture holds no election.",
		"no send times",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}
