//go:build linux

package netem

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// offsetReadings is how many sandwiches MonotonicOffset takes: one may be
// cut by preemption, and the tightest is kept.
const offsetReadings = 5

// MonotonicOffset returns CLOCK_REALTIME minus CLOCK_MONOTONIC, which
// turns a node's TSval (see Testbed.TCPTimestampUnit) into the wall clock
// a capture's timestamps are on, and a bound on its error. The two clocks
// cannot be read at once: each try reads the wall clock between two
// monotonic readings, and the try with the smallest gap between those
// wins; the gap is the bound.
func MonotonicOffset() (offset, maxErr time.Duration, err error) {
	var before, wall, after unix.Timespec
	best := time.Duration(-1)
	for range offsetReadings {
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &before); err != nil {
			return 0, 0, fmt.Errorf("reading CLOCK_MONOTONIC: %w", err)
		}
		if err := unix.ClockGettime(unix.CLOCK_REALTIME, &wall); err != nil {
			return 0, 0, fmt.Errorf("reading CLOCK_REALTIME: %w", err)
		}
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &after); err != nil {
			return 0, 0, fmt.Errorf("reading CLOCK_MONOTONIC: %w", err)
		}
		gap := time.Duration(after.Nano() - before.Nano())
		if best < 0 || gap < best {
			best = gap
			// The wall clock was read somewhere in the gap: its middle
			// halves the worst case, which stays within the gap.
			offset = time.Duration(wall.Nano() - (before.Nano() + int64(gap)/2))
		}
	}
	return offset, best, nil
}
