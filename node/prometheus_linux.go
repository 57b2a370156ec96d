package node

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// writeProcessMetrics writes the process_* families from /proc/self and
// the kernel's accounting; one it cannot read is left out, as a node's
// metrics matter more than its process's.
func writeProcessMetrics(e *expoWriter) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		e.single("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", cpu.Seconds())
	}
	if st, err := os.ReadFile("/proc/self/statm"); err == nil {
		// statm's second field is the resident set, in pages.
		if f := bytes.Fields(st); len(f) > 1 {
			if pages, err := strconv.ParseUint(string(f[1]), 10, 64); err == nil {
				e.single("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", float64(pages*uint64(os.Getpagesize())))
			}
		}
	}
	if fds, err := countOpenFDs(); err == nil {
		e.single("process_open_fds", "gauge", "Number of open file descriptors.", float64(fds))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		e.single("process_max_fds", "gauge", "Maximum number of open file descriptors.", float64(lim.Cur))
	}
	if start, err := processStartTime(); err == nil {
		e.single("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.", start)
	}
}

// countOpenFDs counts the entries of /proc/self/fd, the descriptor that
// reads it among them.
func countOpenFDs() (int, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	return len(names), err
}

// processStartTime is read once: it does not change while the process runs.
var processStartTime = sync.OnceValues(readProcessStartTime)

// userHZ is the unit of /proc/self/stat's times, fixed at 100 on every
// Linux architecture Go supports.
const userHZ = 100

// readProcessStartTime returns when the process started, in seconds since
// the Unix epoch: the kernel's boot time (btime in /proc/stat) plus the
// process's start in ticks after boot (field 22 of /proc/self/stat).
func readProcessStartTime() (float64, error) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces
	// and parentheses itself: count fields after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("/proc/self/stat: no ')' closing the command name")
	}
	f := bytes.Fields(stat[i+1:]) // f[0] is field 3, the state
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/self/stat: %d fields, want at least 22", len(f)+2)
	}
	ticks, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/self/stat: starttime: %v", err)
	}
	boot, err := readBootTime()
	if err != nil {
		return 0, err
	}
	return float64(boot) + float64(ticks)/userHZ, nil
}

// readBootTime returns btime of /proc/stat, when the kernel booted in
// seconds since the Unix epoch.
func readBootTime() (uint64, error) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(stat) {
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			t, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/stat: btime: %v", err)
			}
			return t, nil
		}
	}
	return 0, errors.New("/proc/stat: no btime line")
}
