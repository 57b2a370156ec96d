//go:build !linux

package bench

import (
	"os"
)

// Off Linux progress is plain lines: benches run on Linux only, and other
// systems only read their results.
func isTerminal(*os.File) bool { return false }

func terminalWidth(*os.File) int { return 80 }

func kernelRelease() string { return "" }
