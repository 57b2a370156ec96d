package capture

import (
	"bytes"
	"strings"
	"testing"
)

func TestWriteText(t *testing.T) {
	var buf bytes.Buffer
	s := newSynth(t, &buf, 4, 5)
	s.benchScenario(500)
	s.close(t)
	rep := analyzeBytes(t, buf.Bytes())
	var err error
	if rep.Timeline, err = rep.ElectionTimeline(2); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Summary", "Elections", "Per node", "Anomalies", "Election 2 timeline", "crash n4", "HALT_ACK"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if testing.Verbose() {
		t.Log("\n" + out.String())
	}
}
