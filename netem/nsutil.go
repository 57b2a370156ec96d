//go:build linux

package netem

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetnsDir is where named network namespaces are mounted, as by `ip netns`.
const NetnsDir = "/run/netns"

// ErrNotPermitted is returned (wrapped) when this process may not create
// network namespaces. Tests skip on exactly this error and ErrNotSupported.
var ErrNotPermitted = errors.New("not permitted (needs root, or CAP_NET_ADMIN and CAP_SYS_ADMIN)")

// classify wraps err, from creating or entering a network namespace, with
// ErrNotPermitted or ErrNotSupported when its errno says so, so callers can
// tell a missing privilege or kernel feature from a real failure. EINVAL
// and ENOSYS say that the kernel has no network namespaces only where it
// has none, and so no /proc/self/ns/net: elsewhere they come from another
// call that failed (mounting the namespace, setns) and are failures.
func classify(err error) error {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("%w: %w", ErrNotPermitted, err)
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS):
		if _, serr := os.Stat(procSelfNetNS); errors.Is(serr, os.ErrNotExist) {
			return fmt.Errorf("%w: %w (and there is no %s)", ErrNotSupported, err, procSelfNetNS)
		}
	}
	return err
}

// procSelfNetNS is this process's network namespace; a kernel built
// without network namespaces lacks it. A variable for tests.
var procSelfNetNS = "/proc/self/ns/net"

// ProbeNamespaces creates and deletes a scratch named namespace. It returns
// nil, or an error wrapping ErrNotPermitted or ErrNotSupported when this
// process or kernel cannot run a testbed, or another error.
func ProbeNamespaces() error {
	if err := ensureSharedNetnsDir(); err != nil {
		return err
	}
	name := NodeNamespace(NewRunID(), "probe")
	errc := make(chan error, 1)
	go func() {
		// The thread ends up in the scratch namespace; staying locked when
		// the goroutine returns makes Go discard it instead of restoring it.
		runtime.LockOSThread()
		ns, err := netns.NewNamed(name)
		if err == nil {
			ns.Close()
		}
		errc <- err
	}()
	err := <-errc
	if derr := deleteNamed(name); err == nil && derr != nil {
		err = derr
	}
	if err != nil {
		return fmt.Errorf("creating network namespace %s: %w", name, classify(err))
	}
	return nil
}

// nsCreator creates named namespaces on one locked thread, returning the
// thread to its original namespace after each.
type nsCreator struct {
	orig netns.NsHandle
}

// newNSCreator locks the calling goroutine's thread. Call close from the
// same goroutine when done; after a broken create, that goroutine must exit
// so that Go discards its still-locked thread.
func newNSCreator() (*nsCreator, error) {
	if err := ensureSharedNetnsDir(); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("opening this thread's network namespace: %w", err)
	}
	return &nsCreator{orig: orig}, nil
}

// create returns a handle to a new namespace mounted as NetnsDir/name.
// broken reports that the thread could not be restored. configure, when
// not nil, runs in the new namespace: where its /proc/sys/net is.
func (c *nsCreator) create(name string, configure func()) (ns netns.NsHandle, broken bool, err error) {
	unlock, err := lockNetnsDir(false)
	if err != nil {
		return netns.None(), false, err
	}
	ns, err = netns.NewNamed(name)
	unlock()
	if err == nil {
		// The thread is in the new namespace until Set below. Switching it
		// off IPv6 keeps captures free of router solicitations and MLD
		// reports; bullylab speaks IPv4 only. Kernels without IPv6 lack the
		// files, which is fine.
		_ = disableIPv6()
		if configure != nil {
			configure()
		}
	}
	if rerr := netns.Set(c.orig); rerr != nil {
		if err == nil {
			ns.Close()
		}
		return netns.None(), true, fmt.Errorf("restoring the thread's namespace after creating %s: %w", name, rerr)
	}
	if err != nil {
		return netns.None(), false, fmt.Errorf("creating namespace %s: %w", name, classify(err))
	}
	return ns, false, nil
}

// close releases the creator. When broken it leaves the thread locked, so
// that Go discards it once the goroutine exits.
func (c *nsCreator) close(broken bool) {
	c.orig.Close()
	if !broken {
		runtime.UnlockOSThread()
	}
}

// disableIPv6 writes sysctls through /proc/sys, which resolves against the
// calling thread's namespace.
func disableIPv6() error {
	for _, f := range []string{"default", "all"} {
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+f+"/disable_ipv6", []byte("2"), 0); err != nil {
			return err
		}
	}
	return nil
}

// tcpTimestampsSysctl is net.ipv4.tcp_timestamps; 2 turns timestamps on
// without the random offset each connection otherwise adds to TSval.
const tcpTimestampsSysctl = "/proc/sys/net/ipv4/tcp_timestamps"

// timestampsWithoutOffset makes TCP in the calling thread's namespace
// send TSval as CLOCK_MONOTONIC in timestamp units (modulo 2^32), so that
// a capture can read each segment's send time from it. The setting is
// per namespace since Linux 4.15; older kernels have one host-wide
// setting that a namespace does not see, so the write fails there and
// changes nothing on the host.
func timestampsWithoutOffset() error {
	return os.WriteFile(tcpTimestampsSysctl, []byte("2"), 0)
}

// deleteNamed unmounts and removes NetnsDir/name; the namespace itself goes
// when its last process and file descriptor are gone, taking its links with
// it. Missing or half-created entries are fine. A name mounted twice holds
// two mounts, one on the other: each unmount takes the top one.
func deleteNamed(name string) error {
	p := filepath.Join(NetnsDir, name)
	for range maxStackedMounts {
		err := unix.Unmount(p, unix.MNT_DETACH)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			break // nothing (more) mounted there
		}
		if err != nil {
			return fmt.Errorf("unmounting %s: %w", p, err)
		}
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", p, err)
	}
	return nil
}

// maxStackedMounts bounds deleteNamed's unmounts of one name.
const maxStackedMounts = 16

// listNamespaces returns the names under NetnsDir that belong to run (to
// any run name when run is "").
func listNamespaces(run string) ([]string, error) {
	entries, err := os.ReadDir(NetnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		r, ok := RunOfNamespace(e.Name())
		if ok && (run == "" || r == run) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// onLockedThread runs fn on a locked OS thread of its own and puts the
// thread back into its original network namespace afterwards. If that
// fails the thread stays locked, so the Go runtime discards it rather than
// letting other goroutines run in the wrong namespace.
func onLockedThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("opening this thread's network namespace: %w", err)
			return
		}
		defer orig.Close()
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("restoring the thread's namespace: %w", err))
			return // still locked: the thread dies with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// inNamespace runs fn on a thread switched into ns. Sockets and processes
// fn creates stay in ns after the thread switches back.
func inNamespace(ns netns.NsHandle, fn func() error) error {
	return onLockedThread(func() error {
		if err := netns.Set(ns); err != nil {
			return fmt.Errorf("entering namespace: %w", err)
		}
		return fn()
	})
}

// procStat is what bullylab needs from /proc/PID/stat.
type procStat struct {
	state     byte   // R, S, D, Z, X, T, ...
	ppid      int    // field 4, parent's PID
	pgrp      int    // field 5, process group ID
	cpuTicks  uint64 // fields 14 and 15, utime + stime, clock ticks
	startTime uint64 // field 22, clock ticks after boot
}

// readProcStat parses /proc/PID/stat. The command name (field 2) may hold
// spaces and parentheses, so fields are counted from the last ')'.
func readProcStat(pid int) (procStat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state), so field 22 is fields[19].
	if len(fields) < 20 || len(fields[0]) != 1 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields)+2)
	}
	st, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: start time %q: %w", pid, fields[19], err)
	}
	ps := procStat{state: fields[0][0], startTime: st}
	if ps.ppid, err = strconv.Atoi(fields[1]); err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: parent %q: %w", pid, fields[1], err)
	}
	if ps.pgrp, err = strconv.Atoi(fields[2]); err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: process group %q: %w", pid, fields[2], err)
	}
	for _, i := range []int{11, 12} { // utime, stime
		t, err := strconv.ParseUint(fields[i], 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("/proc/%d/stat: CPU time %q: %w", pid, fields[i], err)
		}
		ps.cpuTicks += t
	}
	return ps, nil
}

// ProcCPU returns the CPU time pid has used (utime and stime of
// /proc/PID/stat) and its parent's PID.
func ProcCPU(pid int) (cpu time.Duration, ppid int, err error) {
	st, err := readProcStat(pid)
	const clockTicks = 100 // USER_HZ, the unit of /proc/PID/stat on Linux
	return time.Duration(st.cpuTicks) * time.Second / clockTicks, st.ppid, err
}

// ProcStartTime returns field 22 of /proc/PID/stat, the process's start time
// in clock ticks after boot: with the PID it names one process for good,
// because a recycled PID gets a later start time.
func ProcStartTime(pid int) (uint64, error) {
	st, err := readProcStat(pid)
	return st.startTime, err
}

// ProcRef names one process across PID reuse.
type ProcRef struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
}

// Alive reports whether the process still runs: same PID and start time,
// and not a zombie (a zombie's parent just has not reaped it yet).
func (r ProcRef) Alive() bool {
	if r.PID <= 0 {
		return false
	}
	st, err := readProcStat(r.PID)
	return err == nil && st.startTime == r.StartTime && st.state != 'Z' && st.state != 'X'
}

// self returns a reference to this process.
func self() ProcRef {
	st, _ := ProcStartTime(os.Getpid())
	return ProcRef{PID: os.Getpid(), StartTime: st}
}

// nsID identifies a namespace by its nsfs device and inode, the same whether
// reached through a /run/netns mount or /proc/PID/ns/net.
type nsID struct{ dev, ino uint64 }

func statNS(path string) (nsID, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return nsID{}, err
	}
	return nsID{dev: st.Dev, ino: st.Ino}, nil
}

// processesIn returns the PIDs (other than this process) whose network
// namespace is one of ids. A node process that forked, or a process started
// by hand with `bullylab exec`, is found here even though nobody recorded
// it; membership, not a PID, identifies it, so a recycled PID is never hit.
func processesIn(ids map[nsID]bool) []int {
	if len(ids) == 0 {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	me := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == me {
			continue
		}
		id, err := statNS("/proc/" + e.Name() + "/ns/net")
		if err == nil && ids[id] {
			pids = append(pids, pid)
		}
	}
	return pids
}

// nsHolders returns the processes holding an open file descriptor to one of
// the namespaces in ids, as tools do that configure a namespace through a
// handle while no process runs inside it.
func nsHolders(ids map[nsID]bool) []int {
	if len(ids) == 0 {
		return nil
	}
	inos := make(map[string]bool, len(ids))
	for id := range ids {
		inos["net:["+strconv.FormatUint(id.ino, 10)+"]"] = true
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, pe := range procs {
		pid, err := strconv.Atoi(pe.Name())
		if err != nil {
			continue
		}
		dir := "/proc/" + pe.Name() + "/fd"
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if target, err := os.Readlink(dir + "/" + fd.Name()); err == nil && inos[target] {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// runNamespaceIDs returns the identities of run's mounted namespaces,
// hidden ones (hiddenNamespaces) included: mountinfo names their
// namespaces where no path reaches them.
func runNamespaceIDs(run string) (map[nsID]bool, error) {
	names, err := listNamespaces(run)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", NetnsDir, err)
	}
	ids := make(map[nsID]bool, len(names))
	for _, name := range names {
		if id, err := statNS(filepath.Join(NetnsDir, name)); err == nil {
			ids[id] = true
		}
	}
	hidden, err := hiddenRunNamespaces(run)
	if err != nil {
		return nil, err
	}
	for _, h := range hidden {
		if id, ok := h.netNS(); ok {
			ids[id] = true
		}
	}
	return ids, nil
}

// NamespaceSocket returns a socket(2) that creates its sockets in the named
// network namespace, for a process that hosts nodes of many namespaces
// (node.TCPConfig.Socket): a socket stays in the namespace it was created
// in, wherever it is then used. Each call switches its thread into the
// namespace and back, two setns(2) calls; release closes the handles.
func NamespaceSocket(name string) (socket func(domain, typ, proto int) (int, error), release func(), err error) {
	target, err := netns.GetFromName(name)
	if err != nil {
		return nil, nil, fmt.Errorf("namespace %s: %w", name, classify(err))
	}
	home, err := homeNamespace()
	if err != nil {
		target.Close()
		return nil, nil, fmt.Errorf("this process's network namespace: %w", err)
	}
	socket = func(domain, typ, proto int) (int, error) {
		runtime.LockOSThread()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			return -1, fmt.Errorf("entering namespace %s: %w", name, err)
		}
		fd, serr := unix.Socket(domain, typ, proto)
		if err := netns.Set(home); err != nil {
			// Left locked: the runtime discards the thread with its
			// goroutine instead of running others in the wrong namespace.
			if serr == nil {
				unix.Close(fd)
			}
			return -1, fmt.Errorf("leaving namespace %s: %w", name, err)
		}
		runtime.UnlockOSThread()
		return fd, serr
	}
	return socket, func() { target.Close() }, nil
}

// homeNamespace is this process's network namespace, opened once: a host
// of 1000 nodes held a descriptor of it per node.
var homeNamespace = sync.OnceValues(func() (home netns.NsHandle, err error) {
	err = onLockedThread(func() (err error) { home, err = netns.Get(); return err })
	return home, err
})
