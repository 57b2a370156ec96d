package node

import (
	"syscall"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// BenchmarkTCPSendRefused is what a node booting before most of its
// cluster pays per ELECTION to a member whose process is not running yet:
// a frame to a fresh peer whose host refuses the connection, until the
// refusal is reported. In a testbed booting N nodes in ascending order
// there are N^2/2 of them. cpu-us/send is the process's CPU, kernel
// included, so run it with -cpu 1 as nodes run.
func BenchmarkTCPSendRefused(b *testing.B) {
	const peers = 100
	tr, err := ListenTCP("127.0.0.1:0", uuid.New(), TCPConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	members := make([]wire.Member, peers)
	for i := range members {
		members[i] = wire.Member{ID: uuid.New(), Addr: deadAddr(b)}
	}
	msg := wire.Message{Type: wire.TypeElection, Epoch: 1, From: tr.id}
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	b.ResetTimer()
	for range b.N {
		tr.SetPeers(nil) // fresh peers: none backing off
		tr.SetPeers(members)
		for _, m := range members {
			tr.Send(m.ID, &msg)
		}
		for range peers {
			select {
			case <-tr.Refusals():
			case <-time.After(5 * time.Second):
				b.Fatal("a refusal was not reported")
			}
		}
	}
	b.StopTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*peers), "cpu-us/send")
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*peers), "us/send")
}
