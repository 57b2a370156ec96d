//go:build linux

package netem

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The release loop sleeps on a timerfd read through the runtime's poller
// rather than on a Go timer. The runtime waits for its timers in
// epoll_wait, whose timeout is in whole milliseconds (rounded up below one,
// down above), so a Go timer fires up to 1 ms late even on an idle host;
// a timerfd's expiry is an event epoll reports at once.
// BenchmarkDelayerLateness, 10 ms delay, a datagram every 500 µs, three
// interleaved runs of each on the shared 2-core VM, Go timer -> timerfd:
//
//	idle:                p50 640 -> 96 µs, releases over 1 ms 11.3% -> 0.4%
//	two busy processes:  p50 850 -> 96 µs, over 1 ms 20.8% -> 8.0%, over 2 ms 4.9% -> 4.0%
//	one allocating goroutine (a spare P): over 2 ms 20.7% -> 19.8%
//	GOMAXPROCS allocating goroutines:     over 2 ms 64.4% -> 53.9%
//
// The tails under load are the wait for a core (busy processes) or for a
// P (this process's own goroutines), which no wake-up removes. A locked
// SCHED_FIFO thread blocking on the timerfd was tried too: it cut the
// busy-process tail further (over 2 ms 2.2%) but lengthened the
// in-process ones (over 2 ms 29.6% and 74%), because a locked thread woken
// without a P waits for a P to hand it one; and it would cost a real-time
// thread per impaired node.
var delayerUseTimerfd = true // false: a Go timer, for the comparison

// newWakeTimer returns the release loop's timerfd, both as a file read
// through the poller and as the descriptor armWake sets (File.Fd would
// make it blocking), or nil and why the loop falls back to a Go timer.
func newWakeTimer() (*os.File, int, string) {
	if !delayerUseTimerfd {
		return nil, -1, "go timer (timerfd off)"
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, -1, "go timer (timerfd: " + err.Error() + ")"
	}
	return os.NewFile(uintptr(fd), "release timerfd"), fd, "timerfd"
}

// armWake sets the timerfd to expire in d (at once when d <= 0), or
// disarms it when disarm is set.
func armWake(fd int, d time.Duration, disarm bool) error {
	var spec unix.ItimerSpec
	if !disarm {
		// A zero it_value disarms, so "now" is the shortest non-zero time.
		spec.Value = unix.NsecToTimespec(max(int64(d), 1))
	}
	if err := unix.TimerfdSettime(fd, 0, &spec, nil); err != nil {
		return fmt.Errorf("arming release timerfd: %w", err)
	}
	return nil
}

// waitWake blocks until the timerfd expires.
func waitWake(f *os.File) error {
	var buf [8]byte // the expiry count, which the loop does not need
	if _, err := f.Read(buf[:]); err != nil {
		return fmt.Errorf("reading release timerfd: %w", err)
	}
	return nil
}
