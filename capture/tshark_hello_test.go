//go:build linux

package capture

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/wire"
)

// TestTsharkSignedHello: the Lua dissector shows a signed HELLO's fields,
// its key as the peers file writes it, and verifies its tag.
func TestTsharkSignedHello(t *testing.T) {
	tshark := requireTshark(t)
	path := filepath.Join(t.TempDir(), "signed.pcapng")
	var buf bytes.Buffer
	s := authSynth(t, &buf, 32)
	s.memberKeys = testMemberKeys(4)
	authScenario(s)
	s.close(t)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := analyzeKey(t, buf.Bytes(), &testKey)
	status, experts := tsharkAuth(t, tshark, path, "-o", "bullylab.cluster_key:"+testKey.Encode())
	bad := slices.ContainsFunc(experts, func(e string) bool { return strings.Contains(e, "HELLO") || strings.Contains(e, "Authentication") })
	if n := int64(len(status["verified"])); n != rep.Auth.Verified || len(status) != 1 || bad {
		t.Errorf("tshark verified %d frames (statuses %v, experts %q), the analyzer %d", n, status, experts, rep.Auth.Verified)
	}
	want := map[string]bool{}
	for _, k := range s.memberKeys {
		want[wire.EncodePublicKey(k.Public().(ed25519.PublicKey))] = true
	}
	got := tsharkJSON(t, tshark, path, "bullylab.hello.public_key_text", "bullylab.hello.signed")
	var hellos int64
	for _, layers := range got {
		for _, k := range layers["bullylab.hello.public_key_text"] {
			hellos++
			if !want[k] {
				t.Errorf("tshark shows member key %q, none of the nodes'", k)
			}
		}
	}
	if hellos != rep.Messages.Hello {
		t.Errorf("tshark shows %d member keys, for %d HELLOs", hellos, rep.Messages.Hello)
	}
}
