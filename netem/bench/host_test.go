//go:build linux

package bench_test

import (
	"runtime"
	"testing"

	"github.com/bullylab/bullylab/netem/bench"
)

func TestLocalHost(t *testing.T) {
	h := bench.LocalHost()
	if h.OS != runtime.GOOS || h.Arch != runtime.GOARCH || h.Cores != runtime.NumCPU() {
		t.Errorf("host %+v", h)
	}
	if runtime.GOOS == "linux" && h.Kernel == "" {
		t.Error("no kernel release on Linux")
	}
	if tool := bench.LocalTool("v1.2.3"); tool.Name != "bullylab" || tool.Version != "v1.2.3" || tool.GoVersion == "" {
		t.Errorf("tool %+v", tool)
	}
}
