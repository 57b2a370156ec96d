//go:build linux

package netemtest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/netemtest/outcome"
)

// Only a missing privilege or kernel feature skips; any other error, such
// as a probe that could not run, fails the test.
func TestSkipOrFail(t *testing.T) {
	for _, tc := range []struct {
		err          error
		skip, failed bool
	}{
		{nil, false, false},
		{fmt.Errorf("creating network namespace x: %w: operation not permitted", netem.ErrNotPermitted), true, false},
		{fmt.Errorf("impairer: no sch_netem: %w", netem.ErrNotSupported), true, false},
		{errors.New("probing the kernel for fault injection: creating a scratch network namespace: too many open files"), false, true},
	} {
		o := outcome.Of(t, func(tb testing.TB) { skipOrFail(tb, "the thing", tc.err) })
		if o.Skipped != tc.skip || o.Failed != tc.failed {
			t.Errorf("skipOrFail(%v): skipped %v, failed %v; want %v, %v", tc.err, o.Skipped, o.Failed, tc.skip, tc.failed)
		}
		if tc.err != nil && o.Msg == "" {
			t.Errorf("skipOrFail(%v) said nothing", tc.err)
		}
		t.Logf("%v: %s", tc.err, o.Msg)
	}
}
