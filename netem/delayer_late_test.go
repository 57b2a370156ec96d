//go:build linux

package netem

import (
	"fmt"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
)

func TestLateBuckets(t *testing.T) {
	// Every lateness falls in the bucket whose range holds it, and the
	// ranges are contiguous.
	prevEnd := uint64(0)
	for i := range lateBuckets - 1 {
		end := lateBucketEnd(i)
		if end <= prevEnd {
			t.Fatalf("bucket %d ends at %d µs, not after bucket %d's %d µs", i, end, i-1, prevEnd)
		}
		for _, us := range []uint64{prevEnd, end - 1} {
			if got := lateBucket(us); got != i {
				t.Fatalf("%d µs in bucket %d, want %d (range %d-%d µs)", us, got, i, prevEnd, end)
			}
		}
		if i >= 4 && float64(end-prevEnd)/float64(prevEnd) > 0.25 {
			t.Fatalf("bucket %d (%d-%d µs) is wider than 25%%", i, prevEnd, end)
		}
		prevEnd = end
	}
	if got := lateBucket(1 << 62); got != lateBuckets-1 {
		t.Errorf("2^62 µs in bucket %d, want the last, %d", got, lateBuckets-1)
	}
}

func TestLatenessStats(t *testing.T) {
	var l lateness
	for range 97 {
		l.record(100 * time.Microsecond)
	}
	l.record(1500 * time.Microsecond)
	l.record(2500 * time.Microsecond)
	l.record(7 * time.Millisecond)
	l.record(-time.Millisecond) // released early as the delayer closed: not lateness
	var s DelayerStats
	l.fill(&s)
	if s.LateCount != 100 || s.LateOver1ms != 3 || s.LateOver2ms != 2 || s.LateMax != 7*time.Millisecond {
		t.Errorf("count %d, over 1 ms %d, over 2 ms %d, max %v; want 100, 3, 2, 7ms", s.LateCount, s.LateOver1ms, s.LateOver2ms, s.LateMax)
	}
	// Percentiles are their bucket's upper end: 100 µs is in 96-112 µs,
	// 2.5 ms in 2048-2560 µs (the 99th of 100 is the 2.5 ms release).
	if s.LateP50 != 112*time.Microsecond || s.LateP99 != 2560*time.Microsecond {
		t.Errorf("p50 %v, p99 %v; want 112µs, 2.56ms", s.LateP50, s.LateP99)
	}
	want := "delayer late p50 0.11 ms, p99 2.56 ms, max 7.00 ms; 3 of 100 releases over 1 ms, 2 over 2 ms"
	if got := s.LateText(); got != want {
		t.Errorf("LateText %q, want %q", got, want)
	}
	if got := (DelayerStats{}).LateText(); got != "" {
		t.Errorf("LateText of nothing measured %q, want empty", got)
	}
}

// TestDelayerLatenessKept checks that an Impairer's lateness covers every
// delayer it ran: Clear stops the delayer and Close the backend, and a
// run is judged after both.
func TestDelayerLatenessKept(t *testing.T) {
	noLeak(t)
	f := newFaultsFixture(t, 2)
	a, b := f.nodes[0], f.nodes[1]
	im := impairer(t, f, a, BackendNFQueue)
	applyOrSkip(t, func() error { return im.Set(fault.Impairment{Delay: 5 * time.Millisecond}) })
	copies, _ := udpBurst(t, a, b, 50)
	if len(copies) != 50 {
		t.Fatalf("%d of 50 datagrams arrived", len(copies))
	}
	live := im.Stats()
	t.Logf("while delaying: %+v", live)
	if live.Wake == "" || live.LateCount < 50 || live.LateMax < live.LateP99 || live.LateP99 < live.LateP50 {
		t.Errorf("stats %+v: want a wake-up named and the 50 delayed releases measured, p50 <= p99 <= max", live)
	}
	if err := im.Clear(); err != nil {
		t.Fatal(err)
	}
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	after := im.Stats()
	if after.LateCount < live.LateCount || after.LateMax < live.LateMax || after.Wake != live.Wake {
		t.Errorf("after Clear and Close: %+v; want at least what was measured before, %+v", after, live)
	}
}

// BenchmarkDelayerLateness sends UDP datagrams through a 10 ms NFQUEUE
// delay, one every 500 µs, and reports how late the delayer released them
// (late-p50-µs, late-p99-µs, late-max-µs, and the share over 1 and 2 ms)
// for each way its release loop can wake, under four loads: none; one
// goroutine allocating garbage in this process, leaving the runtime a
// processor to spare (the bench's capture decoding and its GC); as many
// such goroutines as GOMAXPROCS, leaving none; two busy processes outside
// it (nodes and other jobs on the host). Run with -count above 1: each count runs every
// combination once, so the ways are compared under the same host load.
func BenchmarkDelayerLateness(b *testing.B) {
	const delay, gap = 10 * time.Millisecond, 500 * time.Microsecond
	f := newFaultsFixture(b, 2)
	a, dst := f.nodes[0], f.nodes[1]
	if !probedCaps(b).NFQueue {
		b.Skip("the kernel lacks NFQUEUE, which the delayer needs")
	}
	src, sink := udpConn(b, a), udpConn(b, dst)
	go func() { // drain, so that the receiver's buffer never matters
		buf := make([]byte, 64)
		for {
			if _, err := sink.Read(buf); err != nil {
				return
			}
		}
	}()
	ways := []struct {
		name    string
		timerfd bool
	}{{"gotimer", false}, {"timerfd", true}}
	for _, load := range []string{"idle", "alloc1", "allocall", "procs"} {
		for _, w := range ways {
			b.Run(load+"/"+w.name, func(b *testing.B) {
				delayerUseTimerfd = w.timerfd
				defer func() { delayerUseTimerfd = true }()
				im, err := NewImpairer(a.ns, f.run, NodeVeth, ImpairerOptions{Backend: BackendNFQueue})
				if err != nil {
					b.Fatal(err)
				}
				defer im.Close()
				if err := im.Set(fault.Impairment{Delay: delay}); err != nil {
					b.Fatal(err)
				}
				stop := startLoad(b, load)
				defer stop()
				to := sink.LocalAddr()
				msg := make([]byte, 64)
				b.ResetTimer()
				next := time.Now()
				for range b.N {
					if _, err := src.WriteTo(msg, to); err != nil {
						b.Fatal(err)
					}
					next = next.Add(gap)
					time.Sleep(time.Until(next))
				}
				deadline := time.Now().Add(delay + 5*time.Second)
				for im.Stats().Released < uint64(b.N) && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				b.StopTimer()
				stop()
				s := im.Stats()
				if s.Released < uint64(b.N) {
					b.Fatalf("%d of %d datagrams released; stats %+v", s.Released, b.N, s)
				}
				b.ReportMetric(float64(s.LateP50.Microseconds()), "late-p50-µs")
				b.ReportMetric(float64(s.LateP99.Microseconds()), "late-p99-µs")
				b.ReportMetric(float64(s.LateMax.Microseconds()), "late-max-µs")
				b.ReportMetric(100*float64(s.LateOver1ms)/float64(s.LateCount), "%over1ms")
				b.ReportMetric(100*float64(s.LateOver2ms)/float64(s.LateCount), "%over2ms")
				b.Logf("%s, %s: %s", load, s.Wake, s.LateText())
			})
		}
	}
}

// startLoad starts the named load and returns what stops it (idempotent).
func startLoad(b *testing.B, load string) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	var procs []*exec.Cmd
	workers := 0
	switch load {
	case "idle":
	case "alloc1":
		workers = 1
	case "allocall":
		workers = runtime.GOMAXPROCS(0)
	case "procs":
		for range 2 {
			c := exec.Command("sh", "-c", "while :; do :; done")
			if err := c.Start(); err != nil {
				b.Fatalf("starting a busy process: %v", err)
			}
			procs = append(procs, c)
		}
	default:
		panic(fmt.Sprintf("unknown load %q", load))
	}
	for range workers {
		go func() {
			defer func() { finished <- struct{}{} }()
			// Keep a few MB alive so that each cycle has marking to do.
			live := make([][]byte, 1024)
			for i := 0; ; i++ {
				live[i%len(live)] = make([]byte, 4096)
				if i%256 == 0 {
					select {
					case <-done:
						return
					default:
					}
				}
			}
		}()
	}
	stopped := false
	return func() {
		if stopped {
			return
		}
		stopped = true
		close(done)
		for range workers {
			<-finished
		}
		for _, c := range procs {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
}
