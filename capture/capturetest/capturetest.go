// Package capturetest runs tshark with bullylab's Wireshark dissector for
// tests: it installs the Debian package when tshark is missing, and counts
// the frames tshark finds by type; and it reads the counters a node logs
// when it stops, to compare with a capture.
package capturetest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/bullylab/bullylab/wire"
)

var (
	tsharkOnce sync.Once
	tsharkPath string
	tsharkSkip string
	tsharkErr  error
)

// TsharkOptions make Wireshark reassemble as the Dissector does: by
// default (4.0) it does not hold out-of-order segments for reassembly and
// loses the frames in them.
var TsharkOptions = []string{"-o", "tcp.reassemble_out_of_order:TRUE"}

// RequireTshark returns tshark's path, installing the Debian package if
// it is missing. It skips only when it cannot be installed for want of
// root or of a network; any other failure fails the test.
func RequireTshark(t testing.TB) string {
	t.Helper()
	tsharkOnce.Do(func() {
		if p, err := exec.LookPath("tshark"); err == nil {
			tsharkPath = p
			return
		}
		if os.Geteuid() != 0 {
			tsharkSkip = "tshark is not installed and installing it needs root"
			return
		}
		install := func() ([]byte, error) {
			cmd := exec.Command("apt-get", "install", "-y", "--no-install-recommends", "tshark")
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			return cmd.CombinedOutput()
		}
		out, err := install()
		if err != nil {
			// The package lists may be missing or stale.
			if upd, uerr := exec.Command("apt-get", "update").CombinedOutput(); uerr != nil {
				out = append(out, upd...)
			} else {
				out, err = install()
			}
		}
		if err != nil {
			s := string(out)
			if strings.Contains(s, "Temporary failure resolving") || strings.Contains(s, "Could not resolve") ||
				strings.Contains(s, "Unable to locate package") || strings.Contains(s, "Failed to fetch") {
				tsharkSkip = "tshark is not installed and apt-get cannot reach a package mirror: " + lastLine(s)
				return
			}
			tsharkErr = errors.New("apt-get install tshark: " + err.Error() + ": " + lastLine(s))
			return
		}
		tsharkPath, tsharkErr = exec.LookPath("tshark")
	})
	if tsharkSkip != "" {
		if os.Getenv("CI") != "" {
			// CI runs every check; scripts/test.sh installs tshark first.
			t.Fatal(tsharkSkip)
		}
		t.Skip(tsharkSkip)
	}
	if tsharkErr != nil {
		t.Fatal(tsharkErr)
	}
	return tsharkPath
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// Types runs tshark with the Lua dissector at luaScript on the capture at
// path, with extra options, and counts the bullylab frames it finds by
// type; it returns the counts and the packets tshark read. The dissector
// prints each type by name (bullylab.type), as wire.Type.String does, a
// type this version does not define as TYPE(n); anything else, a number
// for instance, fails the test.
func Types(t testing.TB, tshark, luaScript, path string, extra ...string) (map[wire.Type]int64, int64) {
	t.Helper()
	args := append([]string{"-r", path, "-X", "lua_script:" + luaScript, "-T", "fields", "-e", "bullylab.type"}, extra...)
	cmd := exec.Command(tshark, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v: %s", err, stderr.String())
	}
	for line := range strings.SplitSeq(strings.TrimSpace(stderr.String()), "\n") {
		if line != "" && !strings.Contains(line, "could be dangerous") {
			t.Logf("tshark: %s", line)
		}
	}
	c := map[wire.Type]int64{}
	var packets int64
	for line := range strings.SplitSeq(string(out), "\n") {
		if line == "" {
			continue
		}
		packets++
		for v := range strings.SplitSeq(line, ",") {
			if v == "" {
				continue
			}
			ty, ok := ParseTypeName(v)
			if !ok {
				t.Fatalf("tshark printed type %q, not a type name", v)
			}
			c[ty]++
		}
	}
	return c, packets
}

// ParseTypeName reads a type as wire.Type.String prints it: a name, or
// TYPE(n) for a type this version does not define.
func ParseTypeName(s string) (wire.Type, bool) {
	if ty, ok := wire.ParseType(s); ok {
		return ty, true
	}
	digits, ok := strings.CutPrefix(s, "TYPE(")
	if !ok {
		return 0, false
	}
	digits, ok = strings.CutSuffix(digits, ")")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 8)
	if err != nil || wire.Type(n).Valid() || wire.Type(n).String() != s {
		return 0, false
	}
	return wire.Type(n), true
}
