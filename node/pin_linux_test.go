package node

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
)

const pinHelperEnv = "BULLYLAB_PIN_HELPER"

// TestPinHelperProcess is the process TestListenerClosesFirst kills: a
// transport listening on loopback, its listener pinned or not as the
// environment says, with connections of its own to the address the
// environment gives (as a leader's to its followers), that prints its
// address once they are up and waits.
func TestPinHelperProcess(t *testing.T) {
	mode, to, ok := strings.Cut(os.Getenv(pinHelperEnv), ",")
	if !ok {
		t.Skip("the helper process of TestListenerClosesFirst")
	}
	tr, err := ListenTCP("127.0.0.1:0", uuid.New(), TCPConfig{ListenerClosesFirst: mode == "pinned"})
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	for range pinHelperConns {
		if _, err := net.DialTimeout("tcp", to, 5*time.Second); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	}
	fmt.Println(tr.LocalAddr())
	time.Sleep(time.Minute)
	os.Exit(1)
}

const pinHelperConns = 300

// listenerOpenAtDeath starts a helper process listening (pinned or not)
// with pinHelperConns connections to this one, kills it, and reports
// whether a connect made as soon as the first of those connections ended
// still reached its listener.
func listenerOpenAtDeath(t *testing.T, mode string) bool {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ended := make(chan struct{}, pinHelperConns)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.Read(make([]byte, 1))
				ended <- struct{}{}
			}()
		}
	}()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPinHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), pinHelperEnv+"="+mode+","+ln.Addr().String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	addr := strings.TrimSpace(line)
	if err != nil || strings.Count(addr, ":") != 1 {
		t.Fatalf("helper said %q (%v)", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("no connection ended within 10 s of SIGKILL")
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	switch {
	case err == nil:
		c.Close()
		return true
	case errors.Is(err, syscall.ECONNRESET):
		return true // the listener took the SYN, and closed as it answered
	case !errors.Is(err, syscall.ECONNREFUSED):
		t.Fatalf("connect after the first end: %v", err)
	}
	return false
}

// When a process whose listener is pinned (TCPConfig.ListenerClosesFirst)
// dies, its listener is gone by the time the first of its connections
// ends: a probe then is refused, not accepted and reset later.
func TestListenerClosesFirst(t *testing.T) {
	// Whether the plain listener outlives the first end is a race, of the
	// test's connect with the kernel closing 300 sockets: it needs only
	// to be seen once.
	if !listenerOpenAtDeath(t, "plain") && !listenerOpenAtDeath(t, "plain") && !listenerOpenAtDeath(t, "plain") {
		t.Skip("this kernel closed a dying process's listener before its connections without the pin, three times out of three: there is no order to change")
	}
	for i := range 3 {
		if listenerOpenAtDeath(t, "pinned") {
			t.Fatalf("round %d: the pinned listener still accepted after the first of %d connections ended", i, pinHelperConns)
		}
	}
}

// A transport's Close closes the pinned duplicate too: the port is free.
func TestPinnedListenerClosed(t *testing.T) {
	tr, err := ListenTCP("127.0.0.1:0", uuid.New(), TCPConfig{ListenerClosesFirst: true})
	if err != nil {
		t.Fatal(err)
	}
	addr := tr.LocalAddr()
	if tr.unpin == nil {
		t.Fatal("no pinned duplicate of the listener")
	}
	tr.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s after Close: %v", addr, err)
	}
	ln.Close()
}
