//go:build linux

package capture

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bullylab/bullylab/capture/capturetest"
)

// luaScript is the Wireshark dissector, relative to this package.
var luaScript = filepath.Join("..", "scripts", "bullylab.lua")

func requireTshark(t testing.TB) string { return capturetest.RequireTshark(t) }

// tsharkTypes runs tshark with the Lua dissector on path and counts the
// frames it finds by type; it returns the counts and the packets read.
func tsharkTypes(t testing.TB, tshark, path string, extra ...string) (counts, int64) {
	t.Helper()
	byType, packets := capturetest.Types(t, tshark, luaScript, path, extra...)
	var c counts
	for ty, n := range byType {
		if ty.Valid() {
			c[ty] += n
		} else {
			c[0] += n
		}
	}
	return c, packets
}

var tsharkOptions = capturetest.TsharkOptions

// TestTsharkLive compares tshark's counts with the analyzer's on a capture
// of real TCP connections between testbed nodes.
func TestTsharkLive(t *testing.T) {
	tshark := requireTshark(t)
	lt := startLiveTestbed(t, 3, t.TempDir())
	lt.traffic(t, 200)
	lt.stop(t)
	rep, err := AnalyzeFile(lt.path, AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := tsharkTypes(t, tshark, lt.path, tsharkOptions...)
	if got.typeCounts() != rep.Messages || rep.Frames == 0 {
		t.Errorf("tshark found %+v\nanalyzer found %+v", got.typeCounts(), rep.Messages)
	}
	t.Logf("%d frames; analyzer and tshark agree: %+v", rep.Frames, rep.Messages)
}

// TestTsharkSynthetic does the same on a synthetic capture with split,
// reordered and retransmitted segments.
func TestTsharkSynthetic(t *testing.T) {
	tshark := requireTshark(t)
	path := filepath.Join(t.TempDir(), "synth.pcapng")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	s := newSynth(t, f, 5, 7)
	s.split, s.reorder, s.retransmit = 0.1, 0.05, 0.05
	s.benchScenario(3000)
	s.close(t)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := AnalyzeFile(path, AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := tsharkTypes(t, tshark, path, tsharkOptions...)
	if got.typeCounts() != rep.Messages || rep.Stream.OutOfOrder == 0 {
		t.Errorf("tshark found %+v\nanalyzer found %+v", got.typeCounts(), rep.Messages)
	}
}

// BenchmarkTshark runs the analyzer and then tshark with the Lua dissector
// on the benchmark capture (a million frames; -short: 100,000), once each,
// and reports both rates and their ratio. tshark needs a minute or more.
func BenchmarkTshark(b *testing.B) {
	tshark := requireTshark(b)
	frames := int64(benchFrames)
	if testing.Short() {
		frames = 100_000
	}
	path, s := writeBenchCapture(b, b.TempDir(), frames)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		rep, err := AnalyzeFile(path, AnalyzeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		ours := time.Since(start)
		start = time.Now()
		got, _ := tsharkTypes(b, tshark, path, tsharkOptions...)
		theirs := time.Since(start)
		if got.typeCounts() != rep.Messages || rep.Frames != s.frames {
			b.Errorf("tshark found %+v\nanalyzer found %+v", got.typeCounts(), rep.Messages)
		}
		b.ReportMetric(float64(rep.Frames)/ours.Seconds(), "analyze-frames/s")
		b.ReportMetric(float64(rep.Frames)/theirs.Seconds(), "tshark-frames/s")
		b.ReportMetric(theirs.Seconds()/ours.Seconds(), "ratio")
		b.Logf("analyze %v, tshark %v for %d frames", ours.Round(time.Millisecond), theirs.Round(time.Millisecond), rep.Frames)
	}
}
