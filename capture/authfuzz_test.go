package capture

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/wire"
)

// authFuzzSeed is a small capture for FuzzAnalyzeAuth to mutate: n3's
// connections to n1 and n2, the one to n1 tampered with in its second
// HEARTBEAT, and one from n1 to n2 that does not begin with a HELLO.
func authFuzzSeed(tb testing.TB) []byte {
	var buf bytes.Buffer
	s := newSynth(tb, &buf, 3, 5)
	s.key = &testKey
	for i := range s.live {
		s.live[i] = true
	}
	s.alter = func(a, b, i int, f []byte) []byte {
		if a == 2 && b == 0 && i == 2 {
			f[11] ^= 1
			return recrc(f)
		}
		return f
	}
	s.heartbeats(2, 1, 3)
	s.sendRaw(0, 1, wire.Append(nil, s.msg(wire.TypeHeartbeat, 0, 1, 0)), wire.TypeHeartbeat)
	s.close(tb)
	return buf.Bytes()
}

// FuzzAnalyzeAuth analyzes arbitrary captures with the cluster key, as
// `bullylab analyze --cluster-key` does (FuzzAuth feeds the verification
// alone, FuzzReader the analysis without a key): an error is one line
// naming the file; a report counts every frame once, lists the failures
// it counts, and writes as text and JSON.
func FuzzAnalyzeAuth(f *testing.F) {
	data := authFuzzSeed(f)
	if a := analyzeKey(f, data, &testKey).Auth; a.Verified == 0 || a.Failed != 2 || a.AfterFailure == 0 {
		f.Fatalf("the seed does not exercise the verification: %+v", a)
	}
	f.Add(data)
	f.Add(data[:len(data)*2/3])
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return
		}
		rep, err := Analyze(bytes.NewReader(data), AnalyzeOptions{Name: "fuzz.pcapng", Key: &testKey})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.pcapng: ") || strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("error is not one line naming the file: %.500q", err)
			}
			return
		}
		a := rep.Auth
		if a == nil || !a.Key {
			t.Fatalf("no verification with the key: %+v", a)
		}
		if a.Verified+a.Failed+a.AfterFailure+a.Unverified != rep.Frames {
			t.Fatalf("%d frames, %d verified + %d failed + %d not accepted + %d not verified", rep.Frames, a.Verified, a.Failed, a.AfterFailure, a.Unverified)
		}
		if a.AfterFailure > 0 && a.Failed == 0 {
			t.Fatalf("%d frames not accepted after no failure", a.AfterFailure)
		}
		if int64(len(a.Failures)) != min(a.Failed, MaxAuthFailures) || int64(len(a.Replays)) != min(a.ReplayCount, MaxAuthFailures) {
			t.Fatalf("%d failures listed of %d, %d replays of %d", len(a.Failures), a.Failed, len(a.Replays), a.ReplayCount)
		}
		if err := rep.WriteText(io.Discard); err != nil {
			t.Fatal(err)
		}
		if _, err := json.Marshal(rep); err != nil {
			t.Fatal(err)
		}
	})
}
