//go:build linux

package netem

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// MountTmpfs mounts a tmpfs on dir unless dir already is on one, and
// reports whether it did. Nodes fsync their state before every message that
// depends on it; on a disk, 100 nodes electing queued their fsyncs behind
// each other until HALT_ACKs missed the 200 ms election timeout, and the
// elections never ended. The lab kills processes, not machines, so memory
// keeps what a node persisted across its crash just as a disk would.
func MountTmpfs(dir string) (bool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err == nil && st.Type == unix.TMPFS_MAGIC {
		return false, nil
	}
	if err := unix.Mount("bullylab", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0700"); err != nil {
		return false, fmt.Errorf("mounting a tmpfs on %s: %w", dir, classify(err))
	}
	return true, nil
}

// Unmount detaches the mount on dir, if any.
func Unmount(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmounting %s: %w", dir, err)
	}
	return nil
}
