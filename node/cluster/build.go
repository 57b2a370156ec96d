package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// MainPackage is the import path of the bullylab command.
const MainPackage = "github.com/bullylab/bullylab/cmd/bullylab"

// BuildTags are the tags every build of bullylab for a testbed uses, as
// scripts/run.sh does. urfave_cli_no_docs leaves out urfave/cli's man-page
// and Markdown generator, which bullylab does not use and whose Markdown
// parser's initialisation cost each node process 1.7 ms of CPU and 210 KB
// of heap at start: 250 node processes start in a 250-node testbed.
const BuildTags = "urfave_cli_no_docs"

// Build compiles the bullylab command into dir and returns the binary's
// path, so that tests can run real node processes. It needs the go tool
// and must run inside this module.
func Build(ctx context.Context, dir string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		// `go test` runs the test binary with GOROOT set even when the go
		// tool itself is not on PATH.
		goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	bin := filepath.Join(dir, "bullylab")
	cmd := exec.CommandContext(ctx, goTool, "build", "-tags", BuildTags, "-o", bin, MainPackage)
	// Static, as scripts/run.sh builds it: a dynamically linked binary
	// spends some 3 ms more CPU starting (the loader, glibc's start-up,
	// whose CPUID probes trap to the hypervisor on a VM), paid by every
	// one of a testbed's node processes.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %v: %s", MainPackage, err, strings.TrimSpace(string(out)))
	}
	return bin, nil
}

// BuildTemp is Build into a new temporary dir, for a TestMain; cleanup
// removes the dir.
func BuildTemp() (bin string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "bullylab-bin-")
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if bin, err = Build(ctx, dir); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}
