package capture

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/vishvananda/netns"
)

// LabCapture is a live capture of a netem.Lab's switch into a pcapng file,
// with every fault applied to the lab written as a record at the time it
// happened. `bullylab up --capture` and `bullylab bench` both use it.
type LabCapture struct {
	path    string
	started time.Time
	f       *os.File
	w       *Writer
	live    *Live

	mu      sync.Mutex
	stopped bool
	stats   CaptureStats
	err     error
}

// StartLabCapture creates the file at path and captures lab's switch into
// it until Stop. Start it from netem.LabOptions.OnBuilt to have the whole
// run, boot included: frames that cross the switch before the capture
// starts are not in the file.
func StartLabCapture(ctx context.Context, lab *netem.Lab, path string) (*LabCapture, error) {
	topo := lab.Topology()
	tb := Testbed{Topology: topo.Name, Run: lab.Run()}
	if len(topo.Nodes) > 0 {
		s := topo.Nodes[0].Settings
		tb.HeartbeatNS, tb.FailureTimeoutNS, tb.ElectionTimeoutNS = int64(s.Heartbeat), int64(s.FailureTimeout), int64(s.ElectionTimeout)
	}
	ports := map[int]NodePort{}
	for _, sn := range lab.Testbed().Nodes() {
		addr, err := netip.ParseAddr(sn.Addr)
		if err != nil {
			return nil, fmt.Errorf("capture: node %s: %w", sn.Name, err)
		}
		id, err := lab.ID(sn.Name)
		if err != nil {
			return nil, fmt.Errorf("capture: %w", err)
		}
		tb.Nodes = append(tb.Nodes, Node{Name: sn.Name, Index: sn.Index, ID: id, Addr: addr, Port: topo.Port})
		ports[sn.Index] = NodePort{Veth: sn.SwitchVeth, MAC: netem.NodeMAC(addr)}
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	fail := func(err error) (*LabCapture, error) {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	started := time.Now()
	w, err := NewWriter(f, WriterOptions{Testbed: tb, Start: started})
	if err != nil {
		return fail(err)
	}
	sw, err := netns.GetFromName(netem.SwitchNamespace(lab.Run()))
	if err != nil {
		return fail(fmt.Errorf("capture: switch namespace of run %s: %w", lab.Run(), err))
	}
	defer sw.Close()
	live, err := Start(ctx, sw, ports, w)
	if err != nil {
		return fail(err)
	}
	lc := &LabCapture{path: path, started: started, f: f, w: w, live: live}
	lab.OnFault(lc.record)
	return lc, nil
}

// record writes fault f as a record, unless the capture has stopped: the
// lab keeps its observers until it closes.
func (lc *LabCapture) record(f netem.Fault) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.stopped {
		return
	}
	err := lc.w.WriteRecord(Record{Time: f.Time, Kind: Kind(f.Kind), Nodes: f.Nodes,
		Groups: f.Groups, OneWay: f.OneWay, Detail: f.Detail})
	if err != nil && lc.err == nil {
		lc.err = err
	}
}

// Path returns the capture file's path.
func (lc *LabCapture) Path() string { return lc.path }

// Started returns when the capture started: its testbed record's time.
func (lc *LabCapture) Started() time.Time { return lc.started }

// Written returns how many packets are in the file so far, records
// included; frames wait up to the Writer's reorder window to be written.
func (lc *LabCapture) Written() uint64 { return lc.w.Stats().Written }

// Stop ends the capture once the frames that crossed the switch before it
// are read, writes the end record with the capture's counters (drops
// included), flushes and closes the file, and returns the counters. The
// file is then complete. Further calls return the first result.
func (lc *LabCapture) Stop() (CaptureStats, error) {
	lc.mu.Lock()
	if lc.stopped {
		defer lc.mu.Unlock()
		return lc.stats, lc.err
	}
	lc.stopped = true
	lc.mu.Unlock()

	_, err := lc.live.Stop()
	err = errors.Join(err, lc.w.Close())
	stats := lc.w.Stats()
	if err == nil {
		err = lc.f.Sync()
	}
	err = errors.Join(err, lc.f.Close())

	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.stats = stats
	if err != nil && lc.err == nil {
		lc.err = fmt.Errorf("capture %s: %w", lc.path, err)
	}
	return lc.stats, lc.err
}
