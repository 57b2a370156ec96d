package capture

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
)

// hardSegment writes data from a to b as a stressed stack might: cut into
// up to five pieces at arbitrary offsets (often one inside the last
// frame's tag), pieces swapped within a window of two, some pieces sent
// twice, and some resent as one segment overlapping a cut, so that it
// brings new bytes along with old ones.
func (s *synth) hardSegment(a, b int, data []byte) {
	c := s.conn(a, b)
	port := uint16(s.nodes[b].Port)
	base := c.cseq
	c.cseq += uint32(len(data))
	cuts := []int{0, len(data)}
	if len(data) > 1 {
		for range s.rng.IntN(5) {
			cuts = append(cuts, 1+s.rng.IntN(len(data)-1))
		}
		if tagEnd := len(data) - wire.TrailerLen; tagEnd > wire.TagLen && s.rng.IntN(3) == 0 {
			cuts = append(cuts, tagEnd-1-s.rng.IntN(wire.TagLen-1))
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	type piece struct{ from, to int }
	pieces := make([]piece, 0, len(cuts)-1)
	for i := 1; i < len(cuts); i++ {
		pieces = append(pieces, piece{cuts[i-1], cuts[i]})
	}
	for i := 0; i+1 < len(pieces); i++ {
		if s.rng.IntN(5) == 0 {
			pieces[i], pieces[i+1] = pieces[i+1], pieces[i]
			i++
		}
	}
	send := func(p piece) {
		flags := byte(tcpACK)
		if p.to == len(data) {
			flags |= tcpPSH
		}
		s.packet(a, b, c.cport, port, base+uint32(p.from), c.sseq, flags, data[p.from:p.to])
	}
	for i, p := range pieces {
		send(p)
		if i == 0 {
			s.sentAt = s.t
		}
		switch r := s.rng.IntN(20); {
		case r == 0:
			send(p)
		case r == 1 && i+1 < len(pieces) && pieces[i+1].from == p.to:
			// The next piece's first bytes ride along with a resent tail
			// of this one.
			send(piece{p.from + (p.to-p.from)/2, p.to + 1 + s.rng.IntN(pieces[i+1].to-p.to)})
		}
	}
	c.unacked++
	if c.unacked >= 2 || s.rng.IntN(2) == 0 {
		s.packet(b, a, port, c.cport, c.sseq, c.cseq, tcpACK, nil)
		c.unacked = 0
	}
}

// hardMixScenario writes at least frames frames among every node: elections
// after leader crashes and restarts, and heartbeats between them, a few
// written together in one segment as a stalled writer's queue flushes.
func (s *synth) hardMixScenario(frames int64) {
	for i := range s.live {
		s.live[i] = true
	}
	n := len(s.nodes)
	epoch := uint64(0)
	leader := s.elect(0, epoch, wire.ReasonBoot)
	epoch++
	beats := func(rounds int) {
		for range rounds {
			s.advance(100 * time.Millisecond)
			for _, i := range s.liveNodes() {
				if i == leader {
					continue
				}
				hb := s.msg(wire.TypeHeartbeat, leader, epoch, 0)
				if s.rng.IntN(10) == 0 {
					s.sendFrames(leader, i, hb, hb, hb)
				} else {
					s.send(leader, i, hb)
				}
			}
		}
	}
	for s.frames < frames {
		beats(20)
		old := leader
		s.crash(old)
		s.advance(500 * time.Millisecond)
		leader = s.elect(s.rng.IntN(n-1), epoch, wire.ReasonLeaderFailed)
		epoch++
		beats(20)
		s.restart(old)
		s.advance(20 * time.Millisecond)
		leader = s.elect(old, epoch, wire.ReasonBoot)
		epoch++
	}
}

// writeHardMix writes a hard mix of at least frames frames among nodes
// nodes, every connection authenticated under testKey, to dir and returns
// its path and generator. Its testbed record gives the nodes' clock, as a
// testbed's does, so that the analysis reads every segment's send time.
func writeHardMix(tb testing.TB, dir string, nodes int, frames int64) (string, *synth) {
	tb.Helper()
	return writeSynth(tb, filepath.Join(dir, "hardmix.pcapng"), nodes, 29, msClock, func(s *synth) {
		s.key = &testKey
		s.hard = true
		s.hardMixScenario(frames)
	})
}

// TestAnalyzeHardMix checks that every frame of a hard mix is found,
// verified under the key and counted by type as sent, however its
// segments were cut, resent and reordered.
func TestAnalyzeHardMix(t *testing.T) {
	path, s := writeHardMix(t, t.TempDir(), 50, 20_000)
	for _, key := range []*wire.Key{nil, &testKey} {
		rep, err := AnalyzeFile(path, AnalyzeOptions{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		checkCounts(t, s, rep)
		if len(rep.StreamErrors) != 0 {
			t.Errorf("stream errors: %+v", rep.StreamErrors[0])
		}
		if rep.Stream.Retransmitted == 0 || rep.Stream.Overlapping == 0 {
			t.Errorf("no resends seen: %+v", rep.Stream)
		}
		if key != nil && (rep.Auth.Verified != s.frames || !rep.Auth.OK()) {
			t.Errorf("verified %d of %d frames: %+v", rep.Auth.Verified, s.frames, rep.Auth)
		}
		checkCopiesInOrder(t, rep)
	}
}

// checkCopiesInOrder checks that every election message's copies are
// listed in the order they were on the wire, and that some message was
// carried three times or more.
func checkCopiesInOrder(t *testing.T, rep *Report) {
	t.Helper()
	most := 0
	for n := range rep.Elections {
		tl, err := rep.ElectionTimeline(n + 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range tl.Entries {
			most = max(most, len(e.Transmissions))
			for i := 1; i < len(e.Transmissions); i++ {
				if e.Transmissions[i].Time.Before(e.Transmissions[i-1].Time) {
					t.Fatalf("election %d, packet %d: copy %d at %v before copy %d at %v", n+1, e.Packet, i, e.Transmissions[i].Time, i-1, e.Transmissions[i-1].Time)
				}
			}
		}
	}
	if most < 3 {
		t.Errorf("no election message was carried more than %d times", most)
	}
}

// hardMixFrames is the size of BenchmarkAnalyzeHardMix's capture: small
// enough for a one-iteration run of every benchmark; set
// BULLYLAB_HARDMIX_FRAMES (say to 1000000) to measure at scale, and
// BULLYLAB_HARDMIX_DIR to keep the capture (hardmix.pcapng) and its
// cluster key (hardmix.key) in that directory, for bullylab analyze.
func hardMixFrames(tb testing.TB) int64 {
	v := os.Getenv("BULLYLAB_HARDMIX_FRAMES")
	if v == "" {
		return 100_000
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		tb.Fatalf("BULLYLAB_HARDMIX_FRAMES=%q: want a positive frame count", v)
	}
	return n
}

// BenchmarkAnalyzeHardMix measures Analyze end to end, file to report, on
// a hard mix of 50 nodes, without the key (tags counted) and with it
// (every tag verified).
func BenchmarkAnalyzeHardMix(b *testing.B) {
	dir := os.Getenv("BULLYLAB_HARDMIX_DIR")
	if dir == "" {
		dir = b.TempDir()
	} else {
		keepHardMixKey(b, filepath.Join(dir, "hardmix.key"))
	}
	path, s := writeHardMix(b, dir, 50, hardMixFrames(b))
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		key  *wire.Key
	}{{"nokey", nil}, {"key", &testKey}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(st.Size())
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

// keepHardMixKey writes the hard mix's cluster key to path, unless a run
// before wrote it there.
func keepHardMixKey(b *testing.B, path string) {
	err := wire.WriteKeyFile(path, testKey)
	if errors.Is(err, fs.ErrExist) {
		var k wire.Key
		if k, err = wire.ReadKeyFile(path); err == nil && k != testKey {
			err = fmt.Errorf("%s holds another key than the hard mix's: remove it", path)
		}
	}
	if err != nil {
		b.Fatal(err)
	}
}

// packetsOf yields rd's packets to the end, failing the test on an error.
// Each Packet is valid until the next.
func packetsOf(t testing.TB, rd *FileReader) iter.Seq[*Packet] {
	return func(yield func(*Packet) bool) {
		for {
			p, err := rd.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !yield(p) {
				return
			}
		}
	}
}

// openCapture opens the capture at path for reading, until the test ends.
func openCapture(t testing.TB, path string) *FileReader {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	rd, err := NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	return rd
}
