//go:build linux

package bench

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// haltFirstCapture writes a capture of four nodes in which n4, the leader,
// crashes; n3, the highest survivor, detects first and halts n1 and n2,
// and only then does n1, whose timer fired a little later, send an
// ELECTION. It returns the capture, the crash's time, and the times of
// the first HALT and of the last winning COORDINATOR.
func haltFirstCapture(t *testing.T) (data []byte, crash, halt, lastCoord time.Time) {
	t.Helper()
	var nodes []capture.NodeInfo
	for i := 1; i <= 4; i++ {
		var id uuid.UUID
		binary.BigEndian.PutUint64(id[:8], uint64(i)<<48) // IDs increase with i
		id[6], id[8] = 0x40, 0x80
		nodes = append(nodes, capture.NodeInfo{Name: fmt.Sprintf("n%d", i), Index: i, ID: id,
			Addr: netip.AddrFrom4([4]byte{10, 77, 0, byte(i + 1)}), Port: int(wire.DefaultPort)})
	}
	t0 := time.Date(2026, 3, 14, 9, 27, 0, 0, time.UTC)
	var buf bytes.Buffer
	w, err := capture.NewWriter(&buf, capture.WriterOptions{
		Testbed: capture.TestbedInfo{Topology: "star4", Run: "bl0001", Nodes: nodes,
			HeartbeatNS: int64(100 * time.Millisecond), FailureTimeoutNS: int64(500 * time.Millisecond), ElectionTimeoutNS: int64(200 * time.Millisecond)},
		Window: -1, Start: t0})
	if err != nil {
		t.Fatal(err)
	}
	seq := map[[2]int]uint32{}
	at := t0
	send := func(d time.Duration, typ wire.Type, epoch uint64, reason wire.Reason, from int, to ...int) time.Time {
		at = at.Add(d)
		first := at
		for k, dst := range to {
			if k > 0 {
				at = at.Add(20 * time.Microsecond)
			}
			payload := wire.Append(nil, &wire.Message{Type: typ, Flags: uint8(reason), Epoch: epoch, From: nodes[from-1].ID})
			src, dstN := nodes[from-1], nodes[dst-1]
			eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, byte(from)}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, byte(dst)}, EthernetType: layers.EthernetTypeIPv4}
			ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: src.Addr.AsSlice(), DstIP: dstN.Addr.AsSlice()}
			pair := [2]int{from, dst}
			if _, ok := seq[pair]; !ok {
				seq[pair] = 1000 * uint32(from*10+dst)
			}
			tcp := &layers.TCP{SrcPort: layers.TCPPort(40000 + dst), DstPort: layers.TCPPort(dstN.Port), Seq: seq[pair], ACK: true, PSH: true, Window: 502}
			seq[pair] += uint32(len(payload))
			if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
				t.Fatal(err)
			}
			sb := gopacket.NewSerializeBuffer()
			if err := gopacket.SerializeLayers(sb, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, tcp, gopacket.Payload(payload)); err != nil {
				t.Fatal(err)
			}
			iface, _ := w.NodeInterface(from)
			if err := w.WriteFrame(iface, at, sb.Bytes(), 0); err != nil {
				t.Fatal(err)
			}
		}
		return first
	}
	for range 3 {
		send(100*time.Millisecond, wire.TypeHeartbeat, 1, 0, 4, 1, 2, 3)
	}
	crash = at.Add(30 * time.Millisecond)
	at = crash
	if err := w.WriteRecord(capture.Record{Time: crash, Kind: fault.Crash, Nodes: []string{"n4"}, Detail: "SIGKILL pid 4242"}); err != nil {
		t.Fatal(err)
	}
	halt = send(470*time.Millisecond, wire.TypeHalt, 2, wire.ReasonLeaderFailed, 3, 1, 2)
	send(50*time.Microsecond, wire.TypeElection, 1, wire.ReasonLeaderFailed, 1, 2, 3)
	send(100*time.Microsecond, wire.TypeHaltAck, 2, 0, 2, 3)
	send(100*time.Microsecond, wire.TypeHaltAck, 2, 0, 1, 3)
	send(100*time.Microsecond, wire.TypeAnswer, 1, 0, 3, 1)
	send(100*time.Microsecond, wire.TypeCoordinator, 2, wire.ReasonLeaderFailed, 3, 1, 2)
	lastCoord = at
	for range 3 {
		send(100*time.Millisecond, wire.TypeHeartbeat, 2, 0, 3, 1, 2)
	}
	if err := w.WriteRecord(capture.Record{Time: at.Add(2 * time.Second), Kind: capture.KindEnd}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), crash, halt, lastCoord
}

// TestReportDetectionFirstHalt: detection runs from the fault to the
// election's first message, an ELECTION or a HALT: in an election a HALT
// opened, before any ELECTION, a run's detection is that HALT's time, and
// the report defines detection so.
func TestReportDetectionFirstHalt(t *testing.T) {
	data, crash, halt, lastCoord := haltFirstCapture(t)
	rep, err := capture.Analyze(bytes.NewReader(data), capture.AnalyzeOptions{Name: "halt-first.pcapng"})
	if err != nil {
		t.Fatal(err)
	}
	el := measuredElection(rep, crash, "")
	if el == nil {
		t.Fatalf("no measured election among %+v", rep.Elections)
	}
	if el.First.Type != "HALT" || el.Messages.Election != 2 || el.Trigger.Kind != "crash" {
		t.Fatalf("measured election opened by %s, %d ELECTIONs, trigger %s; want a HALT, n1's 2 ELECTIONs after it, the crash",
			el.First.Type, el.Messages.Election, el.Trigger.Kind)
	}

	ru := &runner{sc: &scenario.Scenario{Start: scenario.StartStable}, r: results.Run{Index: 1, OK: true, Leader: "n3", Epoch: 2, Messages: map[string]int{}}}
	ru.recordElection(el)
	run := ru.r
	if want := int64(halt.Sub(crash)); run.DetectionNS == nil || *run.DetectionNS != want {
		t.Fatalf("detection %v, want %d: the crash to the first HALT, not to the ELECTION after it", run.DetectionNS, want)
	}
	if want := int64(lastCoord.Sub(crash)); run.TimeToLeaderNS != want {
		t.Errorf("time to leader %d, want %d: the crash to the last winning COORDINATOR", run.TimeToLeaderNS, want)
	}

	r := &results.Results{Schema: results.Schema, Topology: results.TopologyInfo{Name: "star4", Nodes: 4}, Settings: results.RunSettings{Runs: 1},
		Scenarios: []results.ScenarioResult{{Name: "leader-crash", Runs: []results.Run{run}}}}
	r.Summarize()
	var page bytes.Buffer
	if err := report.Write(&page, r); err != nil {
		t.Fatal(err)
	}
	text := page.String()
	for _, want := range []string{
		"<dt>detection</dt>\n<dd>From the measured election's trigger to the election's first message on the wire: its first ELECTION, HALT or RING_ELECTION, whichever came first",
		"<td>" + results.FormatNS(*run.DetectionNS) + "</td>",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(text, "to the first ELECTION on the wire") {
		t.Error("report still defines detection as ending at the first ELECTION")
	}
}
