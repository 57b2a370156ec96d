//go:build linux

package netem

import (
	"encoding/binary"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tsSegment is an IPv4 TCP header with options opts (padded to 4 bytes).
func tsSegment(opts ...byte) []byte {
	for len(opts)%4 != 0 {
		opts = append(opts, 0)
	}
	p := make([]byte, 40+len(opts))
	p[0], p[9] = 0x45, unix.IPPROTO_TCP
	p[32] = byte((20+len(opts))/4) << 4
	copy(p[40:], opts)
	return p
}

func tsOption(tsval uint32) []byte {
	o := []byte{1, 1, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(o[4:], tsval)
	return o
}

func TestTCPTSval(t *testing.T) {
	withSACK := append([]byte{4, 2}, tsOption(77)...)
	for _, c := range []struct {
		name string
		pkt  []byte
		want uint32
		ok   bool
	}{
		{"timestamps", tsSegment(tsOption(0xdeadbeef)...), 0xdeadbeef, true},
		{"after SACK-permitted", tsSegment(withSACK...), 77, true},
		{"no options", tsSegment(), 0, false},
		{"end of options first", tsSegment(append([]byte{0}, tsOption(5)...)...), 0, false},
		{"option longer than header", tsSegment(8, 40), 0, false},
		{"zero-length option", tsSegment(3, 0, 8, 10), 0, false},
		{"UDP", func() []byte { p := tsSegment(tsOption(1)...); p[9] = unix.IPPROTO_UDP; return p }(), 0, false},
		{"IP header past the packet", []byte{0x4f, 0, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0, false},
		{"short", []byte{0x45}, 0, false},
	} {
		got, ok := tcpTSval(c.pkt)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: %d %v, want %d %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// TestQueuedFor: a segment built 30 ms ago by the monotonic clock has been
// queued 30 ms, within half a tick; without a unit or a timestamp, 0.
func TestQueuedFor(t *testing.T) {
	var now unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err != nil {
		t.Fatal(err)
	}
	for _, unit := range []time.Duration{time.Microsecond, time.Millisecond} {
		built := now.Nano() - int64(30*time.Millisecond)
		pkt := tsSegment(tsOption(uint32(built / int64(unit)))...)
		got := queuedFor(pkt, unit)
		// The call reads the clock after this test did: later, never earlier.
		if got < 30*time.Millisecond-unit || got > 30*time.Millisecond+unit+time.Second {
			t.Errorf("unit %v: queued for %v, want about 30ms", unit, got)
		}
	}
	if got := queuedFor(tsSegment(tsOption(1)...), 0); got != 0 {
		t.Errorf("without a unit: %v", got)
	}
	if got := queuedFor(tsSegment(), time.Microsecond); got != 0 {
		t.Errorf("without a timestamp: %v", got)
	}
}

func FuzzTCPTSval(f *testing.F) {
	f.Add(tsSegment(tsOption(5)...))
	f.Add(tsSegment(4, 2, 1, 3, 3, 7))
	f.Fuzz(func(t *testing.T, pkt []byte) {
		if v, ok := tcpTSval(pkt); !ok && v != 0 {
			t.Fatalf("TSval %d without an option", v)
		}
	})
}
