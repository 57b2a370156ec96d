//go:build linux

package netem

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/bullylab/bullylab/netem/netemtest/outcome"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// A probe that cannot run returns an error, which fails the tests that
// need its answer; only a missing privilege or kernel feature makes them
// skip. The failures are injected where the probe creates its scratch
// namespace, so this test needs no root.
func TestProbeFailureIsAnError(t *testing.T) {
	// Forget what an earlier test's probe found, and restore it after.
	probed.Lock()
	savedDone, savedCaps := probed.done, probed.caps
	probed.done = false
	probed.Unlock()
	savedNS, savedProc := probeScratchNS, procSelfNetNS
	t.Cleanup(func() {
		probeScratchNS, procSelfNetNS = savedNS, savedProc
		probed.Lock()
		probed.done, probed.caps = savedDone, savedCaps
		probed.Unlock()
	})
	present := filepath.Join(t.TempDir(), "net")
	if err := os.WriteFile(present, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	absent := filepath.Join(t.TempDir(), "none")

	for _, tc := range []struct {
		name    string
		errno   unix.Errno
		nsFile  string // procSelfNetNS: whether the kernel has network namespaces
		skipFor error  // what the error must wrap for tests to skip; nil: they fail
	}{
		{"out of file descriptors", unix.EMFILE, present, nil},
		{"EINVAL on a kernel with network namespaces", unix.EINVAL, present, nil},
		{"EINVAL on a kernel without network namespaces", unix.EINVAL, absent, ErrNotSupported},
		{"not permitted", unix.EPERM, present, ErrNotPermitted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			procSelfNetNS = tc.nsFile
			calls := 0
			probeScratchNS = func() (netns.NsHandle, error) {
				calls++
				return netns.None(), fmt.Errorf("injected: %w", tc.errno)
			}
			caps, err := Probe()
			if err == nil {
				t.Fatalf("Probe = %+v, nil; want an error", caps)
			}
			t.Logf("Probe: %v", err)
			if caps != (Capabilities{}) {
				t.Errorf("Probe returned %+v with its error", caps)
			}
			if !errors.Is(err, tc.errno) {
				t.Errorf("Probe's error %v does not wrap %v", err, tc.errno)
			}
			for _, e := range []error{ErrNotSupported, ErrNotPermitted} {
				if got := errors.Is(err, e); got != (e == tc.skipFor) {
					t.Errorf("errors.Is(%v, %v) = %v", err, e, got)
				}
			}
			o := outcome.Of(t, func(tb testing.TB) { probedCaps(tb) })
			switch {
			case tc.skipFor == nil && (!o.Failed || o.Skipped):
				t.Errorf("probedCaps did not fail the test (skipped %v): %s", o.Skipped, o.Msg)
			case tc.skipFor != nil && (!o.Skipped || o.Failed):
				t.Errorf("probedCaps did not skip the test (failed %v): %s", o.Failed, o.Msg)
			}
			// An error is not kept: every call probes again.
			if calls != 2 {
				t.Errorf("2 calls of Probe probed %d times", calls)
			}
		})
	}
}
