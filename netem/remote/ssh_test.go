//go:build linux

package remote_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/bullylab/bullylab/netem/remote"
	"github.com/bullylab/bullylab/netem/remote/remotetest"
	"github.com/bullylab/bullylab/topologies"
)

// dialT connects to h from hs's hub and closes the connection when the
// test ends.
func dialT(t *testing.T, hs *remotetest.Hosts, h topologies.Host) *remote.Client {
	t.Helper()
	c, err := hs.Dial(t.Context(), h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Commands run over the connection; a failing one says why in its error.
func TestRun(t *testing.T) {
	hs := remotetest.StartHosts(t, 1)
	c := dialT(t, hs, hs.Hosts[0])
	out, err := c.Output(t.Context(), "echo hello; echo ignored >&2")
	if err != nil || string(out) != "hello\n" {
		t.Errorf("echo: %q, %v", out, err)
	}
	err = c.Run(t.Context(), "echo first >&2; echo 'no such thing' >&2; exit 3", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "status 3") || !strings.HasSuffix(err.Error(), ": no such thing") {
		t.Errorf("failing command: %v, want its exit status and last line of stderr", err)
	}
	// A command still running when its context ends is killed.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = c.Run(ctx, "sleep 30", nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Errorf("cancelled command: %v after %v", err, time.Since(start))
	}
	// The connection still works.
	if out, err := c.Output(t.Context(), "echo again"); err != nil || string(out) != "again\n" {
		t.Errorf("after a cancelled command: %q, %v", out, err)
	}
}

// A file is copied only when the host's copy differs, whole or not at all.
func TestEnsureFile(t *testing.T) {
	hs := remotetest.StartHosts(t, 1)
	c := dialT(t, hs, hs.Hosts[0])
	local := filepath.Join(t.TempDir(), "bullylab")
	writeFile(t, local, []byte("#!/bin/sh\necho one\n"))
	// The stand-in host shares this machine's file system.
	dst := filepath.Join(t.TempDir(), "bin", "bullylab")
	for i, want := range []bool{true, false} {
		copied, err := c.EnsureFile(t.Context(), local, dst)
		if err != nil || copied != want {
			t.Fatalf("EnsureFile #%d: copied %v, %v; want %v", i+1, copied, err, want)
		}
	}
	if out, err := c.Output(t.Context(), dst); err != nil || string(out) != "one\n" {
		t.Errorf("running the copy: %q, %v", out, err)
	}
	writeFile(t, local, []byte("#!/bin/sh\necho two\n"))
	if copied, err := c.EnsureFile(t.Context(), local, dst); err != nil || !copied {
		t.Fatalf("EnsureFile after a change: copied %v, %v", copied, err)
	}
	if out, err := c.Output(t.Context(), dst); err != nil || string(out) != "two\n" {
		t.Errorf("running the new copy: %q, %v", out, err)
	}
	if left, _ := filepath.Glob(dst + ".tmp-*"); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// A host whose key known_hosts lacks, or has another key for, is refused
// with the key's fingerprint; it is never added silently.
func TestHostKeyChecked(t *testing.T) {
	hs := remotetest.StartHosts(t, 1)
	dir := t.TempDir()
	unknown := hs.Hosts[0]
	unknown.KnownHosts = filepath.Join(dir, "empty_known_hosts")
	writeFile(t, unknown.KnownHosts, nil)
	_, err := hs.Dial(t.Context(), unknown)
	fp := ssh.FingerprintSHA256(hs.HostKeys[0])
	if err == nil || !strings.Contains(err.Error(), "is not in "+unknown.KnownHosts) || !strings.Contains(err.Error(), fp) {
		t.Errorf("unknown host key: %v, want a refusal naming %s and the file", err, fp)
	}
	if data, _ := os.ReadFile(unknown.KnownHosts); len(data) != 0 {
		t.Errorf("known_hosts was written: %q", data)
	}

	changed := hs.Hosts[0]
	changed.KnownHosts = filepath.Join(dir, "other_known_hosts")
	other := remotetest.WriteKey(t, filepath.Join(dir, "other_key"))
	writeFile(t, changed.KnownHosts, []byte(knownhosts.Line([]string{knownhosts.Normalize(changed.SSH)}, other)+"\n"))
	_, err = hs.Dial(t.Context(), changed)
	if err == nil || !strings.Contains(err.Error(), "host key changed") || !strings.Contains(err.Error(), changed.KnownHosts+":1") {
		t.Errorf("changed host key: %v, want a refusal naming the file's line", err)
	}

	missing := hs.Hosts[0]
	missing.KnownHosts = filepath.Join(dir, "no_such_file")
	if _, err := hs.Dial(t.Context(), missing); err == nil || !strings.Contains(err.Error(), "ssh-keyscan") {
		t.Errorf("missing known_hosts: %v, want a hint to add the key", err)
	}
}
