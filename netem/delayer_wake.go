package netem

import (
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// How the release loop wakes. With a Go timer, the runtime notices the
// expiry only when one of its threads runs, and on a busy host every such
// thread waits behind other processes for a core; the release goroutine
// then waits again for its own turn. With a timerfd the kernel wakes the
// loop's own thread directly, and with SCHED_FIFO that thread preempts
// ordinary (CFS) threads as soon as it is woken. TestDelayerLateness
// measures the difference.
const (
	// delayerRTPriority is the lowest real-time priority: above every
	// ordinary thread, below any real-time work the host already runs.
	delayerRTPriority = 1

	wakeGoTimer = "go timer"
	wakeTimerfd = "timerfd"
	wakeFIFO    = "timerfd on a SCHED_FIFO thread"
)

// delayerUseTimerfd and delayerUseFIFO switch the two mechanisms off for
// the A/B comparison in TestDelayerLateness.
var delayerUseTimerfd, delayerUseFIFO = true, true

// newWakeTimer returns a timerfd for the release loop, or -1 and why the
// loop falls back to a Go timer.
func newWakeTimer() (int, string) {
	if !delayerUseTimerfd {
		return -1, wakeGoTimer + " (timerfd off)"
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC)
	if err != nil {
		return -1, wakeGoTimer + " (timerfd: " + err.Error() + ")"
	}
	return fd, wakeTimerfd
}

// lockRealtime locks the calling goroutine to its thread for good and
// makes that thread SCHED_FIFO, so that its wake-ups are not queued behind
// other processes. It reports how the loop wakes; a refusal (no
// CAP_SYS_NICE, an RLIMIT_RTPRIO of 0, a cgroup without real-time budget)
// leaves the thread an ordinary one. The goroutine must never unlock: the
// runtime then ends the thread with it instead of reusing a real-time
// thread for other goroutines.
func lockRealtime() string {
	runtime.LockOSThread()
	if !delayerUseFIFO {
		return wakeTimerfd + " (SCHED_FIFO off)"
	}
	attr := unix.SchedAttr{
		Size:     unix.SizeofSchedAttr,
		Policy:   unix.SCHED_FIFO,
		Flags:    1, // SCHED_FLAG_RESET_ON_FORK: a process forked from this thread starts ordinary
		Priority: delayerRTPriority,
	}
	if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
		return wakeTimerfd + " (SCHED_FIFO: " + err.Error() + ")"
	}
	return wakeFIFO
}

// armWake sets the timerfd to expire in d (at once when d <= 0), or
// disarms it when d is negative and disarm is set.
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

// waitWake blocks the thread until the timerfd expires. The read is a
// plain blocking syscall, not the runtime's poller: the kernel then wakes
// this thread itself.
func waitWake(fd int) error {
	var buf [8]byte
	for {
		_, err := unix.Read(fd, buf[:])
		if err != unix.EINTR {
			if err != nil {
				return fmt.Errorf("reading release timerfd: %w", err)
			}
			return nil
		}
	}
}
