//go:build !linux

package results

import (
	"os"
)

// Off Linux the summary table takes its full layout: benches run on Linux
// only, and other systems only read their results.
func isTerminal(*os.File) bool { return false }

func terminalWidth(*os.File) int { return 80 }
