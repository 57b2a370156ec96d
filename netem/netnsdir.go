//go:build linux

package netem

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// NetnsDir is a shared mount point, as ip-netns(8) makes it, before any
// namespace is mounted in it. On a freshly booted machine it is a plain
// directory until someone runs `ip netns add`, which then bind-mounts it on
// itself: namespace mounts made on the plain directory before that stay
// underneath, where no path reaches them (umount says "not mounted", unlink
// EBUSY), and each keeps its namespace, veths and all, alive until reboot.
// Mounting ours on the bind mount from the start means no later tool can
// hide them. Runs that an earlier bind hid (made by older versions, or by
// other tools' namespaces) are found in mountinfo and removed by
// removeHiddenNamespaces.

// netnsLockName is the lock file in StateRoot that serialises creating and
// deleting namespace mounts (shared) against moving NetnsDir aside
// (exclusive), among bullylab processes.
const netnsLockName = ".netns.lock"

// ensureSharedNetnsDir makes NetnsDir a shared mount point, as `ip netns
// add` does: make it shared, and only when it is no mount point yet, bind
// it on itself (recursively, so namespaces other tools mounted on the plain
// directory stay reachable) and make that shared.
func ensureSharedNetnsDir() error {
	if err := os.MkdirAll(NetnsDir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", NetnsDir, classify(err))
	}
	err := makeShared()
	if !errors.Is(err, unix.EINVAL) {
		return err
	}
	unlock, err := lockNetnsDir(true)
	if err != nil {
		return err
	}
	defer unlock()
	// Another bullylab may have bound it while this one waited, or died
	// with it moved aside.
	if err := makeShared(); !errors.Is(err, unix.EINVAL) {
		return err
	}
	if err := restoreAside(); err != nil {
		return err
	}
	if err := makeShared(); !errors.Is(err, unix.EINVAL) {
		return err
	}
	if err := unix.Mount(NetnsDir, NetnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind-mounting %s on itself: %w", NetnsDir, classify(err))
	}
	return makeShared()
}

func makeShared() error {
	err := unix.Mount("", NetnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("making %s a shared mount: %w", NetnsDir, classify(err))
	}
	return err
}

// lockNetnsDir takes the namespace lock, exclusive or shared, and returns
// its release. flock(2) locks belong to an open file, so each holder opens
// its own: goroutines sharing one would release each other's lock.
func lockNetnsDir(exclusive bool) (unlock func(), err error) {
	if err := os.MkdirAll(StateRoot, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", StateRoot, classify(err))
	}
	path := filepath.Join(StateRoot, netnsLockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, classify(err))
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	if err := flockRetry(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil // closing releases the lock
}

func flockRetry(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// namespaceMount is a namespace mount in NetnsDir as mountinfo shows it.
type namespaceMount struct {
	name string
	mountInfo
}

// hiddenNamespaces returns the namespace mounts in NetnsDir that no path
// reaches: those sitting on another mount than the one NetnsDir resolves
// to (a later mount on NetnsDir covers them). Mounts stacked on one name
// are not hidden: unmounting the name again reaches each in turn.
func hiddenNamespaces(mounts []mountInfo) []namespaceMount {
	top, ok := topMountAt(mounts, NetnsDir)
	if !ok {
		return nil
	}
	byID := make(map[int]mountInfo, len(mounts))
	for _, m := range mounts {
		byID[m.id] = m
	}
	var hidden []namespaceMount
	for _, m := range mounts {
		name, ok := strings.CutPrefix(m.point, NetnsDir+"/")
		if !ok || name == "" || strings.Contains(name, "/") {
			continue
		}
		base := m.parent
		for seen := 0; seen < len(mounts); seen++ {
			p, ok := byID[base]
			if !ok || p.point != m.point || p.id == p.parent {
				break
			}
			base = p.parent
		}
		if base != top.id {
			hidden = append(hidden, namespaceMount{name: name, mountInfo: m})
		}
	}
	return hidden
}

// topMountAt returns the mount a path resolves to among those mounted
// exactly on point: the one no other mount on point sits on.
func topMountAt(mounts []mountInfo, point string) (mountInfo, bool) {
	var at []mountInfo
	for _, m := range mounts {
		if m.point == point {
			at = append(at, m)
		}
	}
	for _, m := range at {
		covered := false
		for _, o := range at {
			if o.parent == m.id && o.id != m.id {
				covered = true
				break
			}
		}
		if !covered {
			return m, true
		}
	}
	return mountInfo{}, false
}

// hiddenRunNamespaces returns run's hidden namespace mounts, or every
// run's when run is "".
func hiddenRunNamespaces(run string) ([]namespaceMount, error) {
	mounts, err := readMountInfo()
	if err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	var out []namespaceMount
	for _, h := range hiddenNamespaces(mounts) {
		if r, ok := RunOfNamespace(h.name); run == "" || (ok && r == run) {
			out = append(out, h)
		}
	}
	return out, nil
}

// removeHiddenNamespaces unmounts and removes hidden namespace mounts. It
// moves the mount covering them aside (under the exclusive lock, so no
// bullylab creates or deletes a namespace meanwhile), unmounts them and
// their files through the plain directory, and moves the cover back: other
// processes' namespaces stay mounted throughout and are out of NetnsDir
// for microseconds. Where the cover cannot be moved (its parent is a shared
// mount, as under systemd), the error says what to do instead.
func removeHiddenNamespaces(hidden []namespaceMount) (removed []string, err error) {
	if len(hidden) == 0 {
		return nil, nil
	}
	unlock, err := lockNetnsDir(true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	aside := filepath.Join(StateRoot, fmt.Sprintf("%s%d", asidePrefix, os.Getpid()))
	if err := os.Mkdir(aside, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("creating %s: %w", aside, err)
	}
	defer os.Remove(aside)
	if err := unix.Mount(NetnsDir, aside, "", unix.MS_MOVE, ""); err != nil {
		return nil, hiddenError(hidden, err)
	}
	removed, err = unmountRevealed(hidden)
	if merr := unix.Mount(aside, NetnsDir, "", unix.MS_MOVE, ""); merr != nil {
		return removed, errors.Join(err, fmt.Errorf("moving %s back from %s: %w; `mount --move %s %s` puts it back", NetnsDir, aside, merr, aside, NetnsDir))
	}
	return removed, err
}

// asidePrefix starts the directory in StateRoot that holds NetnsDir's
// mount while removeHiddenNamespaces works; the PID of the process
// follows.
const asidePrefix = ".netns-aside-"

// RestoreNetnsDir puts back a mount of NetnsDir that a process moved aside
// and died before putting back (see removeHiddenNamespaces), so that its
// namespaces are reachable again; Clean calls it.
func RestoreNetnsDir() error {
	unlock, err := lockNetnsDir(true)
	if err != nil {
		return err
	}
	defer unlock()
	return restoreAside()
}

// restoreAside is RestoreNetnsDir under the exclusive lock: the process
// that moved a mount aside held it until it put the mount back, so any
// mount still aside now is a dead process's.
func restoreAside() error {
	mounts, err := readMountInfo()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if !strings.HasPrefix(m.point, filepath.Join(StateRoot, asidePrefix)) {
			continue
		}
		if _, busy := topMountAt(mounts, NetnsDir); busy {
			return fmt.Errorf("%s holds the earlier mount of %s, moved aside by a process that died, and %s is mounted again: when no namespace in %s is in use, `umount %s && mount --move %s %s`",
				m.point, NetnsDir, NetnsDir, NetnsDir, NetnsDir, m.point, NetnsDir)
		}
		if err := unix.Mount(m.point, NetnsDir, "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("moving %s back to %s: %w", m.point, NetnsDir, err)
		}
		_ = os.Remove(m.point)
		return nil
	}
	return nil
}

// unmountRevealed unmounts and removes the hidden mounts once the cover is
// aside, checking first that NetnsDir now resolves to the mount they sit
// on (a second cover would make the unmount hit something else).
func unmountRevealed(hidden []namespaceMount) ([]string, error) {
	mounts, err := readMountInfo()
	if err != nil {
		return nil, err
	}
	if top, ok := topMountAt(mounts, NetnsDir); ok {
		for _, h := range hidden {
			if h.parent != top.id {
				return nil, hiddenError(hidden, fmt.Errorf("a second mount (%d) covers them", top.id))
			}
		}
	}
	var removed []string
	var errs []error
	for _, h := range hidden {
		if err := deleteNamed(h.name); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, h.name)
	}
	return removed, errors.Join(errs...)
}

// hiddenError says in one line which namespaces are hidden and what frees
// them.
func hiddenError(hidden []namespaceMount, cause error) error {
	names := make([]string, 0, len(hidden))
	for _, h := range hidden {
		names = append(names, h.name)
	}
	const most = 3
	list := strings.Join(names, ", ")
	if len(names) > most {
		list = fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
	}
	return fmt.Errorf("namespaces %s are hidden under a later mount on %s and it cannot be moved aside (%v): when no other namespace is in use there, `umount %s` and run `bullylab clean` again", list, NetnsDir, cause, NetnsDir)
}
