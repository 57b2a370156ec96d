package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

func TestKeygenMember(t *testing.T) {
	out := filepath.Join(t.TempDir(), "node.key")
	stdout, stderr, code := runBin(t, "keygen", "--member", "--out", out)
	if code != 0 || stderr != "" {
		t.Fatalf("keygen --member: exit %d, stderr %q", code, stderr)
	}
	pub, err := wire.ParsePublicKey(strings.TrimSuffix(stdout, "\n"))
	if err != nil || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("keygen --member printed %q: %v", stdout, err)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("member key file: %v, %v; want mode 0600", fi, err)
	}
	priv, err := wire.ReadMemberKeyFile(out)
	if err != nil || !pub.Equal(priv.Public()) {
		t.Fatalf("keygen --member wrote a key whose public half is not the printed one: %v", err)
	}
	before, _ := os.ReadFile(out)
	wantError(t, "member key "+out+": file exists", "keygen", "--member", "--out", out)
	if after, _ := os.ReadFile(out); string(after) != string(before) {
		t.Error("keygen --member overwrote an existing key")
	}
	wantUsage(t, "keygen --member: give --out FILE for the private key", "keygen", "--member")
}

func TestNodeMemberKeyFlags(t *testing.T) {
	dir := t.TempDir()
	// Held by the test, so that the peers file can list the node before it
	// starts; the refused starts end before they would listen, and the
	// last one inherits the socket.
	ln, addr := listenerFile(t)
	id := uuid.New()
	memberKey := filepath.Join(t.TempDir(), "node.key")
	stdout, _, code := runBin(t, "keygen", "--member", "--out", memberKey)
	if code != 0 {
		t.Fatal("keygen --member failed")
	}
	pub := strings.TrimSpace(stdout)
	peers := writeFile(t, "peers", id.String()+" "+addr+" "+pub+"\n")
	base := []string{"node", "--id", id.String(), "--listen", addr, "--data-dir", dir, "--peers", peers, "--cluster-key", keyFile}

	wantUsage(t, "--peers "+peers+" lists member keys, so peers refuse unsigned HELLOs: give this node its own with --member-key FILE", base...)
	wantError(t, "--member-key: member key /nonexistent/key: no such file or directory", append(base, "--member-key", "/nonexistent/key")...)
	wantError(t, "--member-key: member key "+keyFile+": not a member key: it is a cluster key", append(base, "--member-key", keyFile)...)
	bad := writeFile(t, "peers-bad", id.String()+" "+addr+" ed25519:AAAA\n")
	wantError(t, bad+`:1: bad member key "ed25519:AAAA"`, "node", "--listen", addr, "--data-dir", dir, "--peers", bad, "--cluster-key", keyFile, "--member-key", memberKey)
	wantUsage(t, "--member-key and --insecure exclude each other", "node", "--listen", addr, "--data-dir", dir, "--insecure", "--member-key", memberKey)
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Errorf("data dir holds %v after refused starts", names)
	}

	// The node's own entry is checked once its ID is known, from the data
	// dir, as its address is.
	other := filepath.Join(t.TempDir(), "other.key")
	runBin(t, "keygen", "--member", "--out", other)
	// It comes after the node listens: on the socket the test holds.
	refused := exec.Command(binary, "node", "--id", id.String(), "--listen-fd", "3", "--data-dir", dir, "--peers", peers, "--cluster-key", keyFile, "--member-key", other)
	refused.ExtraFiles = []*os.File{ln}
	var stderr strings.Builder
	refused.Stderr = &stderr
	want := peers + ":1: this node's ID " + id.String() + " is listed with member key " + pub
	if err := refused.Run(); refused.ProcessState == nil || refused.ProcessState.ExitCode() != 1 || !strings.Contains(stderr.String(), want) {
		t.Errorf("node with another member key: %v, stderr %q, want exit 1 and %q", err, stderr.String(), want)
	}

	// With its key, the node starts.
	cmd, exited, _ := startNodeFiles(t, dir, []*os.File{ln}, "--id", id.String(), "--listen-fd", "3", "--peers", peers, "--member-key", memberKey)
	stopNode(t, cmd, exited)
}
