//go:build linux

package netem_test

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
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
func BenchmarkBuild(b *testing.B) { benchmarkBuilds(b, nil) }

// BenchmarkBuildShells is BenchmarkBuild with what Mininet does for each
// host on top: a bash started in the host's namespace (`bash --norc
// --noediting -is`, Mininet's command line, PS1 a marker byte) and read up
// to its first prompt before the build counts as done; teardown ends every
// shell (end of input, as `exit`) and waits for it before the namespaces
// go. scripts/vs-mininet.sh sets it beside `mn --topo single,N`.
func BenchmarkBuildShells(b *testing.B) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		b.Fatalf("the shells benchmark starts bash in each namespace: %v", err)
	}
	benchmarkBuilds(b, func(tb *netem.Testbed) (func(), error) {
		shells, err := startShells(tb, bash)
		return func() {
			for _, sh := range shells {
				sh.end()
			}
		}, err
	})
}

// benchmarkBuilds builds and tears down a star of each size, with
// populate, when not nil, run after the build and counted in it, and the
// end it returns run first in teardown and counted there; slab-KiB/node is
// reported for the bare build alone.
func benchmarkBuilds(b *testing.B, populate func(*netem.Testbed) (end func(), err error)) {
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
				end := func() {}
				if populate != nil {
					end, err = populate(tb)
				}
				built := time.Now()
				slab += float64(meminfoKiB(b, "Slab")-before) / float64(n)
				closing := time.Now()
				end()
				if cerr := tb.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					b.Fatal(err)
				}
				build += built.Sub(start)
				teardown += time.Since(closing)
				netemtest.RequireClean(b, run)
			}
			b.ReportMetric(float64(build.Microseconds())/1e3/float64(b.N), "ms/build")
			b.ReportMetric(float64(teardown.Microseconds())/1e3/float64(b.N), "ms/teardown")
			if populate == nil {
				b.ReportMetric(slab/float64(b.N), "slab-KiB/node")
			}
		})
	}
}

// promptMark is the shells' PS1, as Mininet's chr(127).
const promptMark = 0x7f

// benchShell is a bash waiting at its prompt in a node's namespace.
type benchShell struct {
	cmd   *exec.Cmd
	input io.WriteCloser
}

// startShells starts one bash per node of tb, one after another as
// Mininet does, and returns once each has printed its prompt; on an error
// the shells started so far are ended.
func startShells(tb *netem.Testbed, bash string) ([]benchShell, error) {
	var shells []benchShell
	for _, nd := range tb.Nodes() {
		sh, err := startShell(tb, nd.Name, bash)
		if err != nil {
			for _, s := range shells {
				s.end()
			}
			return nil, err
		}
		shells = append(shells, sh)
	}
	return shells, nil
}

func startShell(tb *netem.Testbed, node, bash string) (benchShell, error) {
	cmd := exec.Command(bash, "--norc", "--noediting", "-is", "mininet:"+node)
	cmd.Env = []string{"PS1=\x7f", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	in, err := cmd.StdinPipe()
	if err != nil {
		return benchShell{}, err
	}
	// An interactive bash without a terminal prints its prompt on stderr.
	out, err := cmd.StderrPipe()
	if err != nil {
		return benchShell{}, err
	}
	if err := tb.StartCmd(node, cmd); err != nil {
		return benchShell{}, err
	}
	sh := benchShell{cmd: cmd, input: in}
	r := bufio.NewReader(out)
	for {
		c, err := r.ReadByte()
		if err != nil {
			sh.end()
			return benchShell{}, fmt.Errorf("node %s: bash exited before its prompt: %w", node, err)
		}
		if c == promptMark {
			return sh, nil
		}
	}
}

// end closes the shell's input, which makes it exit, and waits for it.
func (sh benchShell) end() {
	sh.input.Close()
	sh.cmd.Wait()
}
