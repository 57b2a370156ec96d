package capture

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/olekukonko/tablewriter"
)

func ms(d *int64) string {
	if d == nil {
		return "-"
	}
	return time.Duration(*d).Round(10 * time.Microsecond).String()
}

func table(w io.Writer, title string, header []string, rows [][]string) error {
	fmt.Fprintf(w, "\n%s\n", title)
	t := tablewriter.NewWriter(w)
	if header != nil {
		t.Header(header)
	}
	if err := t.Bulk(rows); err != nil {
		return err
	}
	return t.Render()
}

func typeCells(tc TypeCounts, types []wire.Type) []string {
	var cells []string
	for _, ty := range types {
		cells = append(cells, fmt.Sprint(tc.Get(ty)))
	}
	return cells
}

var electionTypes = []wire.Type{wire.TypeElection, wire.TypeAnswer, wire.TypeHalt, wire.TypeHaltAck, wire.TypeReject, wire.TypeCoordinator}

func typeNames(types []wire.Type) []string {
	var s []string
	for _, t := range types {
		s = append(s, t.String())
	}
	return s
}

func framesSummary(r *Report) string {
	s := fmt.Sprintf("%d (%d election messages, %d heartbeats", r.Frames, r.ElectionMessages, r.Messages.Heartbeat)
	if r.Messages.Hello > 0 {
		s += fmt.Sprintf(", %d HELLOs", r.Messages.Hello)
	}
	return s + ")"
}

func authSummary(a *AuthReport) string {
	if !a.Key {
		return fmt.Sprintf("%d frames authenticated (not verified: no key)", a.Frames)
	}
	s := fmt.Sprintf("%d frames verified, %d failed, %d not verified; %d streams opened by a HELLO", a.Verified, a.Failed, a.Unverified, a.Streams)
	if a.WithoutHello > 0 {
		s += fmt.Sprintf(", %d began mid-connection (not verified)", a.WithoutHello)
	}
	if a.Lost > 0 {
		s += fmt.Sprintf(", %d lost their place after missing bytes", a.Lost)
	}
	if a.ReplayCount > 0 {
		s += fmt.Sprintf("; %d HELLOs replayed", a.ReplayCount)
	}
	return s
}

// WriteText prints the report as tables: summary, elections, per node
// counts, anomalies, authentication failures and replays (if any), stream
// errors (if any) and the timeline (if set).
func (r *Report) WriteText(w io.Writer) error {
	leader := "-"
	if r.Final.Leader != "" {
		leader = fmt.Sprintf("%s (epoch %d)", r.Final.Leader, r.Final.Epoch)
	}
	conv := "yes"
	if !r.Final.Converged {
		conv = "no: " + r.Final.Detail
	}
	summary := [][]string{
		{"file", r.File},
		{"topology", strings.TrimSpace(r.Topology + " " + r.Run)},
		{"span", fmt.Sprintf("%s .. %s (%v)", r.Start.Format(time.RFC3339Nano), r.End.Format("15:04:05.000000"), time.Duration(r.DurationNS).Round(time.Millisecond))},
		{"packets", fmt.Sprint(r.Packets)},
		{"frames", framesSummary(r)},
		{"nodes", fmt.Sprint(len(r.Nodes))},
		{"elections", fmt.Sprint(len(r.Elections))},
		{"final leader", leader},
		{"converged", conv},
		{"anomalies", fmt.Sprint(len(r.Anomalies))},
	}
	if a := r.Auth; a != nil {
		summary = append(summary, []string{"authentication", authSummary(a)})
	}
	if r.Capture != nil {
		summary = append(summary, []string{"capture", fmt.Sprintf("%d packets, %d dropped, %d late", r.Capture.Packets, r.Capture.Drops, r.Capture.Late)})
	}
	if t := r.Truncated; t != nil {
		summary = append(summary, []string{"truncated", fmt.Sprintf("the file ends inside a block at byte %d; these are its first %d packets (bytes 0..%d)",
			t.SizeBytes, t.Packets, t.WholeBytes)})
	}
	s := r.Stream
	if s.Corrupt+s.Gaps+s.Incomplete+s.Retransmitted+s.OutOfOrder > 0 {
		summary = append(summary, []string{"tcp", fmt.Sprintf("%d retransmitted, %d out of order, %d corrupt frames, %d gaps, %d cut streams",
			s.Retransmitted, s.OutOfOrder, s.Corrupt, s.Gaps, s.Incomplete)})
	}
	if err := table(w, "Summary", nil, summary); err != nil {
		return err
	}

	var rows [][]string
	for _, e := range r.Elections {
		trig := e.Trigger.Kind
		if len(e.Trigger.Nodes) > 0 {
			trig += " " + strings.Join(e.Trigger.Nodes, ",")
		}
		if e.Trigger.Kind == "wire" {
			trig = fmt.Sprintf("%s %s (%s)", e.First.Type, e.First.From, e.First.Reason)
		}
		l := e.Leader
		if l == "" {
			l = "-"
		}
		if !e.Converged && e.Leader != "" {
			l += " (pending " + strings.Join(e.Pending, ",") + ")"
		}
		row := []string{fmt.Sprint(e.N), e.Start.Format("15:04:05.000"), trig, ms(e.DetectionNS), ms(e.TimeToLeaderNS), l, fmt.Sprint(e.Epoch)}
		rows = append(rows, append(row, typeCells(e.Messages, electionTypes)...))
	}
	if err := table(w, "Elections", append([]string{"#", "start", "trigger", "detection", "to leader", "leader", "epoch"}, typeNames(electionTypes)...), rows); err != nil {
		return err
	}

	rows = rows[:0]
	for _, n := range r.Nodes {
		live := "down"
		if n.LiveAtEnd {
			live = "live"
		}
		row := []string{n.Name, n.Addr.String(), n.ID.String()[:8], live}
		for _, t := range wire.Types {
			row = append(row, fmt.Sprintf("%d/%d", n.Sent.Get(t), n.Received.Get(t)))
		}
		rows = append(rows, row)
	}
	if err := table(w, "Per node (sent/received)", append([]string{"node", "addr", "id", "at end"}, typeNames(wire.Types)...), rows); err != nil {
		return err
	}

	rows = rows[:0]
	for _, a := range r.Anomalies {
		el := "-"
		if a.Election > 0 {
			el = fmt.Sprint(a.Election)
		}
		rows = append(rows, []string{a.Kind, el, a.Time.Format("15:04:05.000"), fmt.Sprint(a.Packet), a.Detail})
	}
	if len(rows) == 0 {
		rows = append(rows, []string{"none", "", "", "", ""})
	}
	if err := table(w, "Anomalies", []string{"kind", "election", "time", "packet", "detail"}, rows); err != nil {
		return err
	}

	if a := r.Auth; a != nil && len(a.Failures) > 0 {
		rows = rows[:0]
		for _, f := range a.Failures {
			rows = append(rows, []string{fmt.Sprint(f.Packet), f.Stream, fmt.Sprint(f.Frame), f.Type, f.From, f.Reason})
		}
		title := "Authentication failures"
		if n := int64(len(a.Failures)); n < a.Failed {
			title = fmt.Sprintf("Authentication failures (%d listed of %d frames that failed)", n, a.Failed)
		}
		if err := table(w, title, []string{"packet", "stream", "frame", "type", "from", "reason"}, rows); err != nil {
			return err
		}
	}
	if a := r.Auth; a != nil && len(a.Replays) > 0 {
		rows = rows[:0]
		for _, p := range a.Replays {
			rows = append(rows, []string{fmt.Sprint(p.Packet), p.Stream, p.From, fmt.Sprintf("packet %d, %s", p.FirstPacket, p.FirstStream)})
		}
		if err := table(w, "Replayed HELLOs (nonce seen before)", []string{"packet", "stream", "from", "first seen"}, rows); err != nil {
			return err
		}
	}

	if len(r.StreamErrors) > 0 {
		rows = rows[:0]
		for _, e := range r.StreamErrors {
			rows = append(rows, []string{fmt.Sprint(e.Packet), e.Stream, fmt.Sprint(e.Offset), e.Error})
		}
		if err := table(w, "Stream errors", []string{"packet", "stream", "offset", "error"}, rows); err != nil {
			return err
		}
	}

	if tl := r.Timeline; tl != nil {
		rows = rows[:0]
		for _, e := range tl.Entries {
			rows = append(rows, []string{"+" + time.Duration(e.OffsetNS).Round(time.Microsecond).String(), e.From + " > " + e.To, e.Type, fmt.Sprint(e.Epoch), e.Reason, fmt.Sprint(e.Packet)})
		}
		if err := table(w, fmt.Sprintf("Election %d timeline (offset from its trigger)", tl.Election), []string{"offset", "from > to", "type", "epoch", "reason", "packet"}, rows); err != nil {
			return err
		}
	}
	return nil
}
