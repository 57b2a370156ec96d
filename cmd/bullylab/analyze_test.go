package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/google/uuid"
)

// writeCapture writes a small capture of records: the testbed, crashes
// and restarts of each node, the end.
func writeCapture(t *testing.T, path string) []byte {
	t.Helper()
	var nodes []capture.NodeInfo
	for i := 1; i <= 3; i++ {
		nodes = append(nodes, capture.NodeInfo{Name: fmt.Sprintf("n%d", i), Index: i, ID: uuid.New(),
			Addr: netip.AddrFrom4([4]byte{10, 77, 0, byte(i + 1)}), Port: 7946})
	}
	var buf bytes.Buffer
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	w, err := capture.NewWriter(&buf, capture.WriterOptions{Testbed: capture.TestbedInfo{Topology: "star3", Run: "bl0001", Nodes: nodes},
		Window: -1, Start: start})
	if err != nil {
		t.Fatal(err)
	}
	at := start
	for _, n := range nodes {
		for _, kind := range []fault.Kind{fault.Crash, fault.Restart} {
			at = at.Add(time.Second)
			if err := w.WriteRecord(capture.Record{Time: at, Kind: kind, Nodes: []string{n.Name}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestAnalyzeTruncated: a capture cut short, as `bullylab up` killed with
// SIGKILL leaves it, is analyzed up to the cut with a one-line warning
// naming the file and exit status 0; one cut before any packet cannot be
// analyzed, exit status 2 (unusable input).
func TestAnalyzeTruncated(t *testing.T) {
	dir := t.TempDir()
	data := writeCapture(t, filepath.Join(dir, "whole.pcapng"))
	cut := filepath.Join(dir, "cut.pcapng")
	if err := os.WriteFile(cut, data[:len(data)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runBin(t, "analyze", "--json", cut)
	want := fmt.Sprintf("bullylab: warning: %s: truncated capture: the file ends inside a block at byte %d; analyzed the 8 packets before it", cut, len(data)-1)
	if code != 0 || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("analyze of a cut capture: exit %d, stderr %q, want 0 and %q", code, stderr, want)
	}
	var rep capture.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	// Cut in the statistics after the last packet, it lost no packet.
	if rep.Truncated == nil || rep.Truncated.Packets != 8 || rep.Packets != 8 || len(rep.Records) != 8 {
		t.Errorf("report: %d packets, %d records, truncated %+v; want all 8 and the cut", rep.Packets, len(rep.Records), rep.Truncated)
	}
	stdout, _, code = runBin(t, "analyze", cut)
	if code != 0 || !strings.Contains(stdout, "truncated") {
		t.Errorf("text report: exit %d:\n%s", code, stdout)
	}

	if err := os.WriteFile(cut, data[:30], 0o644); err != nil {
		t.Fatal(err)
	}
	wantUsage(t, "analyze "+cut+": not a pcapng file", "analyze", cut)
}
