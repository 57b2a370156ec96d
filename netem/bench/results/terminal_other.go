//go:build !linux

package results

import (
	"os"
)

// IsTerminal is false off Linux, so that the summary table takes its full
// layout: benches run on Linux only, and other systems only read their
// results.
func IsTerminal(*os.File) bool { return false }

// TerminalWidth is 80 off Linux, where no file is taken for a terminal.
func TerminalWidth(*os.File) int { return 80 }
