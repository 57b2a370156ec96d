//go:build linux

package netem

// RefuseMicrosecondTimestamps makes the testbeds built until restore is
// called ask for a route feature bit that no kernel defines (1<<30), as
// tcp_usec_ts is to kernels before 6.7, which refuse it with EINVAL.
func RefuseMicrosecondTimestamps() (restore func()) {
	was := usecTimestampsFeature
	usecTimestampsFeature = 1 << 30
	return func() { usecTimestampsFeature = was }
}
