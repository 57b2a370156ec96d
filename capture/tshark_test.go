//go:build linux

package capture

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
)

var (
	tsharkOnce sync.Once
	tsharkPath string
	tsharkSkip string
	tsharkErr  error
)

// luaScript is the Wireshark dissector, relative to this package.
var luaScript = filepath.Join("..", "scripts", "bullylab.lua")

// requireTshark returns tshark's path, installing the Debian package if
// it is missing. It skips only when it cannot be installed for want of
// root or of a network; any other failure fails the test.
func requireTshark(t testing.TB) string {
	t.Helper()
	tsharkOnce.Do(func() {
		if p, err := exec.LookPath("tshark"); err == nil {
			tsharkPath = p
			return
		}
		if os.Geteuid() != 0 {
			tsharkSkip = "tshark is not installed and installing it needs root"
			return
		}
		install := func() ([]byte, error) {
			cmd := exec.Command("apt-get", "install", "-y", "--no-install-recommends", "tshark")
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			return cmd.CombinedOutput()
		}
		out, err := install()
		if err != nil {
			// The package lists may be missing or stale.
			if upd, uerr := exec.Command("apt-get", "update").CombinedOutput(); uerr != nil {
				out = append(out, upd...)
			} else {
				out, err = install()
			}
		}
		if err != nil {
			s := string(out)
			if strings.Contains(s, "Temporary failure resolving") || strings.Contains(s, "Could not resolve") ||
				strings.Contains(s, "Unable to locate package") || strings.Contains(s, "Failed to fetch") {
				tsharkSkip = "tshark is not installed and apt-get cannot reach a package mirror: " + lastLine(s)
				return
			}
			tsharkErr = errors.New("apt-get install tshark: " + err.Error() + ": " + lastLine(s))
			return
		}
		tsharkPath, tsharkErr = exec.LookPath("tshark")
	})
	if tsharkSkip != "" {
		t.Skip(tsharkSkip)
	}
	if tsharkErr != nil {
		t.Fatal(tsharkErr)
	}
	return tsharkPath
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// tsharkTypes runs tshark with the Lua dissector on path and counts the
// frames it finds by type; it returns the counts and the packets read.
func tsharkTypes(t testing.TB, tshark, path string, extra ...string) (counts, int64) {
	t.Helper()
	args := append([]string{"-r", path, "-X", "lua_script:" + luaScript, "-T", "fields", "-e", "bullylab.type"}, extra...)
	cmd := exec.Command(tshark, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v: %s", err, stderr.String())
	}
	for line := range strings.SplitSeq(strings.TrimSpace(stderr.String()), "\n") {
		if line != "" && !strings.Contains(line, "could be dangerous") {
			t.Logf("tshark: %s", line)
		}
	}
	var c counts
	var packets int64
	for line := range strings.SplitSeq(string(out), "\n") {
		if line == "" {
			continue
		}
		packets++
		for v := range strings.SplitSeq(line, ",") {
			if v == "" {
				continue
			}
			ty, ok := wire.ParseType(v)
			if !ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					t.Fatalf("tshark printed type %q", v)
				}
				ty = wire.Type(n)
			}
			c.add(ty)
		}
	}
	return c, packets
}

// tsharkOptions make Wireshark reassemble as the Dissector does: by
// default (4.0) it does not hold out-of-order segments for reassembly and
// loses the frames in them.
var tsharkOptions = []string{"-o", "tcp.reassemble_out_of_order:TRUE"}

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
