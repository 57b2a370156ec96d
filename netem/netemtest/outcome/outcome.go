// Package outcome runs a test helper against a stand-in test, to see
// whether the helper skipped the test, failed it, or let it go on: the tests
// of skip-or-fail helpers need it, and it imports nothing of bullylab, so
// netem's own tests can use it too.
package outcome

import (
	"fmt"
	"runtime"
	"testing"
)

// Outcome is what a helper did to the test it was given.
type Outcome struct {
	Skipped, Failed bool
	// Msg is what the helper said when it skipped or failed the test.
	Msg string
}

// Of runs helper on a goroutine of its own, which Skip and Fatal end as
// they end a test's, and returns what it did. Everything else goes to t.
func Of(t testing.TB, helper func(testing.TB)) Outcome {
	tb := &standIn{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		helper(tb)
	}()
	<-done
	return tb.o
}

// standIn is the test given to the helper.
type standIn struct {
	testing.TB
	o Outcome
}

func (s *standIn) Helper()                   {}
func (s *standIn) Skip(args ...any)          { s.end(&s.o.Skipped, fmt.Sprint(args...)) }
func (s *standIn) Skipf(f string, a ...any)  { s.end(&s.o.Skipped, fmt.Sprintf(f, a...)) }
func (s *standIn) SkipNow()                  { s.end(&s.o.Skipped, "") }
func (s *standIn) Fatal(args ...any)         { s.end(&s.o.Failed, fmt.Sprint(args...)) }
func (s *standIn) Fatalf(f string, a ...any) { s.end(&s.o.Failed, fmt.Sprintf(f, a...)) }
func (s *standIn) FailNow()                  { s.end(&s.o.Failed, "") }
func (s *standIn) Error(args ...any)         { s.o.Failed, s.o.Msg = true, fmt.Sprint(args...) }
func (s *standIn) Errorf(f string, a ...any) { s.o.Failed, s.o.Msg = true, fmt.Sprintf(f, a...) }
func (s *standIn) Fail()                     { s.o.Failed = true }

// end ends the helper's goroutine, as Skip and Fatal do.
func (s *standIn) end(flag *bool, msg string) {
	*flag, s.o.Msg = true, msg
	runtime.Goexit()
}
