package capture

import (
	"bufio"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
)

// benchFrames is the size of the benchmark capture.
const benchFrames = 1_000_000

// writeBenchCapture generates the benchmark capture in dir: 16 nodes,
// heartbeats and elections, with a few split, reordered and retransmitted
// segments, and returns its path and generator.
func writeBenchCapture(tb testing.TB, dir string, frames int64) (string, *synth) {
	return writeBenchCaptureKey(tb, dir, frames, nil)
}

// writeBenchCaptureKey is writeBenchCapture with the connections
// authenticated under key, when not nil.
func writeBenchCaptureKey(tb testing.TB, dir string, frames int64, key *wire.Key) (string, *synth) {
	tb.Helper()
	return writeSynth(tb, filepath.Join(dir, "bench.pcapng"), 16, 42, nil, func(s *synth) {
		s.key = key
		s.split, s.reorder, s.retransmit = 0.002, 0.001, 0.001
		s.benchScenario(frames)
	})
}

// writeSynth writes to path what scenario makes a generator of nodes
// nodes (seeded with seed, its testbed record giving clock) write, and
// returns the generator.
func writeSynth(tb testing.TB, path string, nodes int, seed uint64, clock *ClockInfo, scenario func(*synth)) (string, *synth) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	start := time.Now()
	s := newSynthClock(tb, bw, nodes, seed, clock)
	scenario(s)
	s.close(tb)
	if err := bw.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("generated %d frames in %d packets (%.1f MB) in %v", s.frames, s.packets, float64(s.bytes)/1e6, time.Since(start).Round(time.Millisecond))
	return path, s
}

// BenchmarkAnalyze measures Analyze end to end, file to report, on a
// capture of more than a million frames.
func BenchmarkAnalyze(b *testing.B) {
	path, s := writeBenchCapture(b, b.TempDir(), benchFrames)
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	b.ResetTimer()
	var rep *Report
	for b.Loop() {
		rep, err = AnalyzeFile(path, AnalyzeOptions{})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if rep.Frames != s.frames {
		b.Fatalf("analyzed %d frames, generated %d", rep.Frames, s.frames)
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(rep.Frames)/sec, "frames/s")
	b.ReportMetric(float64(rep.Packets)/sec, "packets/s")
	b.ReportMetric(float64(st.Size())/sec/1e6, "MB/s")
}

// BenchmarkAnalyzeAuth measures Analyze on the benchmark capture with
// every connection authenticated: without the key (tags counted) and with
// it (every tag verified).
func BenchmarkAnalyzeAuth(b *testing.B) {
	path, s := writeBenchCaptureKey(b, b.TempDir(), benchFrames, &testKey)
	for _, c := range []struct {
		name string
		key  *wire.Key
	}{{"nokey", nil}, {"key", &testKey}} {
		b.Run(c.name, func(b *testing.B) {
			var rep *Report
			var err error
			for b.Loop() {
				rep, err = AnalyzeFile(path, AnalyzeOptions{Key: c.key})
				if err != nil {
					b.Fatal(err)
				}
			}
			if rep.Frames != s.frames || (c.key != nil && rep.Auth.Verified != rep.Frames) {
				b.Fatalf("analyzed %d frames, generated %d; auth %+v", rep.Frames, s.frames, rep.Auth)
			}
			b.ReportMetric(float64(rep.Frames)/(b.Elapsed().Seconds()/float64(b.N)), "frames/s")
		})
	}
}
