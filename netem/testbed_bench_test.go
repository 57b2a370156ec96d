//go:build linux

package netem_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/bullylab/bullylab/topologies"
)

// BenchmarkBuild measures building and tearing down star testbeds of 10
// to 1000 nodes, namespaces and links alone (no node processes): ms/build,
// ms/teardown and slab-KiB/node, the growth of the kernel's slab over the
// build per node (other work on the machine adds noise; ns/op also counts
// a pause between iterations). TestBuild500 checks the neighbour entries. Pick a
// size with -bench 'Build/500$'.
// Teardown returns once the namespaces are unmounted; the kernel frees them
// asynchronously, holding the locks a build needs, so each iteration first
// waits for that to settle: a build right after a teardown of 250 nodes
// takes up to twice as long.
func BenchmarkBuild(b *testing.B) {
	const settle = time.Second
	for _, n := range []int{10, 100, 250, 500, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			netemtest.RequireRoot(b)
			netemtest.SkipAboveMaxNodes(b, n)
			topo, err := topologies.Star(n)
			if err != nil {
				b.Fatal(err)
			}
			var build, teardown time.Duration
			var slab float64
			for range b.N {
				time.Sleep(settle)
				run := netemtest.RunName(b)
				before := meminfoKiB(b, "Slab")
				start := time.Now()
				tb, err := netem.Build(b.Context(), topo, run)
				if err != nil {
					b.Fatal(err)
				}
				built := time.Now()
				slab += float64(meminfoKiB(b, "Slab")-before) / float64(n)
				closing := time.Now()
				if err := tb.Close(); err != nil {
					b.Fatal(err)
				}
				build += built.Sub(start)
				teardown += time.Since(closing)
				netemtest.RequireClean(b, run)
			}
			b.ReportMetric(float64(build.Microseconds())/1e3/float64(b.N), "ms/build")
			b.ReportMetric(float64(teardown.Microseconds())/1e3/float64(b.N), "ms/teardown")
			b.ReportMetric(slab/float64(b.N), "slab-KiB/node")
		})
	}
}
