//go:build linux

package netem

import (
	"encoding/binary"
	"time"

	"golang.org/x/sys/unix"
)

// queuedFor is how long ago the kernel built pkt, an IPv4 TCP segment whose
// timestamp option counts CLOCK_MONOTONIC in ticks of unit (modulo 2^32),
// so that its delay runs from then and not from when the delayer read it;
// 0 when unit is 0 or pkt has no timestamp. A tick's truncation is
// halved: at most half a tick early or late.
func queuedFor(pkt []byte, unit time.Duration) time.Duration {
	if unit <= 0 {
		return 0
	}
	tsval, ok := tcpTSval(pkt)
	if !ok {
		return 0
	}
	var now unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &now) != nil {
		return 0
	}
	mono := now.Nano()
	tick := mono / int64(unit)
	built := (tick+int64(int32(tsval-uint32(tick))))*int64(unit) + int64(unit)/2
	return time.Duration(max(0, mono-built))
}

// tcpTSval returns the TSval of an IPv4 TCP segment's timestamp option.
func tcpTSval(pkt []byte) (uint32, bool) {
	if len(pkt) < 20 || pkt[0]>>4 != 4 || pkt[9] != unix.IPPROTO_TCP {
		return 0, false
	}
	ihl := int(pkt[0]&0x0f) * 4
	if ihl < 20 || ihl+20 > len(pkt) {
		return 0, false
	}
	tcp := pkt[ihl:]
	if len(tcp) < 20 {
		return 0, false
	}
	hdr := int(tcp[12]>>4) * 4
	if hdr < 20 || hdr > len(tcp) {
		return 0, false
	}
	opts := tcp[20:hdr]
	for len(opts) > 0 {
		switch kind := opts[0]; {
		case kind == 0: // end of options
			return 0, false
		case kind == 1: // no-op
			opts = opts[1:]
		case len(opts) < 2 || int(opts[1]) < 2 || int(opts[1]) > len(opts):
			return 0, false
		case kind == 8 && opts[1] == 10:
			return binary.BigEndian.Uint32(opts[2:]), true
		default:
			opts = opts[opts[1]:]
		}
	}
	return 0, false
}
