package capture

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// recrc recomputes the CRC of frame b, as someone who tampers with a frame
// on the wire would, so that only the tag can tell.
func recrc(b []byte) []byte {
	end := len(b) - wire.TrailerLen
	binary.BigEndian.PutUint32(b[end:], crc32.Checksum(b[:end], castagnoli))
	return b
}

// authSynth returns a generator of a 4-node cluster whose connections are
// authenticated with testKey, every node live.
func authSynth(t testing.TB, out *bytes.Buffer, seed uint64) *synth {
	s := newSynth(t, out, 4, seed)
	s.key = &testKey
	for i := range s.live {
		s.live[i] = true
	}
	return s
}

// authScenario is a boot election, heartbeats, a leader crash and the
// election after it.
func authScenario(s *synth) {
	leader := s.elect(0, 0, wire.ReasonBoot)
	s.heartbeats(leader, 1, 5)
	s.crash(leader)
	s.advance(500 * time.Millisecond)
	leader = s.elect(0, 1, wire.ReasonLeaderFailed)
	s.heartbeats(leader, 2, 5)
}

func analyzeKey(t testing.TB, data []byte, key *wire.Key) *Report {
	t.Helper()
	rep, err := Analyze(bytes.NewReader(data), AnalyzeOptions{Name: "auth.pcapng", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func reportText(t testing.TB, rep *Report) string {
	t.Helper()
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestAuthVerified analyzes an authenticated cluster's capture, clean and
// with impaired TCP: with the key every frame verifies; without it every
// frame is counted as authenticated.
func TestAuthVerified(t *testing.T) {
	var plainBuf bytes.Buffer
	plain := newSynth(t, &plainBuf, 4, 11)
	for i := range plain.live {
		plain.live[i] = true
	}
	authScenario(plain)
	plain.close(t)
	if a := analyzeBytes(t, plainBuf.Bytes()).Auth; a != nil {
		t.Errorf("a capture without authentication has an auth report: %+v", a)
	}

	for _, impaired := range []bool{false, true} {
		var buf bytes.Buffer
		s := authSynth(t, &buf, 11)
		if impaired {
			s.split, s.reorder, s.retransmit = 0.2, 0.1, 0.1
		}
		authScenario(s)
		s.close(t)

		rep := analyzeKey(t, buf.Bytes(), &testKey)
		checkCounts(t, s, rep)
		a := rep.Auth
		if rep.Messages.Hello == 0 || rep.Messages.Hello != s.total[wire.TypeHello] {
			t.Errorf("impaired %v: %d HELLOs, sent %d", impaired, rep.Messages.Hello, s.total[wire.TypeHello])
		}
		if a == nil || !a.Key || a.Frames != rep.Frames || a.Verified != rep.Frames || a.Failed != 0 || a.Unverified != 0 ||
			a.Streams != rep.Messages.Hello || a.ReplayCount != 0 || !a.OK() {
			t.Fatalf("impaired %v: auth %+v, %d frames", impaired, a, rep.Frames)
		}
		if impaired && rep.Stream.OutOfOrder == 0 {
			t.Error("impairments not exercised")
		}
		txt := reportText(t, rep)
		if !strings.Contains(txt, "verified, 0 failed, 0 not verified") || !strings.Contains(txt, "HELLOs)") {
			t.Errorf("text report:\n%s", txt)
		}

		noKey := analyzeKey(t, buf.Bytes(), nil)
		if a := noKey.Auth; a == nil || a.Key || a.Frames != rep.Frames || a.Verified != 0 || a.Failures != nil {
			t.Errorf("without the key: %+v", a)
		}
		if txt := reportText(t, noKey); !strings.Contains(txt, "frames authenticated (not verified: no key)") {
			t.Errorf("text report without the key:\n%s", txt)
		}
	}
}

// TestAuthWrongKey: under another key every HELLO fails, and the frames
// after them are not accepted; one failure is listed per stream.
func TestAuthWrongKey(t *testing.T) {
	var buf bytes.Buffer
	s := authSynth(t, &buf, 12)
	authScenario(s)
	s.close(t)
	other := testKey
	other[31] ^= 0x80
	rep := analyzeKey(t, buf.Bytes(), &other)
	a := rep.Auth
	if a.Verified != 0 || a.Failed != rep.Messages.Hello || a.AfterFailure != rep.Frames-a.Failed || a.OK() || a.Streams != 0 {
		t.Fatalf("auth %+v", a)
	}
	if want := min(rep.Messages.Hello, MaxAuthFailures); int64(len(a.Failures)) != want {
		t.Errorf("%d failures listed, want %d", len(a.Failures), want)
	}
	if f := a.Failures[0]; f.Type != "HELLO" || f.Frame != 0 || !strings.Contains(f.Reason, "another cluster key") || f.From == "" {
		t.Errorf("first failure %+v", f)
	}
	if txt := reportText(t, rep); !strings.Contains(txt, "Authentication failures") || !strings.Contains(txt, fmt.Sprintf("%d not accepted (after a failure on their connection)", a.AfterFailure)) {
		t.Errorf("text report:\n%s", txt)
	}
}

// TestAuthTampered: a frame changed on the wire, its CRC fixed up, fails;
// the frames after it on its connection are not accepted. One sealed with
// another node's From fails too, though its tag verifies, and the frames
// after it verify: the receiver drops it and reads on.
func TestAuthTampered(t *testing.T) {
	var buf bytes.Buffer
	s := authSynth(t, &buf, 13)
	// The leader n4's frames to n1 are HELLO, ANSWER, HALT, COORDINATOR,
	// then HEARTBEATs: its second HEARTBEAT claims epoch 7.
	s.alter = func(a, b, i int, f []byte) []byte {
		if a == 3 && b == 0 && i == 5 {
			f[11] = 7
			return recrc(f)
		}
		return f
	}
	leader := s.elect(0, 0, wire.ReasonBoot)
	s.heartbeats(leader, 1, 5)
	// n2 sends n3 a HEARTBEAT as n1, sealed on its own connection.
	s.send(1, 2, s.msg(wire.TypeHeartbeat, 0, 1, 0))
	s.heartbeats(leader, 1, 2)
	s.close(t)

	rep := analyzeKey(t, buf.Bytes(), &testKey)
	checkCounts(t, s, rep)
	a := rep.Auth
	// n4 -> n1 carried HEARTBEATs 3 to 5 of the first round and 1 and 2
	// of the second after the tampered one.
	if a.Failed != 2 || a.AfterFailure != 5 || a.Verified != rep.Frames-7 || a.Unverified != 0 || a.OK() || len(a.Failures) != 2 {
		t.Fatalf("auth %+v", a)
	}
	if f := a.Failures[0]; f.Frame != 5 || f.Type != "HEARTBEAT" || f.From != "n4" || f.Reason != "tag mismatch" || !strings.HasSuffix(f.Stream, "10.77.0.2:7946") {
		t.Errorf("tampered frame: %+v", f)
	}
	if f := a.Failures[1]; f.From != "n2" || !strings.Contains(f.Reason, "is not the connection's") || !strings.HasSuffix(f.Stream, "10.77.0.4:7946") {
		t.Errorf("frame with another From: %+v", f)
	}
}

// TestAuthAfterFailure: the receiving node closes a connection at a tag
// that does not verify, so the frames after it on that connection, whose
// tags verify, are reported as not accepted, in the text and the JSON;
// the connection the dialer opens next verifies again.
func TestAuthAfterFailure(t *testing.T) {
	var buf bytes.Buffer
	s := authSynth(t, &buf, 18)
	tampered := false
	s.alter = func(a, b, i int, f []byte) []byte {
		// The leader n4's connection to n1 carries HELLO, ANSWER, HALT,
		// COORDINATOR and HEARTBEATs: this is its second HEARTBEAT.
		if a == 3 && b == 0 && i == 5 && !tampered {
			tampered = true
			f[11] ^= 0x01
			return recrc(f)
		}
		return f
	}
	leader := s.elect(0, 0, wire.ReasonBoot)
	s.heartbeats(leader, 1, 5)
	s.closeConn(leader, 0) // n4 redials n1, with a new HELLO
	s.heartbeats(leader, 1, 2)
	s.close(t)
	if !tampered || leader != 3 {
		t.Fatalf("the scenario did not come out as planned: leader n%d, tampered %v", leader+1, tampered)
	}

	rep := analyzeKey(t, buf.Bytes(), &testKey)
	checkCounts(t, s, rep)
	a := rep.Auth
	// HEARTBEATs 3 to 5 of the first connection came after the failure.
	if a.Failed != 1 || a.AfterFailure != 3 || a.Verified != rep.Frames-4 || a.Unverified != 0 || a.Streams != rep.Messages.Hello || a.OK() {
		t.Fatalf("auth %+v, %d frames", a, rep.Frames)
	}
	if f := a.Failures[0]; f.Frame != 5 || f.Type != "HEARTBEAT" || f.From != "n4" || f.Reason != "tag mismatch" {
		t.Errorf("failure %+v", f)
	}
	txt := reportText(t, rep)
	if want := fmt.Sprintf("%d frames verified, 1 failed, 3 not accepted (after a failure on their connection), 0 not verified", a.Verified); !strings.Contains(txt, want) {
		t.Errorf("text report lacks %q:\n%s", want, txt)
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Auth map[string]any `json:"auth"`
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Auth["after_failure"] != 3.0 || doc.Auth["failed"] != 1.0 || doc.Auth["verified"] != float64(a.Verified) {
		t.Errorf("JSON auth: %v", doc.Auth)
	}
}

// TestAuthMidConnection: connections whose start the capture lacks are
// reported, not verified; the rest verify. A capture that lost a segment
// in the middle of a connection verifies the frames after the hole.
func TestAuthMidConnection(t *testing.T) {
	var buf bytes.Buffer
	s := authSynth(t, &buf, 14)
	s.mute = true
	s.heartbeats(3, 1, 2) // n4 opens its connections before the capture starts
	s.mute = false
	s.heartbeats(3, 1, 2)
	s.send(0, 1, s.msg(wire.TypeJoin, 0, 1, 0)) // a connection the capture has from its SYN
	s.send(0, 1, s.msg(wire.TypeHeartbeat, 0, 1, 0))
	s.mute = true
	s.send(0, 1, s.msg(wire.TypeHeartbeat, 0, 1, 0)) // lost by the capture
	s.mute = false
	s.send(0, 1, s.msg(wire.TypeLeave, 0, 1, 0))
	s.close(t)

	rep := analyzeKey(t, buf.Bytes(), &testKey)
	a := rep.Auth
	if a.WithoutHello != 3 || a.Unverified != 6 || a.Failed != 0 || a.Verified != 4 || a.Streams != 1 || a.Lost != 0 || !a.OK() {
		t.Fatalf("auth %+v (%d frames, stream %+v)", a, rep.Frames, rep.Stream)
	}
	if rep.Stream.Gaps != 1 || rep.Stream.MidStream != 3 {
		t.Errorf("stream stats %+v", rep.Stream)
	}
	if txt := reportText(t, rep); !strings.Contains(txt, "3 began mid-connection (not verified)") {
		t.Errorf("text report:\n%s", txt)
	}
}

// TestAuthStreamsRefused: connections that do not begin with a proper
// HELLO fail at their first frame; the receiver reads no further.
func TestAuthStreamsRefused(t *testing.T) {
	var buf bytes.Buffer
	s := authSynth(t, &buf, 15)
	hb := func(from int) []byte {
		return wire.Append(nil, s.msg(wire.TypeHeartbeat, from, 1, 0))
	}
	sealed := func(from int, h wire.Hello, frames ...[]byte) []byte {
		sl, out := wire.NewSealer(nil, &testKey, s.nodes[from].ID, h)
		for _, f := range frames {
			out = sl.Seal(out, f)
		}
		return out
	}
	// n1 -> n2 unauthenticated.
	s.sendRaw(0, 1, append(hb(0), hb(0)...), wire.TypeHeartbeat, wire.TypeHeartbeat)
	// n2 -> n3 with a HELLO addressed to n4.
	s.sendRaw(1, 2, sealed(1, wire.Hello{To: s.nodes[3].ID, Time: 1}, hb(1)), wire.TypeHello, wire.TypeHeartbeat)
	// n3 -> n4 with a HELLO that lost its tag.
	var h wire.Message
	if _, err := wire.Decode(sealed(2, wire.Hello{To: s.nodes[3].ID, Time: 2}), &h); err != nil {
		t.Fatal(err)
	}
	h.Flags, h.Tag = 0, nil
	s.sendRaw(2, 3, wire.Append(nil, &h), wire.TypeHello)
	s.close(t)

	rep := analyzeKey(t, buf.Bytes(), &testKey)
	a := rep.Auth
	if a.Failed != 3 || a.AfterFailure != 2 || a.Verified != 0 || len(a.Failures) != 3 || a.OK() {
		t.Fatalf("auth %+v", a)
	}
	for i, want := range []string{"begins with HEARTBEAT, not a HELLO", "HELLO is for node " + shortID(s.nodes[3].ID) + ", sent to n3", "HELLO without a tag"} {
		if !strings.Contains(a.Failures[i].Reason, want) {
			t.Errorf("failure %d: %+v, want %q", i, a.Failures[i], want)
		}
	}
}

// TestAuthReplay: a recorded connection played again verifies frame by
// frame, but its HELLO's nonce gives it away.
func TestAuthReplay(t *testing.T) {
	var buf bytes.Buffer
	s := authSynth(t, &buf, 16)
	var recorded []byte
	var types []wire.Type
	s.alter = func(a, b, _ int, f []byte) []byte {
		if a == 3 && b == 0 {
			recorded = append(recorded, f...)
			types = append(types, wire.Type(f[2]))
		}
		return f
	}
	s.heartbeats(3, 1, 3)
	s.closeConn(3, 0)
	s.advance(time.Second)
	s.sendRaw(3, 0, recorded, types...)
	s.close(t)

	rep := analyzeKey(t, buf.Bytes(), &testKey)
	checkCounts(t, s, rep)
	a := rep.Auth
	if a.Failed != 0 || a.Verified != rep.Frames || a.ReplayCount != 1 || len(a.Replays) != 1 || a.OK() {
		t.Fatalf("auth %+v", a)
	}
	if r := a.Replays[0]; r.From != "n4" || r.FirstPacket >= r.Packet || r.Stream == r.FirstStream {
		t.Errorf("replay %+v", r)
	}
	if txt := reportText(t, rep); !strings.Contains(txt, "1 HELLOs replayed") || !strings.Contains(txt, "Replayed HELLOs") {
		t.Errorf("text report:\n%s", txt)
	}
}

// authConnection is the stream of an authenticated connection from node
// from to node to: the HELLO, then n frames of every type, and the frames
// one by one.
func authConnection(n int) ([]byte, [][]byte) {
	ms, _ := testFrames(n)
	from, to := ms[0].From, uuid.MustParse("00000000-0000-4000-8000-0000000000bb")
	s, hello := wire.NewSealer(nil, &testKey, from, wire.Hello{To: to, Time: 1e18, Nonce: [16]byte{1}})
	frames := [][]byte{hello}
	stream := bytes.Clone(hello)
	for i := range ms {
		if ms[i].Type == wire.TypeHello {
			continue
		}
		f := s.Seal(nil, wire.Append(nil, &ms[i]))
		frames = append(frames, f)
		stream = append(stream, f...)
	}
	return stream, frames
}

// authCollector checks every frame a Dissector finds, as the analyzer
// does, and keeps the outcomes.
type authCollector struct {
	c        *authChecker
	frames   int64
	verified map[uint64][]byte // position -> the frame verified there
	fail     func(format string, args ...any)
}

func (ac *authCollector) Frame(f *Frame) {
	ac.frames++
	r := ac.c.frame(f, "n1", "n2", uuid.UUID{})
	if r.Outcome == authVerified {
		if _, dup := ac.verified[r.Frame]; dup {
			ac.fail("position %d verified twice", r.Frame)
		}
		ac.verified[r.Frame] = wire.Append(nil, &f.Msg)
	}
}

func (ac *authCollector) StreamError(*StreamError) {}

// FuzzAuth feeds arbitrary streams, seeded with an authenticated
// connection cut, shuffled, thinned and tampered with, to the
// verification: nothing may panic, every frame is counted once, and only
// the very frames sealed at a position may verify there.
func FuzzAuth(f *testing.F) {
	stream, frames := authConnection(14)
	f.Add(stream, []byte{3, 40, 7, 200, 1, 1, 90})
	f.Add(stream, []byte{0x80, 52, 0x81, 52, 0x80, 52})
	tampered := bytes.Clone(stream)
	tampered[len(frames[0])+len(frames[1])+8] ^= 1
	f.Add(tampered, []byte{})
	f.Add(stream[len(frames[0]):], []byte{})
	f.Fuzz(func(t *testing.T, data, plan []byte) {
		if len(data) > 8<<10 || len(plan) > 256 {
			return
		}
		// The plan cuts the stream (low 7 bits: the next segment's length
		// less one) and drops the segments whose top bit is set.
		var at []int
		var drop []bool
		p := 0
		for _, b := range plan {
			p += 1 + int(b&0x7f)
			if p >= len(data) {
				break
			}
			at = append(at, p)
			drop = append(drop, b&0x80 != 0)
		}
		segs := cut(data, 77, at...)
		kept := segs[:2]
		for i, sg := range segs[2:] {
			if i > 0 && i-1 < len(drop) && drop[i-1] {
				continue
			}
			kept = append(kept, sg)
		}
		ac := &authCollector{c: newAuthChecker(&testKey), verified: map[uint64][]byte{}, fail: t.Errorf}
		d := NewDissector(ac, DissectorOptions{})
		for i, sg := range kept {
			b, n := sg.bytes(t)
			ci := gopacket.CaptureInfo{CaptureLength: len(b), Length: n}
			d.Packet(int64(i+1), layers.LinkTypeEthernet, b, &ci)
		}
		d.Flush()
		r := ac.c.rep
		if r.Verified+r.Failed+r.AfterFailure+r.Unverified != ac.frames {
			t.Fatalf("%d frames, %d verified + %d failed + %d after a failure + %d not verified", ac.frames, r.Verified, r.Failed, r.AfterFailure, r.Unverified)
		}
		for pos, b := range ac.verified {
			if pos >= uint64(len(frames)) || !bytes.Equal(b, frames[pos]) {
				t.Fatalf("frame %x verified at position %d", b, pos)
			}
		}
	})
}

// TestCountSentHello checks that CountSent counts HELLOs by sending node,
// under their type name, as the nodes' counters do.
func TestCountSentHello(t *testing.T) {
	var buf bytes.Buffer
	s := authSynth(t, &buf, 17)
	authScenario(s)
	s.close(t)
	path := filepath.Join(t.TempDir(), "auth.pcapng")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := CountSent(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range s.nodes {
		for _, ty := range wire.Types {
			if c := got[n.Name][ty.String()]; c != uint64(s.sent[i][ty]) {
				t.Errorf("%s %s: CountSent %d, sent %d", n.Name, ty, c, s.sent[i][ty])
			}
		}
	}
	if got["n4"]["HELLO"] == 0 {
		t.Errorf("no HELLO counted: %v", got)
	}
}
