//go:build linux

package netem

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// classify names a missing privilege or kernel feature, and leaves every
// other failure one: EINVAL means a kernel without network namespaces only
// where there is no /proc/self/ns/net.
func TestClassify(t *testing.T) {
	present := filepath.Join(t.TempDir(), "net")
	if err := os.WriteFile(present, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	absent := filepath.Join(t.TempDir(), "none")
	saved := procSelfNetNS
	t.Cleanup(func() { procSelfNetNS = saved })
	for _, tc := range []struct {
		errno  unix.Errno
		nsFile string
		want   error // nil: neither ErrNotPermitted nor ErrNotSupported
	}{
		{unix.EPERM, present, ErrNotPermitted},
		{unix.EACCES, present, ErrNotPermitted},
		{unix.EINVAL, absent, ErrNotSupported},
		{unix.ENOSYS, absent, ErrNotSupported},
		{unix.EINVAL, present, nil}, // a failed mount or setns
		{unix.EMFILE, present, nil},
		{unix.EMFILE, absent, nil},
	} {
		procSelfNetNS = tc.nsFile
		err := classify(fmt.Errorf("creating: %w", tc.errno))
		if !errors.Is(err, tc.errno) {
			t.Errorf("classify(%v) = %v, which does not wrap it", tc.errno, err)
		}
		for _, e := range []error{ErrNotPermitted, ErrNotSupported} {
			if got := errors.Is(err, e); got != (e == tc.want) {
				t.Errorf("classify(%v) with %s: errors.Is(%v, %v) = %v", tc.errno, filepath.Base(tc.nsFile), err, e, got)
			}
		}
	}
}
