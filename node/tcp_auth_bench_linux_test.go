package node

import (
	"syscall"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// BenchmarkTCPHeartbeats is what authentication costs a leader and a
// follower per HEARTBEAT: one transport sends to another over loopback and
// the frames are received, in one process. cpu-us/frame is the process's
// CPU, kernel included (both ends: the sealing and the verifying);
// wire-B/frame the frame's size on the wire.
func BenchmarkTCPHeartbeats(b *testing.B) {
	for _, mode := range []struct {
		name string
		key  bool
	}{{"insecure", false}, {"key", true}} {
		b.Run(mode.name, func(b *testing.B) {
			var cfg TCPConfig
			if mode.key {
				k, err := wire.NewKey()
				if err != nil {
					b.Fatal(err)
				}
				cfg.Key = &k
			}
			a, err := ListenTCP("127.0.0.1:0", uuid.New(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			f, err := ListenTCP("127.0.0.1:0", uuid.New(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			a.SetPeers([]wire.Member{{ID: f.id, Addr: f.LocalAddr()}})
			msg := wire.Message{Type: wire.TypeHeartbeat, Epoch: 7, From: a.id}
			// The connection and its HELLO before the clock starts.
			a.Send(f.id, &msg)
			<-f.Recv()
			const batch = 64 // under the queue length: nothing is dropped
			var before, after syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			b.ResetTimer()
			for sent := 0; sent < b.N; sent += batch {
				n := min(batch, b.N-sent)
				for range n {
					a.Send(f.id, &msg)
				}
				for range n {
					select {
					case <-f.Recv():
					case <-time.After(5 * time.Second):
						b.Fatal("a heartbeat did not arrive")
					}
				}
			}
			b.StopTimer()
			syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
			b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-us/frame")
			size := wire.MinFrameLen
			if mode.key {
				size += wire.TagLen
			}
			b.ReportMetric(float64(size), "wire-B/frame")
			if d := a.counters.Dropped(wire.TypeHeartbeat); d != 0 {
				b.Fatalf("%d heartbeats dropped", d)
			}
		})
	}
}
