//go:build !linux

package node

// writeProcessMetrics writes nothing: the process_* metrics are read from
// /proc, which only Linux has.
func writeProcessMetrics(*expoWriter) {}
