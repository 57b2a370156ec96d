package netemtest

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/bullylab/bullylab/netem"
)

// outcomeTB stands in for a test given to a helper, recording whether the
// helper skipped or failed it.
type outcomeTB struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (o *outcomeTB) Helper()                   {}
func (o *outcomeTB) Skip(args ...any)          { o.end(&o.skipped, fmt.Sprint(args...)) }
func (o *outcomeTB) Skipf(f string, a ...any)  { o.end(&o.skipped, fmt.Sprintf(f, a...)) }
func (o *outcomeTB) SkipNow()                  { o.end(&o.skipped, "") }
func (o *outcomeTB) Fatal(args ...any)         { o.end(&o.failed, fmt.Sprint(args...)) }
func (o *outcomeTB) Fatalf(f string, a ...any) { o.end(&o.failed, fmt.Sprintf(f, a...)) }
func (o *outcomeTB) FailNow()                  { o.end(&o.failed, "") }
func (o *outcomeTB) Error(args ...any)         { o.failed, o.msg = true, fmt.Sprint(args...) }
func (o *outcomeTB) Errorf(f string, a ...any) { o.failed, o.msg = true, fmt.Sprintf(f, a...) }
func (o *outcomeTB) Fail()                     { o.failed = true }

// end ends the helper's goroutine, as Skip and Fatal do.
func (o *outcomeTB) end(flag *bool, msg string) {
	*flag, o.msg = true, msg
	runtime.Goexit()
}

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
		o := &outcomeTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			skipOrFail(o, "the thing", tc.err)
		}()
		<-done
		if o.skipped != tc.skip || o.failed != tc.failed {
			t.Errorf("skipOrFail(%v): skipped %v, failed %v; want %v, %v", tc.err, o.skipped, o.failed, tc.skip, tc.failed)
		}
		if tc.err != nil && o.msg == "" {
			t.Errorf("skipOrFail(%v) said nothing", tc.err)
		}
		t.Logf("%v: %s", tc.err, o.msg)
	}
}
