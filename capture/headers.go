package capture

import (
	"encoding/binary"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// tcpHeaders is what the Dissector takes from a TCP segment's packet.
type tcpHeaders struct {
	key      flowKey
	seq, ack uint32
	flags    uint8 // the TCP header's flags byte
	payload  []byte
	// missing is what the segment carried on the wire beyond what was
	// captured (the capture cut it short).
	missing int
	tsval   uint32
	hasTS   bool
}

// TCP flags of tcpHeaders.flags.
const (
	flagFIN = 0x01
	flagSYN = 0x02
	flagRST = 0x04
	flagACK = 0x10
)

func (t *tcpHeaders) syn() bool     { return t.flags&flagSYN != 0 }
func (t *tcpHeaders) fin() bool     { return t.flags&flagFIN != 0 }
func (t *tcpHeaders) rst() bool     { return t.flags&flagRST != 0 }
func (t *tcpHeaders) ackFlag() bool { return t.flags&flagACK != 0 }

// pureACK says the segment carries no data, and neither SYN, FIN nor RST.
func (t *tcpHeaders) pureACK() bool {
	return len(t.payload) == 0 && t.flags&(flagSYN|flagFIN|flagRST) == 0
}

// Header sizes and values the fast path reads.
const (
	ethHeaderLen  = 14
	ip4HeaderLen  = 20
	ip6HeaderLen  = 40
	tcpHeaderLen  = 20
	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
	protoTCP      = 6
	tcpOptEnd     = 0
	tcpOptNop     = 1
	tcpOptTS      = 8
	tcpOptTSLen   = 10
	tcpOptMPTCP   = 30
)

// fastHeaders decodes the headers of the common packet by hand: Ethernet
// (or raw IP), IPv4 without options or fragments, or IPv6 without
// extension headers, and TCP, captured whole. gopacket's
// DecodingLayerParser costs a sixth of an analysis on these; it decodes
// every other packet (ok false), which fastHeaders must then decode to
// the same result, as TestFastHeadersAsGopacket and FuzzFastHeaders hold
// it to.
func fastHeaders(linkType layers.LinkType, data []byte, t *tcpHeaders) (ok bool) {
	switch linkType {
	case layers.LinkTypeEthernet:
		if len(data) < ethHeaderLen {
			return false
		}
		switch binary.BigEndian.Uint16(data[12:14]) {
		case etherTypeIPv4:
			return fastIPv4(data[ethHeaderLen:], t)
		case etherTypeIPv6:
			return fastIPv6(data[ethHeaderLen:], t)
		}
		return false
	case layers.LinkTypeRaw, layers.LinkTypeIPv4:
		if len(data) > 0 && data[0]>>4 == 6 {
			return fastIPv6(data, t)
		}
		return fastIPv4(data, t)
	case layers.LinkTypeIPv6:
		return fastIPv6(data, t)
	}
	return false
}

func fastIPv4(b []byte, t *tcpHeaders) bool {
	if len(b) < ip4HeaderLen || b[0] != 0x45 || b[9] != protoTCP {
		return false
	}
	length := int(binary.BigEndian.Uint16(b[2:4]))
	if length < ip4HeaderLen || length > len(b) {
		return false // a TSO length of 0, or cut by the snap length
	}
	if binary.BigEndian.Uint16(b[6:8])&0x3fff != 0 {
		return false // a fragment
	}
	t.key = flowKey{}
	copy(t.key.src[12:], b[12:16])
	copy(t.key.dst[12:], b[16:20])
	t.key.src[10], t.key.src[11], t.key.dst[10], t.key.dst[11] = 0xff, 0xff, 0xff, 0xff
	return fastTCP(b[ip4HeaderLen:length], t)
}

func fastIPv6(b []byte, t *tcpHeaders) bool {
	if len(b) < ip6HeaderLen || b[0]>>4 != 6 || b[6] != protoTCP {
		return false
	}
	length := int(binary.BigEndian.Uint16(b[4:6]))
	if length == 0 || ip6HeaderLen+length > len(b) {
		return false // a jumbogram, or cut by the snap length
	}
	t.key = flowKey{}
	copy(t.key.src[:], b[8:24])
	copy(t.key.dst[:], b[24:40])
	return fastTCP(b[ip6HeaderLen:ip6HeaderLen+length], t)
}

// fastTCP decodes a TCP header and its payload, all captured.
func fastTCP(b []byte, t *tcpHeaders) bool {
	if len(b) < tcpHeaderLen {
		return false
	}
	dataStart := int(b[12]>>4) * 4
	if dataStart < tcpHeaderLen || dataStart > len(b) {
		return false
	}
	t.key.sport = binary.BigEndian.Uint16(b[0:2])
	t.key.dport = binary.BigEndian.Uint16(b[2:4])
	t.seq = binary.BigEndian.Uint32(b[4:8])
	t.ack = binary.BigEndian.Uint32(b[8:12])
	t.flags = b[13]
	t.payload = b[dataStart:]
	t.missing = 0
	return fastTimestamp(b[tcpHeaderLen:dataStart], t)
}

// fastTimestamp finds the timestamp option as gopacket's option walk
// does: the first one of its kind and length, up to an end of options or
// an option whose length cannot be followed. MPTCP options, whose walk
// has rules of its own, are left to gopacket.
func fastTimestamp(opts []byte, t *tcpHeaders) bool {
	t.tsval, t.hasTS = 0, false
	for len(opts) > 0 {
		switch opts[0] {
		case tcpOptEnd:
			return true
		case tcpOptNop:
			opts = opts[1:]
			continue
		case tcpOptMPTCP:
			return false
		}
		if len(opts) < 2 || opts[1] < 2 || int(opts[1]) > len(opts) {
			return true
		}
		if opts[0] == tcpOptTS && opts[1] == tcpOptTSLen {
			t.tsval, t.hasTS = binary.BigEndian.Uint32(opts[2:6]), true
			return true
		}
		opts = opts[opts[1]:]
	}
	return true
}

// headerDecoder decodes the headers of packets: by hand when it can
// (fastHeaders), else with gopacket.
type headerDecoder struct {
	eth     layers.Ethernet
	ip4     layers.IPv4
	ip6     layers.IPv6
	tcp     tcpLayer
	ethP    *gopacket.DecodingLayerParser
	ipP     *gopacket.DecodingLayerParser
	ip6P    *gopacket.DecodingLayerParser
	decoded []gopacket.LayerType
}

func (d *headerDecoder) init() {
	d.decoded = make([]gopacket.LayerType, 0, 4)
	d.ethP = d.parser(layers.LayerTypeEthernet)
	d.ipP = d.parser(layers.LayerTypeIPv4)
	d.ip6P = d.parser(layers.LayerTypeIPv6)
}

// headers decodes the headers of a packet of the given link type into t:
// ok says it is a TCP segment; notDecodable that its IP layer was decoded
// but not what it carries.
func (d *headerDecoder) headers(linkType layers.LinkType, data []byte, t *tcpHeaders) (ok, notDecodable bool) {
	if fastHeaders(linkType, data, t) {
		return true, false
	}
	return d.slowHeaders(linkType, data, t)
}

// tcpLayer is layers.TCP ending the parse: its payload is stream data for
// the splitter, and TCP's own NextLayerType would look the ports up in
// gopacket's port table (a map, since RegisterPort put ours there) for
// every packet.
type tcpLayer struct{ layers.TCP }

func (t *tcpLayer) NextLayerType() gopacket.LayerType { return gopacket.LayerTypeZero }

func (d *headerDecoder) parser(first gopacket.LayerType) *gopacket.DecodingLayerParser {
	p := gopacket.NewDecodingLayerParser(first)
	p.SetDecodingLayerContainer(gopacket.DecodingLayerSparse(nil))
	p.AddDecodingLayer(&d.eth)
	p.AddDecodingLayer(&d.ip4)
	p.AddDecodingLayer(&d.ip6)
	p.AddDecodingLayer(&d.tcp)
	// ARP, UDP and the like end the parse quietly.
	p.IgnoreUnsupported = true
	return p
}

// slowHeaders decodes a packet with gopacket, as every packet was before
// fastHeaders: ok says it is a TCP segment; notDecodable that its IP
// layer was decoded but not what it carries.
func (d *headerDecoder) slowHeaders(linkType layers.LinkType, data []byte, t *tcpHeaders) (ok, notDecodable bool) {
	var p *gopacket.DecodingLayerParser
	switch linkType {
	case layers.LinkTypeEthernet:
		p = d.ethP
	case layers.LinkTypeRaw, layers.LinkTypeIPv4:
		if len(data) > 0 && data[0]>>4 == 6 {
			p = d.ip6P
		} else {
			p = d.ipP
		}
	case layers.LinkTypeIPv6:
		p = d.ip6P
	default:
		return false, false
	}
	err := p.DecodeLayers(data, &d.decoded)
	n := len(d.decoded)
	if n == 0 || d.decoded[n-1] != layers.LayerTypeTCP {
		last := gopacket.LayerTypeZero
		if n > 0 {
			last = d.decoded[n-1]
		}
		return false, err != nil && (last == layers.LayerTypeIPv4 || last == layers.LayerTypeIPv6)
	}
	tcp := &d.tcp.TCP
	if !d.gopacketFlowKey(tcp, d.decoded[n-2], t) {
		return false, false
	}
	t.seq, t.ack, t.payload = tcp.Seq, tcp.Ack, tcp.Payload
	t.flags = tcp.Contents[13] // the header gopacket decoded, 20 bytes at least
	t.tsval, t.hasTS = tcpTimestamp(tcp)
	return true, false
}

// gopacketFlowKey sets t's direction of its connection, and what the
// segment carried on the wire beyond what was captured, from the IP layer
// net decoded.
func (d *headerDecoder) gopacketFlowKey(tcp *layers.TCP, net gopacket.LayerType, t *tcpHeaders) bool {
	t.key = flowKey{}
	missing := 0
	switch net {
	case layers.LayerTypeIPv4:
		ip := &d.ip4
		missing = int(ip.Length) - int(ip.IHL)*4 - int(tcp.DataOffset)*4 - len(tcp.Payload)
		copy(t.key.src[12:], ip.SrcIP.To4())
		copy(t.key.dst[12:], ip.DstIP.To4())
		t.key.src[10], t.key.src[11], t.key.dst[10], t.key.dst[11] = 0xff, 0xff, 0xff, 0xff
	case layers.LayerTypeIPv6:
		ip := &d.ip6
		if ip.Length != 0 { // 0: jumbogram or GSO, no length to trust
			missing = int(ip.Length) - int(tcp.DataOffset)*4 - len(tcp.Payload)
		}
		copy(t.key.src[:], ip.SrcIP.To16())
		copy(t.key.dst[:], ip.DstIP.To16())
	default:
		return false
	}
	t.key.sport, t.key.dport = uint16(tcp.SrcPort), uint16(tcp.DstPort)
	t.missing = max(missing, 0)
	return true
}

// tcpTimestamp returns the TSval of t's timestamp option (RFC 7323), if it
// has a well-formed one.
func tcpTimestamp(t *layers.TCP) (uint32, bool) {
	for _, o := range t.Options {
		if o.OptionType == layers.TCPOptionKindTimestamps && len(o.OptionData) == 8 {
			return binary.BigEndian.Uint32(o.OptionData), true
		}
	}
	return 0, false
}
