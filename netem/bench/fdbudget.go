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
// namespace (the host of star1000 had 9,500 open before a partition), and
// its share of the warm connections (node.Warmer: the highest follower's
// to each lower node and each one's back, where boot left none): star64
// cut 31 | 33 peaked at 3,470 files with them against 3,339 without, two
// a node.
const restFilesPerNode = 12

// hostFilesMargin is the part of a host process's limit the estimate may
// fill: the estimate came within 1% of star64's measured peak, and the
// rest covers what it leaves out (state saves, the host's own pipes and
// runtime, a boot's transient connections).
const hostFilesMargin = 0.75

// hostProcessMemory is what a host process costs on top of its nodes' own
// memory (a Go runtime, its threads and heap headroom), for the cap on
// how many host processes the machine's memory allows.
const hostProcessMemory = 64 << 20

// sharedHostFiles estimates the most files each of hosts host processes
// (lab.HostProcessOf deals the nodes) holds open while a Bully cluster of
// topo's shared hosting runs sc, each process allowed limit open files. A
// partition that cuts a group off from the leader and from every node
// just below it leaves the group's best member past the detection
// stagger: the whole group detects at once, each member opens a
// connection to every higher member it reaches (ELECTION), and each of
// those answers on a connection of its own (connections are one-way), a
// descriptor at each end: 2(m-1) for each of the m members once the
// election has gone round, and connections stay open. Meanwhile every
// node keeps dialing the peers across the cut, up to its dial slots
// (lab.DialSlots of its process) each. Other faults elect through the
// highest survivor, which halts the rest with one connection each. On
// star64 cut 31 | 33 in one process, this gives 768 + 2112 + 1984 = 4864;
// the host held 3,699 at most (618 before the cut): that election ended
// before most answers were dialled. star500's, in the 6 processes that
// counting m-1 planned for 13,800 files each, reached their 20,000 and
// nodes stopped. Since an election asks in waves and stops at its first
// ANSWER, and on a silent leader asks the nearest member above in its
// first wave (node/bully), the estimate is an upper bound, kept for the
// re-elections that a loaded host can still bring: star500's 11
// processes held at most 1,656 to 1,677 files in three runs (14,208 with
// the waves alone, 19,289 without), star1000's 39 at most 2,356 to 2,398,
// where the estimate is about 15,000. It returns nil where no shared
// host runs the cluster.
func sharedHostFiles(topo *topologies.Topology, sc *scenario.Scenario, algorithm string, limit uint64, hosts int) ([]uint64, error) {
	if topo.Hosting != topologies.HostingShared || len(topo.Hosts) > 0 {
		return nil, nil
	}
	hosts = max(hosts, 1)
	names := make([]string, len(topo.Nodes))
	hostOf := make(map[string]int, len(names))
	hosted := make([]int, hosts)
	for i, n := range topo.Nodes {
		names[i] = n.Name
		hostOf[n.Name] = lab.HostProcessOf(i, hosts)
		hosted[hostOf[n.Name]]++
	}
	rest := make([]uint64, hosts)
	for p := range rest {
		rest[p] = uint64(restFilesPerNode * hosted[p])
	}
	if algorithm != wire.AlgorithmBully {
		return rest, nil
	}
	// The seed only picks among nodes a selector leaves open; groups of
	// the built-in partitions do not depend on it.
	sched, err := scenario.Resolve(sc, scenario.InitialView(names, selectorGroups(topo), sc.Start), rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		// The run reports a schedule that does not resolve.
		return rest, nil
	}
	rank := make(map[string]int, len(names))
	for i, n := range names {
		rank[n] = i
	}
	leader := ""
	if len(names) > 0 {
		leader = names[len(names)-1]
	}
	slots := make([]uint64, hosts)
	for p := range slots {
		slots[p] = uint64(lab.DialSlots(limit, hosted[p]))
	}
	peak := make([]uint64, hosts)
	for _, a := range sched {
		if a.Kind != scenario.StepInject || a.Fault != fault.Partition || a.OneWay {
			continue
		}
		files := make([]uint64, hosts)
		for _, g := range a.Groups {
			across := uint64(len(names) - len(g))
			electing := false
			if !slices.Contains(g, leader) && len(g) > 0 {
				best := -1
				for _, n := range g {
					best = max(best, rank[n])
				}
				electing = best < len(names)-2
			}
			for _, n := range g {
				p := hostOf[n]
				files[p] += min(across, slots[p])
				if electing {
					files[p] += 2 * uint64(len(g)-1)
				}
			}
		}
		for p := range peak {
			peak[p] = max(peak[p], files[p])
		}
	}
	for p := range peak {
		peak[p] += rest[p]
	}
	return peak, nil
}

// hostPlan is how a shared topology's nodes run for a scenario: in
// Processes host processes, the busiest of which needs about PeakFiles
// open files, Files in all.
type hostPlan struct {
	Processes int
	PeakFiles uint64
	Files     uint64
}

// machine is what bounds a plan besides a process's open files: the
// system's file table and memory.
type machine struct {
	fileLimit uint64 // a host process's limit on open files; 0: unknown
	filesLeft uint64 // fs.file-max less the files open; 0: unknown
	memory    uint64 // MemAvailable in bytes; 0: unknown
}

// planHosts sizes the host processes of topo's shared hosting for sc with
// algorithm: the fewest whose busiest process stays within the margin of
// its limit, up to lab.MaxHostProcesses, one per node and what memory
// allows. It says, in one line, what to do when no count carries the
// scenario. A topology not shared plans no process.
func planHosts(topo *topologies.Topology, sc *scenario.Scenario, algorithm string, m machine) (hostPlan, error) {
	if topo.Hosting != topologies.HostingShared || len(topo.Hosts) > 0 || m.fileLimit == 0 {
		return hostPlan{}, nil
	}
	most := min(lab.MaxHostProcesses, len(topo.Nodes))
	if m.memory > 0 {
		most = max(min(most, int(m.memory/hostProcessMemory)), 1)
	}
	budget := uint64(float64(m.fileLimit) * hostFilesMargin)
	var plan hostPlan
	for k := 1; k <= most; k++ {
		files, err := sharedHostFiles(topo, sc, algorithm, m.fileLimit, k)
		if err != nil {
			return hostPlan{}, err
		}
		plan = hostPlan{Processes: k}
		for _, f := range files {
			plan.PeakFiles = max(plan.PeakFiles, f)
			plan.Files += f
		}
		if plan.PeakFiles <= budget {
			break
		}
	}
	if plan.PeakFiles > budget {
		per := max(uint64(float64(plan.PeakFiles)/hostFilesMargin), plan.PeakFiles+1)
		return plan, fmt.Errorf("%s with %s on %s needs about %d open files in each of %d host processes, more than %.0f%% of their limit of %d: run it with a hard limit of at least %d (ulimit -Hn %d, where the kernel lets root raise it) or on a smaller topology",
			sc.Name, algorithm, topo.Name, plan.PeakFiles, plan.Processes, hostFilesMargin*100, m.fileLimit, per, per)
	}
	if m.filesLeft > 0 && plan.Files > m.filesLeft {
		return plan, fmt.Errorf("%s with %s on %s needs about %d open files in all, more than the %d the system has left (fs.file-max): raise it (sysctl -w fs.file-max=%d) or run a smaller topology",
			sc.Name, algorithm, topo.Name, plan.Files, m.filesLeft, plan.Files*2)
	}
	return plan, nil
}

// CheckHostFiles refuses, in one line that says what to do, a scenario
// that the shared host processes of topo could not carry, before any
// testbed is built: when even lab.MaxHostProcesses processes (or as many
// as memory allows), each with its own limit on open files
// (hostFileLimit), would run out partway through a run, or when the system
// has not that many files left.
func CheckHostFiles(topo *topologies.Topology, scs []*scenario.Scenario, algorithms []string) error {
	_, err := HostProcesses(topo, scs, algorithms)
	return err
}

// HostProcesses is how many shared host processes run topo's nodes for
// scs on algorithms: the most any of them needs (see planHosts), 0 for a
// topology not shared; or CheckHostFiles's refusal.
func HostProcesses(topo *topologies.Topology, scs []*scenario.Scenario, algorithms []string) (int, error) {
	return hostProcesses(topo, scs, algorithms, thisMachine())
}

func hostProcesses(topo *topologies.Topology, scs []*scenario.Scenario, algorithms []string, m machine) (int, error) {
	k := 0
	for _, sc := range scs {
		for _, alg := range algorithms {
			plan, err := planHosts(topo, sc, alg, m)
			if err != nil {
				return 0, err
			}
			k = max(k, plan.Processes)
		}
	}
	return k, nil
}

// thisMachine reads what bounds the host processes here.
func thisMachine() machine {
	m := machine{fileLimit: hostFileLimit()}
	if b, err := os.ReadFile("/proc/sys/fs/file-nr"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 3 {
			open, err1 := strconv.ParseUint(f[0], 10, 64)
			most, err2 := strconv.ParseUint(f[2], 10, 64)
			if err1 == nil && err2 == nil && most > open {
				m.filesLeft = most - open
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
				if kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64); err == nil {
					m.memory = kb << 10
				}
			}
		}
	}
	return m
}

// hostFileLimit is the open-files limit each of the lab's shared host
// processes gets: the
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
