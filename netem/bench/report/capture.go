package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/bench/results"
)

//go:embed capture.html.tmpl
var captureTemplate string

// captureTmpl is capture.html.tmpl with report.html.tmpl's style, parsed
// on first use.
var captureTmpl = sync.OnceValue(func() *template.Template {
	t := template.Must(reportTemplateParsed().Clone())
	return template.Must(t.New("capture").Parse(captureTemplate))
})

// CaptureReport is one capture analysed for WriteCaptures: the analysis,
// and a space-time diagram per election (Diagrams[i] of
// Report.Elections[i], nil where its timeline could not be drawn).
type CaptureReport struct {
	// Source is the capture file as given.
	Source   string
	Report   *capture.Report
	Diagrams []*Sequence
}

// WriteCapturesFile writes WriteCaptures' page to path, through a
// temporary file so that a failed write leaves no half page.
func WriteCapturesFile(path string, caps []*CaptureReport) error {
	if err := results.WriteOutputFile(path, func(w io.Writer) error { return WriteCaptures(w, caps) }); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

type captureData struct {
	Title         string
	Captures      []captureSection
	TriggerWindow string
}

type captureSection struct {
	Anchor, Source string
	R              *capture.Report
	// NoTestbed says the capture has no testbed record (one of real
	// hosts, or another tool's): its nodes are named as the analysis
	// found them.
	NoTestbed bool
	Warnings  []string
	Checks    []captureCheck
	Elections []captureElection
	Faults    []captureFault
	// FaultChecks are the checks of the fault records but clocks';
	// ClockChecks the clock records'.
	FaultChecks, ClockChecks []capture.FaultCheck
}

// captureCheck is one line of the checks' summary.
type captureCheck struct {
	What, Status, Text string
}

type captureElection struct {
	*capture.Election
	Title, At, Detection, TimeToLeader, Trigger string
	Diagram                                     template.HTML
	Note                                        string
}

type captureFault struct {
	At, Text string
}

// WriteCaptures writes one self-contained page of captures, from `up
// --capture`, a bench's runs or real hosts: per capture its nodes, the
// checks (authentication with or without the key, the faults and clocks
// on the wire, the anomalies), its elections as a table and its faults,
// then a space-time diagram of each election.
func WriteCaptures(w io.Writer, caps []*CaptureReport) error {
	d := captureData{TriggerWindow: capture.DefaultTriggerWindow.String()}
	var titles []string
	for i, c := range caps {
		s := captureSection{Anchor: fmt.Sprintf("capture-%d", i+1), Source: c.Source, R: c.Report, NoTestbed: c.Report.Topology == "",
			Warnings: c.Report.Warnings()}
		r := c.Report
		title := c.Source
		if r.Topology != "" {
			title = fmt.Sprintf("%s run %s", r.Topology, r.Run)
		}
		titles = append(titles, title)
		s.Checks = captureChecks(r)
		for _, fc := range r.FaultChecks {
			if fc.Check == capture.CheckClock {
				s.ClockChecks = append(s.ClockChecks, fc)
			} else {
				s.FaultChecks = append(s.FaultChecks, fc)
			}
		}
		for _, rec := range r.Records {
			if rec.Kind != capture.KindTestbed && rec.Kind != capture.KindEnd {
				s.Faults = append(s.Faults, captureFault{At: offsetText(rec.Time.Sub(r.Start)), Text: strings.TrimPrefix(rec.Comment(), "bullylab: ")})
			}
		}
		for j := range r.Elections {
			el := &r.Elections[j]
			ce := captureElection{Election: el, Title: ElectionTitle(el), At: offsetText(el.Start.Sub(r.Start)), Detection: nsText(el.DetectionNS),
				TimeToLeader: nsText(el.TimeToLeaderNS), Trigger: triggerText(el.Trigger)}
			if j < len(c.Diagrams) && c.Diagrams[j] != nil {
				svg, note := SequenceFigure(*c.Diagrams[j])
				ce.Diagram, ce.Note = template.HTML(svg), note
			}
			s.Elections = append(s.Elections, ce)
		}
		d.Captures = append(d.Captures, s)
	}
	d.Title = strings.Join(titles, ", ")
	return captureTmpl().ExecuteTemplate(w, "capture", d)
}

// ElectionTitle is the caption of an election's diagram: its number, its
// trigger, and its leader and time to leader, or that it did not
// converge.
func ElectionTitle(el *capture.Election) string {
	s := fmt.Sprintf("election %d, triggered by %s", el.N, triggerText(el.Trigger))
	switch {
	case el.Converged && el.TimeToLeaderNS != nil:
		return s + fmt.Sprintf(": leader %s (epoch %d) after %s", el.Leader, el.Epoch, results.FormatNS(*el.TimeToLeaderNS))
	case el.Leader != "":
		return s + fmt.Sprintf(": leader %s (epoch %d), not converged (%s not reached)", el.Leader, el.Epoch, strings.Join(el.Pending, ", "))
	}
	return s + ": no leader"
}

// captureChecks sum up what the capture lets be checked, one line each:
// the authentication, the faults and the clocks on the wire, the
// anomalies.
func captureChecks(r *capture.Report) []captureCheck {
	var out []captureCheck
	out = append(out, authCheck(r.Auth))
	var ok, unverified, clocks int
	var bad []string
	for _, fc := range r.FaultChecks {
		if fc.Check == capture.CheckClock {
			clocks++
		}
		switch {
		case !fc.OK:
			bad = append(bad, fc.Kind+" "+fc.Check)
		case !fc.Verified:
			unverified++
		default:
			ok++
		}
	}
	fc := captureCheck{What: "faults and clocks on the wire", Status: "ok"}
	switch {
	case len(r.FaultChecks) == 0:
		fc.Status, fc.Text = "none", "no fault record to check"
	case len(bad) > 0:
		fc.Status, fc.Text = "failed", fmt.Sprintf("%d failed (%s), %d ok, %d unverified", len(bad), strings.Join(bad, ", "), ok, unverified)
	default:
		fc.Text = fmt.Sprintf("%d ok, %d unverified, of %d checks (%d of clocks)", ok, unverified, len(r.FaultChecks), clocks)
		if ok == 0 {
			fc.Status = "unverified"
		}
	}
	out = append(out, fc)
	ck := captureCheck{What: "clocks", Status: "ok"}
	switch {
	case r.ClockErrorNS > 0:
		ck.Text = fmt.Sprintf("merged from several hosts' captures: times across hosts within ±%s", results.FormatNS(r.ClockErrorNS))
	case r.PathDelay != nil:
		ck.Text = fmt.Sprintf("send times from the nodes' TCP timestamps; the testbed's own one-way delay p50 %s, max %s over %d segments (error ±%s)",
			results.FormatNS(r.PathDelay.P50NS), results.FormatNS(r.PathDelay.MaxNS), r.PathDelay.Segments, results.FormatNS(r.PathDelay.ErrorNS))
	default:
		ck.Status, ck.Text = "unverified", "no send times (the capture has no clock information): arrows start at the switch's time"
	}
	out = append(out, ck)
	an := captureCheck{What: "anomalies", Status: "ok", Text: "none"}
	if n := len(r.Anomalies); n > 0 {
		kinds := map[string]int{}
		var order []string
		for _, a := range r.Anomalies {
			if kinds[a.Kind] == 0 {
				order = append(order, a.Kind)
			}
			kinds[a.Kind]++
		}
		var parts []string
		for _, k := range order {
			parts = append(parts, fmt.Sprintf("%d %s", kinds[k], k))
		}
		an.Status, an.Text = "found", strings.Join(parts, ", ")
	}
	return append(out, an)
}

// authCheck says what the authentication of the capture's connections
// shows: verified with the key, failed, or not verifiable (no key, or
// streams whose HELLO the capture lacks).
func authCheck(a *capture.AuthReport) captureCheck {
	c := captureCheck{What: "authentication"}
	switch {
	case a == nil:
		c.Status, c.Text = "none", "no authenticated frame: the nodes ran without a cluster key, or with --insecure"
	case !a.Key:
		c.Status, c.Text = "unverified", fmt.Sprintf("%d authenticated frames not verified: no cluster key given (--cluster-key FILE verifies them)", a.Frames)
	case !a.OK():
		c.Status = "failed"
		c.Text = fmt.Sprintf("%d frames failed verification, %d after them not accepted, %d HELLOs replayed; %d verified", a.Failed, a.AfterFailure, a.ReplayCount, a.Verified)
	default:
		c.Status = "ok"
		if a.Verified == 0 {
			c.Status = "unverified"
		}
		c.Text = fmt.Sprintf("%d frames verified with the cluster key, %d not verifiable", a.Verified, a.Unverified)
		if a.WithoutHello > 0 {
			c.Text += fmt.Sprintf(" (%d streams began before the capture: their HELLO is not in it)", a.WithoutHello)
		}
	}
	return c
}

func triggerText(t capture.Trigger) string {
	if t.Kind == "wire" {
		return "its first message (no record before it)"
	}
	s := t.Kind
	if len(t.Nodes) > 0 {
		s += " " + strings.Join(t.Nodes, ",")
	}
	return s
}

func nsText(ns *int64) string {
	if ns == nil {
		return "-"
	}
	return results.FormatNS(*ns)
}

// offsetText is a time from the capture's start: "+1.204s".
func offsetText(d time.Duration) string {
	return "+" + results.FormatNS(int64(d))
}
