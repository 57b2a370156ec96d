package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/bullylab/bullylab/capture"
)

// SpanCapture is what StopCapture made of the hosts' captures.
type SpanCapture struct {
	Path  string
	Merge capture.MergeResult
	// Start and End are the hosts' clock offsets measured once the span
	// was built and once the captures stopped; Merge took the
	// intersection of the two intervals (or, when the clocks moved apart
	// in between, the interval holding both).
	Start, End []ClockOffset
}

// fetchTimeout bounds fetching one host's capture or logs.
const fetchTimeout = 5 * time.Minute

// StopCapture stops every host's capture, measures the hosts' clocks
// again, fetches the captures and merges them, with the faults' records,
// into the file SpanOptions.Capture named; further calls return the first
// result. The merged file's end record carries the hosts' counters,
// summed.
func (sp *Span) StopCapture() (capture.CaptureStats, error) {
	sp.mu.Lock()
	done := sp.captured
	sp.mu.Unlock()
	if done != nil {
		return done.Merge.Stats, nil
	}
	if sp.capture == "" {
		return capture.CaptureStats{}, fmt.Errorf("span %s has no capture", sp.run)
	}
	n := len(sp.agents)
	files := make([][]byte, n)
	end := make([]ClockOffset, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for k := range sp.agents {
		wg.Go(func() { files[k], end[k], errs[k] = sp.fetchCapture(k) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return capture.CaptureStats{}, err
	}
	sc, err := sp.merge(files, end)
	if err != nil {
		return capture.CaptureStats{}, err
	}
	sp.mu.Lock()
	sp.captured = sc
	sp.mu.Unlock()
	return sc.Merge.Stats, nil
}

// fetchCapture stops host k's capture, measures its clock and reads the
// file.
func (sp *Span) fetchCapture(k int) ([]byte, ClockOffset, error) {
	a, c := sp.host(k)
	if a == nil || c == nil {
		return nil, ClockOffset{}, fmt.Errorf("host %s: not connected", sp.topo.Hosts[k].Name)
	}
	if _, err := a.StopCapture(); err != nil {
		return nil, ClockOffset{}, err
	}
	clock, err := a.ClockOffset(clockSamples)
	if err != nil {
		return nil, ClockOffset{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	data, err := c.Output(ctx, "cat "+shellQuote(sp.built[k].Capture))
	if err != nil {
		return nil, ClockOffset{}, fmt.Errorf("fetching the capture: %w", err)
	}
	return data, clock, nil
}

// merge writes the hosts' captures as one file.
func (sp *Span) merge(files [][]byte, end []ClockOffset) (*SpanCapture, error) {
	sc := &SpanCapture{Path: sp.capture, Start: sp.Clocks(), End: end}
	inputs := make([]capture.MergeInput, len(files))
	var recordBound time.Duration
	for k, data := range files {
		o := bothOffsets(sc.Start[k], end[k])
		inputs[k] = capture.MergeInput{Host: sp.topo.Hosts[k].Name, Nodes: sp.topo.Hosts[k].Nodes, R: bytes.NewReader(data), Offset: o.Offset, Bound: o.Bound}
		// The records were put on this clock with the first offsets.
		recordBound = max(recordBound, sc.Start[k].Bound+(o.Offset-sc.Start[k].Offset).Abs())
	}
	tb := capture.TestbedInfo{Topology: sp.topo.Name, Run: sp.run}
	for _, n := range sp.topo.Nodes {
		id, _ := sp.ID(n.Name)
		tb.Nodes = append(tb.Nodes, capture.NodeInfo{Name: n.Name, Index: n.Index, ID: id, Addr: n.Addr, Port: sp.topo.Port})
	}
	if len(sp.topo.Nodes) > 0 {
		s := sp.topo.Nodes[0].Settings
		tb.HeartbeatNS, tb.FailureTimeoutNS, tb.ElectionTimeoutNS = int64(s.Heartbeat), int64(s.FailureTimeout), int64(s.ElectionTimeout)
	}
	sp.mu.Lock()
	records := append([]capture.Record(nil), sp.records...)
	sp.mu.Unlock()
	f, err := os.Create(sp.capture)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	if sp.captureMode != 0 {
		if err := f.Chmod(sp.captureMode); err != nil {
			f.Close()
			return nil, fmt.Errorf("capture: %w", err)
		}
	}
	// The earliest host's start: every host captured from before any
	// node started. Merge moves it before the first item should the
	// clocks' error put one earlier.
	var start time.Time
	for k, b := range sp.built {
		if t := sp.local(k, b.CaptureStarted); !t.IsZero() && (start.IsZero() || t.Before(start)) {
			start = t
		}
	}
	res, err := capture.Merge(f, inputs, capture.MergeOptions{Testbed: tb, Records: records, RecordBound: recordBound, Start: start})
	err = errors.Join(err, f.Close())
	if err != nil {
		return nil, fmt.Errorf("capture %s: %w", sp.capture, err)
	}
	sc.Merge = res
	return sc, nil
}

// Capturing reports whether the span's hosts capture their nodes.
func (sp *Span) Capturing() bool { return sp.capture != "" }

// Captured returns what StopCapture made, nil before it.
func (sp *Span) Captured() *SpanCapture {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.captured
}

// bothOffsets is the offset both measurements allow: the intersection of
// their intervals, or when they do not meet (the clock moved between
// them), the interval holding both.
func bothOffsets(a, b ClockOffset) ClockOffset {
	lo, hi := max(a.Offset-a.Bound, b.Offset-b.Bound), min(a.Offset+a.Bound, b.Offset+b.Bound)
	if lo > hi {
		lo, hi = min(a.Offset-a.Bound, b.Offset-b.Bound), max(a.Offset+a.Bound, b.Offset+b.Bound)
	}
	return ClockOffset{Offset: lo + (hi-lo)/2, Bound: (hi - lo + 1) / 2, Samples: a.Samples + b.Samples}
}

// EventLog returns a node's event log, fetched from its host (all of the
// host's at once, kept), and how far the host's clock is ahead of this
// one's. It must be called before Close, which removes the logs.
func (sp *Span) EventLog(name string) ([]byte, time.Duration, error) {
	k, ok := sp.hostOf[name]
	if !ok {
		return nil, 0, fmt.Errorf("run %s has no node %q", sp.run, name)
	}
	sp.logMu.Lock()
	defer sp.logMu.Unlock()
	if sp.logs == nil {
		sp.logs = make([]map[string][]byte, len(sp.agents))
		sp.logErrs = make([]error, len(sp.agents))
	}
	if sp.logs[k] == nil && sp.logErrs[k] == nil {
		if a, _ := sp.host(k); a == nil {
			sp.logErrs[k] = fmt.Errorf("host %s: not connected", sp.topo.Hosts[k].Name)
		} else {
			sp.logs[k], sp.logErrs[k] = a.Logs()
		}
	}
	if err := sp.logErrs[k]; err != nil {
		return nil, 0, err
	}
	data, ok := sp.logs[k][name]
	if !ok {
		return nil, 0, fmt.Errorf("host %s sent no event log of %s", sp.topo.Hosts[k].Name, name)
	}
	return data, sp.clocks[k].Offset, nil
}
