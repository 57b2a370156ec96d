//go:build linux

package bench

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
)

// restFilesPerNode is what a node holds open in a shared host at rest:
// both ends of its connection to the leader, its listeners, log, lock and
// namespace. The host of star1000 had 9,500 open before a partition.
const restFilesPerNode = 10

// sharedHostFiles estimates the most files the host process of topo's
// shared hosting, allowed limit open files, holds open while a Bully
// cluster runs sc. A partition that cuts a group off from the leader and
// from every node just below it leaves the group's best member past the
// detection stagger: the whole group detects at once and each member opens
// a connection to every higher member it reaches, both ends of each a
// descriptor of the host, and they stay open while the group elects.
// Meanwhile every node keeps dialing the peers across the cut, up to its
// dial slots (lab.DialSlots) each. Other faults elect through the highest
// survivor, which halts the rest with one connection each. On star64 cut
// 31 | 33, this gives 640 + 1056 + 1984 = 3680; the host held 3,699 at
// most, 618 before the cut. It returns 0 where no one host carries the
// cluster.
func sharedHostFiles(topo *topologies.Topology, sc *scenario.Scenario, algorithm string, limit uint64) (uint64, error) {
	if topo.Hosting != topologies.HostingShared || len(topo.Hosts) > 0 {
		return 0, nil
	}
	names := make([]string, len(topo.Nodes))
	for i, n := range topo.Nodes {
		names[i] = n.Name
	}
	files := uint64(restFilesPerNode * len(names))
	if algorithm != wire.AlgorithmBully {
		return files, nil
	}
	// The seed only picks among nodes a selector leaves open; groups of
	// the built-in partitions do not depend on it.
	sched, err := scenario.Resolve(sc, scenario.InitialView(names, selectorGroups(topo), sc.Start), rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		// The run reports a schedule that does not resolve.
		return files, nil
	}
	rank := make(map[string]int, len(names))
	for i, n := range names {
		rank[n] = i
	}
	leader := ""
	if len(names) > 0 {
		leader = names[len(names)-1]
	}
	var peak uint64
	for _, a := range sched {
		if a.Kind != scenario.StepInject || a.Fault != fault.Partition || a.OneWay {
			continue
		}
		var pairs, dialing uint64
		slots := uint64(lab.DialSlots(limit, len(names)))
		for _, g := range a.Groups {
			dialing += uint64(len(g)) * min(uint64(len(names)-len(g)), slots)
		}
		for _, g := range a.Groups {
			if slices.Contains(g, leader) || len(g) == 0 {
				continue
			}
			best := -1
			for _, n := range g {
				best = max(best, rank[n])
			}
			if best < len(names)-2 {
				m := uint64(len(g))
				pairs += m * (m - 1) / 2
			}
		}
		peak = max(peak, 2*pairs+dialing)
	}
	return files + peak, nil
}

// CheckHostFiles refuses, in one line, a scenario whose shared host would
// run out of open files (hostFileLimit) partway through a run, before any
// testbed is built.
func CheckHostFiles(topo *topologies.Topology, scs []*scenario.Scenario, algorithms []string) error {
	return checkHostFiles(topo, scs, algorithms, hostFileLimit())
}

func checkHostFiles(topo *topologies.Topology, scs []*scenario.Scenario, algorithms []string, limit uint64) error {
	if limit == 0 {
		return nil
	}
	for _, sc := range scs {
		for _, alg := range algorithms {
			need, err := sharedHostFiles(topo, sc, alg, limit)
			if err != nil {
				return err
			}
			if need > limit {
				return fmt.Errorf("%s with %s on %s needs about %d open files in its one host process, more than its limit of %d: run it with a hard limit of at least %d (ulimit -Hn %d, where the kernel lets root raise it) or on a smaller topology",
					sc.Name, alg, topo.Name, need, limit, need, need)
			}
		}
	}
	return nil
}

// hostFileLimit is the open-files limit the lab's shared host gets: the
// hard limit it inherits, or fs.nr_open when it may raise the hard limit
// (CAP_SYS_RESOURCE), as the host does; 0 when unknown.
func hostFileLimit() uint64 {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) != nil {
		return 0
	}
	if !mayRaiseHardLimit() {
		return lim.Max
	}
	b, err := os.ReadFile("/proc/sys/fs/nr_open")
	if err != nil {
		return lim.Max
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return lim.Max
	}
	return max(n, lim.Max)
}

// mayRaiseHardLimit says whether this process holds CAP_SYS_RESOURCE in its
// effective set, which a raise of the hard limit needs.
func mayRaiseHardLimit() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return false
	}
	return data[unix.CAP_SYS_RESOURCE/32].Effective&(1<<(unix.CAP_SYS_RESOURCE%32)) != 0
}
