package capture

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// sameHeaders reports whether fastHeaders decodes data as gopacket does,
// and whether it took the packet at all.
func sameHeaders(t testing.TB, d *headerDecoder, lt layers.LinkType, data []byte) (fast bool) {
	t.Helper()
	var got, want tcpHeaders
	if !fastHeaders(lt, data, &got) {
		return false
	}
	ok, _ := d.slowHeaders(lt, data, &want)
	if !ok {
		t.Fatalf("link %v % x: the fast path took a packet gopacket does not decode as TCP", lt, data)
	}
	gp, wp := got.payload, want.payload
	got.payload, want.payload = nil, nil
	if !reflect.DeepEqual(got, want) || !bytes.Equal(gp, wp) {
		t.Fatalf("link %v % x:\nfast     %+v payload % x\ngopacket %+v payload % x", lt, data, got, gp, want, wp)
	}
	return true
}

// headerPackets returns packets of every shape the fast path takes or
// must leave to gopacket: Ethernet and raw, IPv4 and IPv6, TCP options of
// every kind, and the same with IP options, fragments and VLAN tags.
func headerPackets(t testing.TB) (pkts [][]byte, lts []layers.LinkType) {
	t.Helper()
	add := func(lt layers.LinkType, b []byte) {
		pkts, lts = append(pkts, b), append(lts, lt)
	}
	ts := make([]byte, 8)
	binary.BigEndian.PutUint32(ts, 0x01020304)
	optionSets := [][]layers.TCPOption{
		nil,
		{{OptionType: layers.TCPOptionKindNop}, {OptionType: layers.TCPOptionKindNop}, {OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: ts}},
		{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{5, 180}}, {OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: ts}},
		{{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 6, OptionData: ts[:4]}, {OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: ts}},
		{{OptionType: layers.TCPOptionKindEndList}, {OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: ts}},
		{{OptionType: layers.TCPOptionKindMultipathTCP, OptionLength: 4, OptionData: []byte{0x20, 0}}, {OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: ts}},
	}
	for _, opts := range optionSets {
		for _, payload := range [][]byte{nil, []byte("bullylab frame bytes")} {
			tcp := &layers.TCP{SrcPort: 40000, DstPort: 7946, Seq: 1 << 31, Ack: 77, ACK: true, PSH: len(payload) > 0, Window: 502, Options: opts}
			ip4 := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: []byte{10, 0, 0, 1}, DstIP: []byte{10, 0, 0, 2}, Flags: layers.IPv4DontFragment}
			ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP, SrcIP: bytes.Repeat([]byte{0xfd}, 16), DstIP: append(bytes.Repeat([]byte{0xfd}, 15), 2)}
			eth4 := &layers.Ethernet{SrcMAC: []byte{2, 0, 0, 0, 0, 1}, DstMAC: []byte{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
			eth6 := &layers.Ethernet{SrcMAC: []byte{2, 0, 0, 0, 0, 1}, DstMAC: []byte{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv6}
			add(layers.LinkTypeEthernet, serialize(t, eth4, ip4, tcp, gopacket.Payload(payload)))
			add(layers.LinkTypeRaw, serialize(t, ip4, tcp, gopacket.Payload(payload)))
			add(layers.LinkTypeEthernet, serialize(t, eth6, ip6, tcp, gopacket.Payload(payload)))
			add(layers.LinkTypeIPv6, serialize(t, ip6, tcp, gopacket.Payload(payload)))
			add(layers.LinkTypeRaw, serialize(t, ip6, tcp, gopacket.Payload(payload)))
			withOpts := *ip4
			withOpts.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
			add(layers.LinkTypeEthernet, serialize(t, eth4, &withOpts, tcp, gopacket.Payload(payload)))
			frag := *ip4
			frag.Flags, frag.FragOffset = layers.IPv4MoreFragments, 0
			add(layers.LinkTypeEthernet, serialize(t, eth4, &frag, tcp, gopacket.Payload(payload)))
			vlan := *eth4
			vlan.EthernetType = layers.EthernetTypeDot1Q
			add(layers.LinkTypeEthernet, serialize(t, &vlan, &layers.Dot1Q{VLANIdentifier: 7, Type: layers.EthernetTypeIPv4}, ip4, tcp, gopacket.Payload(payload)))
		}
	}
	return pkts, lts
}

// cutAndPadded returns pkts and, of each, every shorter cut and a copy
// with padding after it.
func cutAndPadded(pkts [][]byte, lts []layers.LinkType) ([][]byte, []layers.LinkType) {
	add := func(lt layers.LinkType, b []byte) {
		pkts, lts = append(pkts, b), append(lts, lt)
	}
	n := len(pkts)
	for i := range n {
		b, lt := pkts[i], lts[i]
		for k := range len(b) {
			add(lt, b[:k])
		}
		add(lt, append(append([]byte{}, b...), 0, 0, 0, 0, 0, 0))
	}
	return pkts, lts
}

func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	for _, l := range ls {
		if tcp, ok := l.(*layers.TCP); ok {
			for _, n := range ls {
				if nl, ok := n.(gopacket.NetworkLayer); ok {
					if err := tcp.SetNetworkLayerForChecksum(nl); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return append([]byte{}, buf.Bytes()...)
}

// TestFastHeadersAsGopacket checks that the fast path decodes every packet
// it takes as gopacket does: crafted packets of every shape, each cut
// short and with bytes flipped, and every packet of a hard mix, all of
// which it must take.
func TestFastHeadersAsGopacket(t *testing.T) {
	var d headerDecoder
	d.init()
	pkts, lts := cutAndPadded(headerPackets(t))
	took := 0
	for i, b := range pkts {
		if sameHeaders(t, &d, lts[i], b) {
			took++
		}
	}
	if took == 0 || took == len(pkts) {
		t.Fatalf("the fast path took %d of %d crafted packets: want some and not all", took, len(pkts))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		i := rng.IntN(len(pkts))
		b := append([]byte{}, pkts[i]...)
		for range 1 + rng.IntN(3) {
			if len(b) > 0 {
				b[rng.IntN(len(b))] ^= byte(1 << rng.IntN(8))
			}
		}
		sameHeaders(t, &d, lts[i], b)
	}

	path, _ := writeHardMix(t, t.TempDir(), 10, 2000)
	rd := openCapture(t, path)
	var seen int
	for p := range packetsOf(t, rd) {
		if p.Record != nil || p.Iface.Events {
			continue
		}
		seen++
		if !sameHeaders(t, &d, p.Iface.LinkType, p.Data) {
			t.Fatalf("packet %d: the fast path left a hard mix packet to gopacket", p.Num)
		}
	}
	if seen == 0 {
		t.Fatal("no packets in the hard mix")
	}
}

// FuzzFastHeaders checks that whatever the fast path takes, gopacket
// decodes to the same headers.
func FuzzFastHeaders(f *testing.F) {
	pkts, lts := headerPackets(f)
	for i, b := range pkts {
		f.Add(uint8(lts[i]), b)
	}
	var d headerDecoder
	d.init()
	f.Fuzz(func(t *testing.T, lt uint8, data []byte) {
		sameHeaders(t, &d, layers.LinkType(lt), data)
	})
}
