package main

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// writeAuthCapture writes a capture of two nodes, each of which dials the
// other and sends a HELLO and three HEARTBEATs sealed with key; with
// tamper, n1's second HEARTBEAT has its epoch changed and its CRC fixed
// up. It returns the path.
func writeAuthCapture(t *testing.T, key *wire.Key, tamper bool) string {
	t.Helper()
	start := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	nodes := []capture.NodeInfo{
		{Name: "n1", Index: 1, ID: uuid.MustParse("10000000-0000-4000-8000-000000000001"), Addr: netip.MustParseAddr("10.77.0.2"), Port: 7946},
		{Name: "n2", Index: 2, ID: uuid.MustParse("20000000-0000-4000-8000-000000000002"), Addr: netip.MustParseAddr("10.77.0.3"), Port: 7946},
	}
	path := filepath.Join(t.TempDir(), "auth.pcapng")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := capture.NewWriter(f, capture.WriterOptions{Testbed: capture.TestbedInfo{Topology: "star2", Run: "bl0001", Nodes: nodes}, Window: -1, Start: start})
	if err != nil {
		t.Fatal(err)
	}
	ts := start
	packet := func(from, to int, sport, dport uint16, seq uint32, syn bool, payload []byte) {
		t.Helper()
		src, dst := nodes[from].Addr.AsSlice(), nodes[to].Addr.AsSlice()
		eth := &layers.Ethernet{SrcMAC: []byte{2, 0, 0, 0, 0, byte(from + 1)}, DstMAC: []byte{2, 0, 0, 0, 0, byte(to + 1)}, EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: src, DstIP: dst}
		tcp := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), Seq: seq, SYN: syn, ACK: !syn, PSH: len(payload) > 0, Window: 502}
		if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, tcp, gopacket.Payload(payload)); err != nil {
			t.Fatal(err)
		}
		ts = ts.Add(time.Millisecond)
		iface, _ := w.NodeInterface(from + 1)
		if err := w.WriteFrame(iface, ts, buf.Bytes(), 0); err != nil {
			t.Fatal(err)
		}
	}
	for from, to := range []int{1, 0} {
		sport, isn := uint16(40000+from), uint32(1000*(from+1))
		packet(from, to, sport, 7946, isn, true, nil)
		seq := isn + 1
		h := wire.Hello{To: nodes[to].ID, Time: ts.UnixNano(), Nonce: [16]byte{byte(from + 1)}}
		s, data := wire.NewSealer(nil, key, nodes[from].ID, h)
		for i := range 3 {
			m := wire.Message{Type: wire.TypeHeartbeat, Epoch: 1, From: nodes[from].ID}
			data = s.Seal(data, wire.Append(nil, &m))
			if tamper && from == 0 && i == 1 {
				// Re-encoded with the tag it had: a valid CRC, a wrong tag.
				var sealed wire.Message
				if _, err := wire.Decode(data, &sealed); err != nil {
					t.Fatal(err)
				}
				sealed.Epoch = 9
				data = wire.Append(nil, &sealed)
			}
			packet(from, to, sport, 7946, seq, false, data)
			seq += uint32(len(data))
			data = data[:0]
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAnalyzeClusterKey(t *testing.T) {
	key, err := wire.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "cluster.key")
	if err := wire.WriteKeyFile(keyFile, key); err != nil {
		t.Fatal(err)
	}
	other, _ := wire.NewKey()
	otherFile := filepath.Join(dir, "other.key")
	if err := wire.WriteKeyFile(otherFile, other); err != nil {
		t.Fatal(err)
	}
	good := writeAuthCapture(t, &key, false)

	out, stderr, code := runBin(t, "analyze", good)
	if code != 0 || !strings.Contains(out, "8 frames authenticated (not verified: no key)") || !strings.Contains(out, "2 HELLOs") {
		t.Errorf("without the key: exit %d, stderr %q, output:\n%s", code, stderr, out)
	}
	out, stderr, code = runBin(t, "analyze", "--cluster-key", keyFile, good)
	if code != 0 || !strings.Contains(out, "8 frames verified, 0 failed, 0 not verified; 2 streams opened by a HELLO") {
		t.Errorf("with the key: exit %d, stderr %q, output:\n%s", code, stderr, out)
	}
	out, _, code = runBin(t, "analyze", "--json", "--cluster-key", keyFile, good)
	var rep capture.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("--json: exit %d, %v", code, err)
	}
	if a := rep.Auth; a == nil || !a.Key || a.Verified != 8 || a.Failed != 0 || rep.Messages.Hello != 2 || rep.ElectionMessages != 0 {
		t.Errorf("--json: auth %+v, messages %+v", a, rep.Messages)
	}

	// Failures: the report, then exit 1 with one line on stderr.
	for _, c := range []struct {
		name, file, key, want string
	}{
		{"wrong key", good, otherFile, "authentication: 2 frames failed, 6 after them not accepted, 0 HELLOs replayed"},
		{"tampered", writeAuthCapture(t, &key, true), keyFile, "authentication: 1 frames failed, 1 after them not accepted, 0 HELLOs replayed"},
	} {
		out, stderr, code := runBin(t, "analyze", "--cluster-key", c.key, c.file)
		if code != 1 || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 || !strings.Contains(out, "Authentication failures") {
			t.Errorf("%s: exit %d, stderr %q, output:\n%s", c.name, code, stderr, out)
		}
	}

	if err := os.Chmod(keyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	// An unusable key file is unusable input, exit 2, not a failure.
	wantUsage(t, "--cluster-key: cluster key "+keyFile+": mode 0644", "analyze", "--cluster-key", keyFile, good)
	wantUsage(t, "no such file", "analyze", "--cluster-key", filepath.Join(dir, "none.key"), good)
}
