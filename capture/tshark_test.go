//go:build linux

package capture

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/capture/capturetest"
	"github.com/bullylab/bullylab/wire"
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

// TestTsharkSynthetic compares tshark's counts with the analyzer's on a
// synthetic capture with split, reordered and retransmitted segments
// (TestTsharkLive, in live_test.go, does it on a live capture).
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
// on the benchmark capture (a million frames, or BULLYLAB_TSHARK_FRAMES;
// -short: 100,000), once each, and reports both rates and their ratio,
// which are per frame and so compare across sizes. tshark needs two minutes
// for a million frames.
func BenchmarkTshark(b *testing.B) {
	tshark := requireTshark(b)
	frames := int64(benchFrames)
	if testing.Short() {
		frames = 100_000
	}
	if v := os.Getenv("BULLYLAB_TSHARK_FRAMES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			b.Fatalf("BULLYLAB_TSHARK_FRAMES=%q: want a positive number of frames", v)
		}
		frames = n
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

// tsharkAuth runs tshark with the Lua dissector on path and returns, by
// authentication status, the numbers of the packets with a frame of that
// status (a packet once per frame), and the expert messages it printed.
func tsharkAuth(t testing.TB, tshark, path string, extra ...string) (map[string][]int64, []string) {
	t.Helper()
	args := append([]string{"-r", path, "-X", "lua_script:" + luaScript, "-T", "fields", "-E", "separator=|",
		"-e", "frame.number", "-e", "bullylab.auth.status", "-e", "_ws.expert.message"}, tsharkOptions...)
	cmd := exec.Command(tshark, append(args, extra...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v: %s", err, stderr.String())
	}
	status := map[string][]int64{}
	var experts []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		cols := strings.Split(line, "|")
		if len(cols) != 3 {
			t.Fatalf("tshark printed %q", line)
		}
		pkt, err := strconv.ParseInt(cols[0], 10, 64)
		if err != nil {
			t.Fatalf("tshark printed %q", line)
		}
		for s := range strings.SplitSeq(cols[1], ",") {
			if s != "" {
				status[s] = append(status[s], pkt)
			}
		}
		if cols[2] != "" {
			experts = append(experts, cols[2])
		}
	}
	return status, experts
}

// TestTsharkAuth compares the Lua dissector's verification with the
// analyzer's on a synthetic capture of an authenticated cluster with
// split, reordered and retransmitted segments, connections the capture
// has from mid-connection on, a frame tampered with (its CRC fixed up), one
// sealed with another node's ID, and a connection without a HELLO (two
// unauthenticated HEARTBEATs): without the key every frame is
// unverified; with it the same frames verify, fail, are not accepted
// (after a failure on their connection) and go unverified; with another
// key every HELLO fails and the frames after them are not accepted. The
// counts by type agree throughout.
func TestTsharkAuth(t *testing.T) {
	tshark := requireTshark(t)
	path := filepath.Join(t.TempDir(), "auth.pcapng")
	var buf bytes.Buffer
	s := authSynth(t, &buf, 21)
	s.split, s.reorder, s.retransmit = 0.1, 0.05, 0.05
	s.alter = func(a, b, i int, f []byte) []byte {
		if a == 3 && b == 1 && i == 6 {
			f[10] ^= 0x40 // the epoch of n4's third HEARTBEAT to n2, after ANSWER, HALT and COORDINATOR
			return recrc(f)
		}
		return f
	}
	s.mute = true
	s.heartbeats(2, 1, 2) // n3 leads before the capture starts
	s.mute = false
	s.heartbeats(2, 1, 2)
	authScenario(s)
	s.send(1, 2, s.msg(wire.TypeHeartbeat, 0, 2, 0))
	hb := wire.Append(nil, s.msg(wire.TypeHeartbeat, 2, 2, 0))
	s.closeConn(2, 1)
	s.sendRaw(2, 1, hb, wire.TypeHeartbeat)
	s.sendRaw(2, 1, hb, wire.TypeHeartbeat)
	s.close(t)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := analyzeKey(t, buf.Bytes(), &testKey)
	a := rep.Auth
	if a.Failed != 3 || len(a.Failures) != 3 || a.AfterFailure == 0 || a.WithoutHello == 0 || a.Unverified == 0 || rep.Messages.Hello == 0 || rep.Stream.OutOfOrder == 0 {
		t.Fatalf("the scenario did not come out as planned: %+v, %+v", a, rep.Stream)
	}
	t.Logf("%d frames: %d verified, %d failed, %d not accepted, %d not verified (%d streams without HELLO); %d out of order, %d retransmitted",
		rep.Frames, a.Verified, a.Failed, a.AfterFailure, a.Unverified, a.WithoutHello, rep.Stream.OutOfOrder, rep.Stream.Retransmitted)

	got, _ := tsharkTypes(t, tshark, path, tsharkOptions...)
	if got.typeCounts() != rep.Messages {
		t.Errorf("tshark found %+v\nanalyzer found %+v", got.typeCounts(), rep.Messages)
	}

	status, _ := tsharkAuth(t, tshark, path)
	if int64(len(status["unverified"])) != a.Frames || len(status) != 1 {
		t.Errorf("without the key: tshark statuses %d unverified of %d authenticated frames; others %v", len(status["unverified"]), a.Frames, status)
	}

	key := "bullylab.cluster_key:" + testKey.Encode()
	status, experts := tsharkAuth(t, tshark, path, "-o", key)
	if n := int64(len(status["verified"])); n != a.Verified {
		t.Errorf("tshark verified %d frames, the analyzer %d", n, a.Verified)
	}
	if n := int64(len(status["unverified"])); n != a.Unverified {
		t.Errorf("tshark left %d frames unverified, the analyzer %d", n, a.Unverified)
	}
	if n := int64(len(status["not accepted"])); n != a.AfterFailure {
		t.Errorf("tshark did not accept %d frames, the analyzer %d", n, a.AfterFailure)
	}
	var failed []int64
	for _, f := range a.Failures {
		failed = append(failed, f.Packet)
	}
	if !slices.Equal(status["failed"], failed) {
		t.Errorf("tshark failed the frames of packets %v, the analyzer listed %v of %d", status["failed"], failed, a.Failed)
	}
	// Two passes, as Wireshark's GUI makes: the second shows what the
	// first found. The first has no protocol tree, so it cannot tell that
	// the connection without a HELLO is in the capture from its SYN on:
	// its frames are unverified instead of failed and not accepted.
	twice, _ := tsharkAuth(t, tshark, path, "-o", key, "-2")
	notUnverified := func(ps []int64) []int64 {
		return slices.DeleteFunc(slices.Clone(ps), func(p int64) bool { return slices.Contains(twice["unverified"], p) })
	}
	if !slices.Equal(twice["verified"], status["verified"]) ||
		len(twice["failed"])+len(twice["not accepted"])+len(twice["unverified"]) != len(status["failed"])+len(status["not accepted"])+len(status["unverified"]) ||
		!slices.Equal(twice["failed"], notUnverified(status["failed"])) || !slices.Equal(twice["not accepted"], notUnverified(status["not accepted"])) {
		t.Errorf("tshark -2 found %v, one pass %v", twice, status)
	}
	for _, want := range []string{"Authentication failed: tag mismatch", "Authentication failed: sender ID is not the one of the connection's HELLO",
		"Not verified: stream began mid-connection", "Authentication failed: the connection begins with HEARTBEAT, not a HELLO",
		"Not accepted: its connection did not begin with a HELLO", "Not accepted: a frame before it on its connection failed"} {
		if !slices.ContainsFunc(experts, func(e string) bool { return strings.Contains(e, want) }) {
			t.Errorf("no expert info %q among tshark's", want)
		}
	}

	other := testKey
	other[0] ^= 1
	wrong := analyzeKey(t, buf.Bytes(), &other).Auth
	status, _ = tsharkAuth(t, tshark, path, "-o", "bullylab.cluster_key:"+other.Encode())
	if int64(len(status["failed"])) != wrong.Failed || int64(len(status["not accepted"])) != wrong.AfterFailure || int64(len(status["unverified"])) != wrong.Unverified ||
		wrong.Verified != 0 || len(status["verified"]) != 0 {
		t.Errorf("another key: tshark %d failed, %d not accepted, %d unverified; analyzer %+v", len(status["failed"]), len(status["not accepted"]), len(status["unverified"]), wrong)
	}

	status, experts = tsharkAuth(t, tshark, path, "-o", "bullylab.cluster_key:not a key")
	if int64(len(status["unverified"])) != a.Frames || !slices.ContainsFunc(experts, func(e string) bool { return strings.Contains(e, "not 44 base64 characters") }) {
		t.Errorf("a malformed key: tshark statuses %v", status)
	}
}

// BenchmarkTsharkAuth runs tshark with the Lua dissector on an
// authenticated benchmark capture (20,000 frames; -short: 5,000) without
// and with the cluster key, and reports both rates: with the key, the Lua
// code computes two SHA-256 compressions per frame.
func BenchmarkTsharkAuth(b *testing.B) {
	tshark := requireTshark(b)
	frames := int64(20_000)
	if testing.Short() {
		frames = 5_000
	}
	path, _ := writeBenchCaptureKey(b, b.TempDir(), frames, &testKey)
	rep, err := AnalyzeFile(path, AnalyzeOptions{Key: &testKey})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		status, _ := tsharkAuth(b, tshark, path)
		plain := time.Since(start)
		start = time.Now()
		status2, _ := tsharkAuth(b, tshark, path, "-o", "bullylab.cluster_key:"+testKey.Encode())
		keyed := time.Since(start)
		if int64(len(status["unverified"])) != rep.Frames || int64(len(status2["verified"])) != rep.Auth.Verified {
			b.Errorf("tshark: %d unverified without the key, %d verified with it; analyzer %+v", len(status["unverified"]), len(status2["verified"]), rep.Auth)
		}
		b.ReportMetric(float64(rep.Frames)/plain.Seconds(), "tshark-frames/s")
		b.ReportMetric(float64(rep.Frames)/keyed.Seconds(), "tshark-verified-frames/s")
		b.Logf("tshark %v without the key, %v with it, for %d frames", plain.Round(time.Millisecond), keyed.Round(time.Millisecond), rep.Frames)
	}
}
