//go:build linux

package lab_test

import (
	"testing"

	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/netem/lab/labtest"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/wire"
)

// TestLabColdBoot: a cold boot in a shared host elects the highest node
// with one election, its own: the others start held, so no ELECTION is sent, none refused by
// a node not up yet, and the frames are its HALT to each of the N-1 below,
// their HALT_ACKs and its COORDINATOR to each: 3(N-1).
func TestLabColdBoot(t *testing.T) {
	// A process per node boots paced on each node's own election
	// (bootPaced): the held boot's HALT burst is too much for hundreds of
	// processes on a busy machine.
	for _, hosting := range []topologies.Hosting{topologies.HostingShared} {
		t.Run(string(hosting), func(t *testing.T) {
			lb := labStartHosted(t, "star5", hosting)
			below := uint64(len(lb.Nodes()) - 1)
			sent, started := coldBoot(t, lb, map[wire.Type]uint64{wire.TypeElection: 0, wire.TypeAnswer: 0,
				wire.TypeHalt: below, wire.TypeHaltAck: below, wire.TypeCoordinator: below})
			t.Logf("cold boot of %d nodes (%s): sent %v, %d election; booted in %v", len(lb.Nodes()), hosting, sent, started, lb.Times().Ready.Sub(lb.Times().Started))
		})
	}
	// The ring boots the same way: the top's run passes every node once
	// (N RING_ELECTIONs), its ELECTED too (N), and nobody else starts one.
	t.Run("ring", func(t *testing.T) {
		topo := labTopology(t, "star5", topologies.HostingShared)
		topo.Algorithm = wire.AlgorithmRing
		lb := labtest.Boot(t, topo, lab.BootOptions{Binary: labtest.Binary(t)})
		n := uint64(len(lb.Nodes()))
		sent, started := coldBoot(t, lb, map[wire.Type]uint64{wire.TypeRingElection: n, wire.TypeElected: n})
		t.Logf("cold boot of %d ring nodes: sent %v, %d election", n, sent, started)
	})
}

// coldBoot waits for the highest node to lead, checks that the nodes sent
// want of each type, none dropped (a refused connection drops the frame),
// and started one election in all, and returns what they sent.
func coldBoot(t *testing.T, lb *lab.Lab, want map[wire.Type]uint64) (map[wire.Type]uint64, uint64) {
	t.Helper()
	names := lb.Nodes()
	labFirst(t, lb, names[len(names)-1])
	sent, dropped := map[wire.Type]uint64{}, map[wire.Type]uint64{}
	var started uint64
	for _, name := range names {
		c, err := lb.Client(name)
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.Status(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		started += s.ElectionsStarted
		for _, ty := range wire.Types {
			sent[ty] += s.Counters.Sent[ty.String()]
			dropped[ty] += s.Counters.Dropped[ty.String()]
		}
	}
	for ty, n := range want {
		if sent[ty] != n || dropped[ty] != 0 {
			t.Errorf("%s: %d sent, %d dropped; want %d sent, none dropped", ty, sent[ty], dropped[ty], n)
		}
	}
	if started != 1 {
		t.Errorf("%d elections started, want the top's boot election alone", started)
	}
	return sent, started
}
