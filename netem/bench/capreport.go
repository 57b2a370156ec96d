//go:build linux

package bench

import (
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/bullylab/bullylab/topologies/fault"
)

// AnalyzeCaptureReport analyses the capture at path (capture.AnalyzeFile
// with opts) and draws each of its elections as a bench draws its runs',
// from the trigger on, with the faults of its time, for
// report.WriteCaptures. It needs no testbed: the nodes are those the
// capture names, its lifelines in the analysis's order.
func AnalyzeCaptureReport(path string, opts capture.AnalyzeOptions) (*report.CaptureReport, error) {
	rep, err := capture.AnalyzeFile(path, opts)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(rep.Nodes))
	for i, n := range rep.Nodes {
		names[i] = n.Name
	}
	faults := recordFaults(rep.Records)
	cr := &report.CaptureReport{Source: path, Report: rep, Diagrams: make([]*report.Sequence, len(rep.Elections))}
	for i := range rep.Elections {
		el := &rep.Elections[i]
		if seq := sequenceOf(rep, el, names, faults, el.Trigger.Time); seq != nil {
			seq.Title = report.ElectionTitle(el)
			cr.Diagrams[i] = seq
		}
	}
	return cr, nil
}

// recordFaults are a capture's fault and lifecycle records as the faults
// the lab applied, which they were written from.
func recordFaults(recs []capture.Record) []fault.Fault {
	var out []fault.Fault
	for _, r := range recs {
		if r.Kind == capture.KindTestbed || r.Kind == capture.KindEnd {
			continue
		}
		f := fault.Fault{Time: r.Time, InForce: r.InForce, Kind: r.Kind, Nodes: r.Nodes, Peers: r.Peers, Groups: r.Groups,
			Links: r.Links, OneWay: r.OneWay, Mode: r.Mode, Detail: r.Detail}
		if im := r.Impair; im != nil {
			f.Impair = &fault.Impairment{Delay: time.Duration(im.DelayNS), Jitter: time.Duration(im.JitterNS), Loss: im.Loss}
		}
		if c := r.Clock; c != nil {
			f.Clock = &fault.ClockSkew{Offset: time.Duration(c.OffsetNS), RatePPM: c.RatePPM}
		}
		out = append(out, f)
	}
	return out
}
