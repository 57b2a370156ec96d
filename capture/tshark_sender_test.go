//go:build linux

package capture

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/wire"
)

// TestTsharkSender: the Lua dissector shows each frame's sender as its
// dashed UUID (bullylab.from.uuid) and its node name from the capture's
// testbed record (bullylab.from.name), in the tree and in the Info column
// ("from=n3 (UUID)"): on an authenticated capture with a leader's crash,
// every frame's pair is a node of the testbed record, its name for its
// ID, and every sender the analyzer counts is named.
func TestTsharkSender(t *testing.T) {
	tshark := requireTshark(t)
	path := filepath.Join(t.TempDir(), "sender.pcapng")
	var buf bytes.Buffer
	s := authSynth(t, &buf, 31)
	s.split, s.reorder = 0.1, 0.05
	authScenario(s)
	s.close(t)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := analyzeBytes(t, buf.Bytes())
	byID := map[string]string{}
	for _, r := range rep.Records {
		if r.Testbed != nil {
			for _, n := range r.Testbed.Nodes {
				byID[n.ID.String()] = n.Name
			}
		}
	}
	if len(byID) != len(s.nodes) {
		t.Fatalf("the testbed record names %d nodes, the capture has %d", len(byID), len(s.nodes))
	}
	sent := map[string]int64{}
	frames := int64(0)
	for num, layers := range tsharkJSON(t, tshark, path, "bullylab.type", "bullylab.from.uuid", "bullylab.from.name", "_ws.col.Info") {
		types, ids, names := layers["bullylab.type"], layers["bullylab.from.uuid"], layers["bullylab.from.name"]
		if len(types) == 0 {
			continue
		}
		if len(ids) != len(types) || len(names) != len(types) {
			t.Fatalf("packet %d: %d frames, %d sender IDs, %d sender names", num, len(types), len(ids), len(names))
		}
		info := strings.Join(layers["_ws.col.Info"], "")
		for i, id := range ids {
			if want, ok := byID[id]; !ok || names[i] != want {
				t.Errorf("packet %d: sender %q named %q; the testbed record names %s %q", num, id, names[i], id, want)
			}
			if w := fmt.Sprintf("%s epoch=", types[i]); !strings.Contains(info, w) || !strings.Contains(info, fmt.Sprintf("from=%s (%s)", names[i], id)) {
				t.Errorf("packet %d: Info %q does not show sender %s (%s)", num, info, names[i], id)
			}
			sent[names[i]]++
			frames++
		}
	}
	for _, n := range rep.Nodes {
		if got, want := sent[n.Name], n.Sent.Total(); got != want {
			t.Errorf("tshark names %s as the sender of %d frames, the analyzer counts %d", n.Name, got, want)
		}
	}
	if frames != rep.Frames {
		t.Errorf("tshark named the senders of %d frames, the analyzer found %d", frames, rep.Frames)
	}
}

// TestTsharkKeyFile: a cluster key file as a bench and `bullylab up
// --capture` keep it (wire.WriteKeyFile: base64 and a newline, mode 0600)
// verifies a capture in the Lua dissector, pointed at with the Cluster key
// file preference or pasted whole into Cluster key, as analyze verifies it
// with --cluster-key; a file that cannot be read says so.
func TestTsharkKeyFile(t *testing.T) {
	tshark := requireTshark(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "run-leader-crash-1.pcapng")
	var buf bytes.Buffer
	s := authSynth(t, &buf, 32)
	authScenario(s)
	s.close(t)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	keyFile := ClusterKeyFile(path)
	if keyFile != filepath.Join(dir, "run-leader-crash-1.key") {
		t.Fatalf("key file of %s: %s", path, keyFile)
	}
	if err := wire.WriteKeyFile(keyFile, testKey); err != nil {
		t.Fatal(err)
	}
	key, err := wire.ReadKeyFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	a := analyzeKey(t, buf.Bytes(), &key).Auth
	if a.Verified == 0 || a.Verified != a.Frames {
		t.Fatalf("analyze with the key file verified %d of %d frames", a.Verified, a.Frames)
	}
	text, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, pref := range []string{"bullylab.cluster_key_file:" + keyFile, "bullylab.cluster_key:" + string(text)} {
		status, _ := tsharkAuth(t, tshark, path, "-o", pref)
		if int64(len(status["verified"])) != a.Verified || len(status) != 1 {
			t.Errorf("-o %q: tshark statuses %v, want %d verified", pref, statusCounts(status), a.Verified)
		}
	}
	missing := filepath.Join(dir, "missing.key")
	status, experts := tsharkAuth(t, tshark, path, "-o", "bullylab.cluster_key_file:"+missing)
	if int64(len(status["unverified"])) != a.Frames || !slices.ContainsFunc(experts, func(e string) bool {
		return strings.Contains(e, "Cluster key file cannot be read") && strings.Contains(e, missing)
	}) {
		t.Errorf("a missing key file: tshark statuses %v, experts %q", statusCounts(status), experts)
	}
}

// statusCounts counts tsharkAuth's packets by status.
func statusCounts(status map[string][]int64) map[string]int {
	out := map[string]int{}
	for k, v := range status {
		out[k] = len(v)
	}
	return out
}
