//go:build linux

package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/vishvananda/netns"
)

// CaptureOptions ask a lab to capture its switch into a pcapng file, with
// every fault applied to the lab written as a record at the time it
// happened.
type CaptureOptions struct {
	// Path is the file to create.
	Path string
	// FromBoot starts the capture once the testbed is built and before any
	// node boots, so that the file holds the boot elections and every
	// frame the nodes' counters count. Otherwise it starts once every
	// node answers, and the nodes boot while the testbed is still being
	// built (see Boot).
	FromBoot bool
	// Mode is the file's permission bits, applied whatever the umask; 0
	// leaves what the umask gives.
	Mode os.FileMode
	// Exclude names devices of the switch namespace not to capture
	// (capture.LiveOptions).
	Exclude []string
}

// Capture is a lab's live capture of its switch. Lab.Close stops it
// first, so that the file ends with the end record; Stop stops it
// earlier, for its counters.
type Capture struct {
	path    string
	started time.Time
	f       *os.File
	w       *capture.Writer
	live    *capture.Live

	mu      sync.Mutex
	stopped bool
	stats   capture.CaptureStats
	err     error
}

// startCapture creates the file opts names and captures l's switch into
// it until Stop: frames that cross the switch before it starts are not in
// the file.
func (l *Lab) startCapture(opts CaptureOptions) (*Capture, error) {
	tb, ports, err := l.captureTestbed()
	if err != nil {
		return nil, err
	}
	f, err := os.Create(opts.Path)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	fail := func(err error) (*Capture, error) {
		f.Close()
		os.Remove(opts.Path)
		return nil, err
	}
	if opts.Mode != 0 {
		if err := f.Chmod(opts.Mode); err != nil {
			return fail(fmt.Errorf("capture: %w", err))
		}
	}
	started := time.Now()
	w, err := capture.NewWriter(f, capture.WriterOptions{Testbed: tb, Start: started})
	if err != nil {
		return fail(err)
	}
	sw, err := netns.GetFromName(netem.SwitchNamespace(l.Run()))
	if err != nil {
		return fail(fmt.Errorf("capture: switch namespace of run %s: %w", l.Run(), err))
	}
	defer sw.Close()
	// The capture outlives every caller's context: Stop ends it, so that
	// the file ends with the end record.
	live, err := capture.StartLive(context.Background(), sw, ports, w, capture.LiveOptions{Exclude: opts.Exclude})
	if err != nil {
		return fail(err)
	}
	lc := &Capture{path: opts.Path, started: started, f: f, w: w, live: live}
	l.faults.OnFault(lc.record)
	return lc, nil
}

// captureTestbed describes l for the capture's testbed record, and the
// switch ports to capture on.
func (l *Lab) captureTestbed() (capture.TestbedInfo, map[int]capture.NodePort, error) {
	topo := l.Topology()
	tb := capture.TestbedInfo{Topology: topo.Name, Run: l.Run()}
	if len(topo.Nodes) > 0 {
		s := topo.Nodes[0].Settings
		tb.HeartbeatNS, tb.FailureTimeoutNS, tb.ElectionTimeoutNS = int64(s.Heartbeat), int64(s.FailureTimeout), int64(s.ElectionTimeout)
	}
	if unit := l.tb.TCPTimestampUnit(); unit > 0 {
		offset, maxErr, err := netem.MonotonicOffset()
		if err != nil {
			return tb, nil, fmt.Errorf("capture: run %s: %w", l.Run(), err)
		}
		tb.Clock = &capture.ClockInfo{MonotonicOffsetNS: offset.Nanoseconds(), OffsetErrorNS: maxErr.Nanoseconds(), TSUnitNS: unit.Nanoseconds()}
	}
	ports := map[int]capture.NodePort{}
	for _, sn := range l.Testbed().Nodes() {
		addr, err := netip.ParseAddr(sn.Addr)
		if err != nil {
			return tb, nil, fmt.Errorf("capture: node %s: %w", sn.Name, err)
		}
		id, err := l.ID(sn.Name)
		if err != nil {
			return tb, nil, fmt.Errorf("capture: %w", err)
		}
		tb.Nodes = append(tb.Nodes, capture.NodeInfo{Name: sn.Name, Index: sn.Index, ID: id, Addr: addr, Port: topo.Port})
		ports[sn.Index] = capture.NodePort{Veth: sn.SwitchVeth, MAC: netem.NodeMAC(addr)}
	}
	return tb, ports, nil
}

// record writes fault f as a record, unless the capture has stopped: the
// lab keeps its observers until it closes.
func (lc *Capture) record(f fault.Fault) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.stopped {
		return
	}
	err := lc.w.WriteRecord(FaultRecord(f))
	if err != nil && lc.err == nil {
		lc.err = err
	}
}

// FaultRecord is fault f as a capture's record.
func FaultRecord(f fault.Fault) capture.Record {
	rec := capture.Record{Time: f.Time, InForce: f.InForce, Kind: f.Kind, Nodes: f.Nodes,
		Peers: f.Peers, Groups: f.Groups, OneWay: f.OneWay, Links: f.Links, Mode: f.Mode, Detail: f.Detail}
	if f.Impair != nil && f.Kind.Impairs() {
		rec.Impair = &capture.RecordImpairment{DelayNS: int64(f.Impair.Delay), JitterNS: int64(f.Impair.Jitter), Loss: f.Impair.Loss}
	}
	if f.Clock != nil && f.Kind == fault.Clock {
		rec.Clock = &capture.RecordClock{OffsetNS: int64(f.Clock.Offset), RatePPM: f.Clock.RatePPM}
	}
	return rec
}

// Path returns the capture file's path.
func (lc *Capture) Path() string { return lc.path }

// Started returns when the capture started: its testbed record's time.
func (lc *Capture) Started() time.Time { return lc.started }

// Written returns how many packets are in the file so far, records
// included; frames wait up to the Writer's reorder window to be written.
func (lc *Capture) Written() uint64 { return lc.w.Stats().Written }

// Stop ends the capture once the frames that crossed the switch before it
// are read, writes the end record with the capture's counters (drops
// included), flushes and closes the file, and returns the counters. The
// file is then complete. Further calls return the first result.
func (lc *Capture) Stop() (capture.CaptureStats, error) {
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

// stopOnClose stops the capture for Lab.Close, which reports its error
// only if the capture was still running: a caller that stopped it has
// the error already.
func (lc *Capture) stopOnClose() error {
	lc.mu.Lock()
	stopped := lc.stopped
	lc.mu.Unlock()
	if stopped {
		return nil
	}
	_, err := lc.Stop()
	return err
}

// Capture returns the lab's capture, nil without BootOptions.Capture.
func (l *Lab) Capture() *Capture { return l.capture }

// Status describes the capture for the control API.
func (lc *Capture) Status() CaptureStatus {
	return CaptureStatus{File: lc.Path(), Started: lc.Started(), Written: lc.Written()}
}
