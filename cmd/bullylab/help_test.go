package main

import (
	"runtime"
	"strings"
	"testing"
)

// TestHelp renders every command's help: each says a default once, in the
// same format, and the impairment backends' default is one of them.
func TestHelp(t *testing.T) {
	for _, cmd := range newApp(nil, nil).Commands {
		t.Run(cmd.Name, func(t *testing.T) {
			if runtime.GOOS != "linux" && strings.HasPrefix(cmd.Usage, "(Linux only") {
				t.Skip("a Linux-only command")
			}
			out, stderr, code := runApp(cmd.Name, "--help")
			if code != 0 || stderr != "" {
				t.Fatalf("%s --help: exit %d, stderr %q", cmd.Name, code, stderr)
			}
			if !strings.HasPrefix(out, "NAME:\n   bullylab "+cmd.Name+" - ") || !strings.Contains(out, "\nUSAGE:\n") {
				t.Errorf("%s --help is not in the commands' format:\n%s", cmd.Name, out)
			}
			for _, line := range strings.Split(out, "\n") {
				if strings.Count(line, "(default") > 1 {
					t.Errorf("%s --help says a default twice: %q", cmd.Name, line)
				}
				if strings.Contains(line, "(default ") {
					t.Errorf("%s --help says a default as (default X), not (default: X): %q", cmd.Name, line)
				}
				if strings.Contains(line, "--backend") && strings.Contains(line, "probe") {
					t.Errorf("%s --help: --backend names a default that is not a backend: %q", cmd.Name, line)
				}
			}
		})
	}
}
