//go:build linux

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func init() { testChildren["stuck-bench"] = stuckBench }

// stuckBench is a bench whose teardown never ends, as one on a machine
// an election has overloaded: it hears signals as bench does, and once
// told to abort waits for its stdin to close, which its test never does.
func stuckBench() {
	ctx, in := notifyInterrupt(os.Stderr)
	fmt.Fprintln(os.Stderr, "listening")
	<-ctx.Done()
	<-in.abort
	io.Copy(io.Discard, os.Stdin)
}

// TestBenchThirdSignalExits: a bench stuck in its teardown stops at the
// third SIGINT, by the signal's default action, having said after the
// second that a third would end it.
func TestBenchThirdSignalExits(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), testChildEnv+"=stuck-bench")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := scanLines(stderr)
	deadline := time.After(time.Minute)
	waitLine := func(want string) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the stuck bench exited before saying %q", want)
				}
				if strings.Contains(l, want) {
					return
				}
			case <-deadline:
				cmd.Process.Kill()
				t.Fatalf("the stuck bench did not say %q within a minute", want)
			}
		}
	}
	signal := func() {
		t.Helper()
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
	}
	// Each signal goes once the one before was heard.
	waitLine("listening")
	signal()
	waitLine("bench: SIGINT: stopping the run in progress")
	signal()
	waitLine("bench: SIGINT again: aborting once the testbed is torn down (a third time to exit at once")
	signal()
	for open := true; open; {
		select {
		case _, open = <-lines:
		case <-deadline:
			cmd.Process.Kill()
			t.Fatal("the stuck bench still ran a minute after its third SIGINT")
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("exit: %v, want death by SIGINT", err)
	}
	if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Fatalf("exit: %v, want death by SIGINT", err)
	}
}
