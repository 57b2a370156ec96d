//go:build linux

package bench

// SetLabStarted makes f hear the run ID of every lab a run starts, until
// the returned function restores the previous hook.
func SetLabStarted(f func(run string)) (restore func()) {
	prev := labStarted
	labStarted = f
	return func() { labStarted = prev }
}
