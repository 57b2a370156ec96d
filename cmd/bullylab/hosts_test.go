package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hosts refuses a topology without hosts, and reports a host it cannot
// reach in its table, under the columns the README names, and its error,
// naming the host, with exit status 1.
func TestHostsCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"bullylab", "hosts", "star5"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "star5 has no hosts section") {
		t.Errorf("hosts star5: exit %d, %q", code, stderr.String())
	}
	dir := t.TempDir()
	topo := filepath.Join(dir, "racks.yaml")
	missing := filepath.Join(dir, "no-such-key")
	if err := os.WriteFile(topo, []byte("nodes: 2\nhosts:\n  - {name: rack-a, ssh: '127.0.0.1:1', key: "+missing+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	code := run([]string{"bullylab", "hosts", topo}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "host rack-a: key: open "+missing) || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
		t.Errorf("unreachable host: exit %d, stderr %q", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "rack-a") || !strings.Contains(stdout.String(), "unreached") {
		t.Errorf("table:\n%s", stdout.String())
	}
	header, _, _ := strings.Cut(stdout.String(), "rack-a")
	for _, column := range []string{"ssh", "kernel", "bullylab", "clock offset", "namespaces"} {
		if !strings.Contains(header, column) {
			t.Errorf("the table has no %s column:\n%s", column, stdout.String())
		}
	}
}
