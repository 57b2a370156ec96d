//go:build linux

package bench

import (
	"bufio"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/bullylab/bullylab/netem/bench/results"
)

// LocalHost describes the machine this process runs on, for Results.Host.
func LocalHost() results.Host {
	return results.Host{OS: runtime.GOOS, Arch: runtime.GOARCH, Kernel: kernelRelease(), CPU: cpuModel(), Cores: runtime.NumCPU()}
}

// LocalTool describes this binary, for Results.Tool; version is what
// `bullylab version` prints.
func LocalTool(version string) results.Tool {
	t := results.Tool{Name: "bullylab", Version: version, GoVersion: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		if info.GoVersion != "" {
			t.GoVersion = info.GoVersion
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				t.Revision = s.Value
			}
		}
	}
	return t
}

// cpuModel returns the first "model name" of /proc/cpuinfo, "" elsewhere.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			// Some kernels pad the model with runs of spaces.
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return ""
}
