package capture

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// durUnit is the unit of a column of durations: ms, or s when the
// largest reaches 10 s, so that a column holds one unit, named in its
// header, and its numbers align on the point.
type durUnit struct {
	name     string
	scale    float64
	decimals int
}

// pickDurUnit is the unit of a column of ds, to 10 µs in ms (as the
// analysis times elections) and to the ms in s.
func pickDurUnit(ds ...*int64) durUnit {
	var top int64
	for _, d := range ds {
		if d != nil {
			top = max(top, *d)
		}
	}
	if top >= int64(10*time.Second) {
		return durUnit{"s", 1e9, 3}
	}
	return durUnit{"ms", 1e6, 2}
}

func (u durUnit) cell(d *int64) string {
	if d == nil {
		return "-"
	}
	return strconv.FormatFloat(float64(*d)/u.scale, 'f', u.decimals, 64)
}

// textTable is one table of the text report.
type textTable struct {
	title  string
	header []string // none when nil
	rows   [][]string
}

// write prints t after a blank line and its title, in the table style of
// bullylab's other commands (bench, compare, status): light box drawing,
// headers as written, so lower case with the wire's type names (HALT_ACK)
// intact.
func (t *textTable) write(w io.Writer) error {
	fmt.Fprintf(w, "\n%s\n", t.title)
	tb := tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleLight)})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
	)
	tb.Options(tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: t.align()}))
	if t.header != nil {
		tb.Header(t.header)
	}
	if err := tb.Bulk(t.rows); err != nil {
		return err
	}
	return tb.Render()
}

// align right-aligns the columns of numbers, as bullylab's other tables
// do: those whose every cell is a number, a count pair such as 3/0, an
// offset such as +500.244 or "-".
func (t *textTable) align() []tw.Align {
	if len(t.rows) == 0 {
		return nil
	}
	align := make([]tw.Align, len(t.rows[0]))
	for c := range align {
		align[c] = tw.AlignRight
		for _, row := range t.rows {
			if c < len(row) && !numeric(row[c]) {
				align[c] = tw.AlignLeft
				break
			}
		}
	}
	return align
}

func numeric(cell string) bool {
	if cell == "-" {
		return true
	}
	cell = strings.TrimPrefix(cell, "+")
	for _, part := range strings.Split(cell, "/") {
		if _, err := strconv.ParseFloat(part, 64); err != nil {
			return false
		}
	}
	return true
}

func typeCells(tc TypeCounts, types []wire.Type) []string {
	var cells []string
	for _, ty := range types {
		cells = append(cells, fmt.Sprint(tc.Get(ty)))
	}
	return cells
}

var (
	electionTypes     = []wire.Type{wire.TypeElection, wire.TypeAnswer, wire.TypeHalt, wire.TypeHaltAck, wire.TypeReject, wire.TypeCoordinator}
	ringElectionTypes = []wire.Type{wire.TypeRingElection, wire.TypeElected}
)

// shownElectionTypes are the election types the tables of a capture of
// algorithm alg have columns for: its algorithm's, both for a mixed
// capture, Bully's for one without election messages.
func shownElectionTypes(alg string) []wire.Type {
	switch alg {
	case wire.AlgorithmRing:
		return ringElectionTypes
	case AlgorithmMixed:
		return append(slices.Clone(electionTypes), ringElectionTypes...)
	}
	return electionTypes
}

// shownTypes are the types the per-node table of a capture of algorithm
// alg has columns for: every type but the election types of the other
// algorithm.
func shownTypes(alg string) []wire.Type {
	shown := shownElectionTypes(alg)
	return slices.DeleteFunc(slices.Clone(wire.Types), func(t wire.Type) bool {
		return IsElectionMessage(t) && !slices.Contains(shown, t)
	})
}

func typeNames(types []wire.Type) []string {
	var s []string
	for _, t := range types {
		s = append(s, t.String())
	}
	return s
}

// framesSummary is the frames the dissector decoded from the TCP streams,
// of which the election messages (ELECTION .. COORDINATOR, RING_ELECTION,
// ELECTED), HEARTBEATs and HELLOs.
func framesSummary(r *Report) string {
	s := fmt.Sprintf("%d (%d election messages, %d HEARTBEATs", r.Frames, r.ElectionMessages, r.Messages.Heartbeat)
	if r.Messages.Hello > 0 {
		s += fmt.Sprintf(", %d HELLOs", r.Messages.Hello)
	}
	return s + ")"
}

// algorithmSummary names the election algorithm of the capture's
// messages.
func algorithmSummary(alg string) string {
	switch alg {
	case "":
		return "- (no election message)"
	case AlgorithmMixed:
		return "mixed: Bully's and the ring's messages (an anomaly)"
	}
	return alg
}

// packetsSummary is every packet of the file: the captured ones, each of
// which holds any number of frames (a TCP segment) or none (a pure ACK),
// and the records.
func packetsSummary(r *Report) string {
	return fmt.Sprintf("%d (%d of them fault and lifecycle records)", r.Packets, len(r.Records))
}

// liveCaptureSummary is the end record's counters of the live captures
// that wrote the file: the kernel's count of the frames their sockets
// passed, drops included, which holds frames the writer did not keep;
// and what the writer did with them.
func liveCaptureSummary(c *CaptureStats) string {
	s := fmt.Sprintf("%d frames passed its sockets' filters, %d of them dropped by the kernel for lack of ring space", c.Packets, c.Drops)
	if c.Unmatched+c.WrongSource > 0 {
		s += fmt.Sprintf(", %d not written (%d from no node's port, %d with another source MAC)", c.Unmatched+c.WrongSource, c.Unmatched, c.WrongSource)
	}
	return s + fmt.Sprintf("; %d packets written, %d of them late (out of order)", c.Written, c.Late)
}

func authSummary(a *AuthReport) string {
	if !a.Key {
		return fmt.Sprintf("%d frames authenticated (not verified: no key)", a.Frames)
	}
	s := fmt.Sprintf("%d frames verified, %d failed, ", a.Verified, a.Failed)
	if a.AfterFailure > 0 {
		// Their tags may verify, but the receiver closed the connection
		// at the failure before them: counting them verified would say
		// the nodes took them in.
		s += fmt.Sprintf("%d not accepted (after a failure on their connection), ", a.AfterFailure)
	}
	s += fmt.Sprintf("%d not verified; %d streams opened by a HELLO", a.Unverified, a.Streams)
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
	sw := &stickyWriter{w: w}
	for _, table := range []func() *textTable{
		r.summaryTable, r.electionsTable, r.nodesTable, r.anomaliesTable, r.faultChecksTable,
		r.authFailuresTable, r.replaysTable, r.streamErrorsTable, r.timelineTable,
	} {
		if t := table(); t != nil {
			if err := t.write(sw); err != nil {
				return err
			}
		}
		if sw.err != nil {
			return sw.err
		}
	}
	return nil
}

// stickyWriter keeps the first error of its writes: the table writer
// drops them, and a report cut short by a full disk must not pass for
// written.
type stickyWriter struct {
	w   io.Writer
	err error
}

func (s *stickyWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	s.err = err
	return n, err
}

// summaryTable is the report in a few lines, with a line for each of
// authentication, the capture's counters, truncation and TCP trouble when
// there is something to say.
func (r *Report) summaryTable() *textTable {
	leader := "-"
	if r.Final.Leader != "" {
		leader = fmt.Sprintf("%s (epoch %d)", r.Final.Leader, r.Final.Epoch)
	}
	conv := "yes"
	if !r.Final.Converged {
		conv = "no: " + r.Final.Detail
	}
	rows := [][]string{
		{"file", r.File},
		{"topology", strings.TrimSpace(r.Topology + " " + r.Run)},
		{"span", fmt.Sprintf("%s .. %s (%v)", r.Start.Format(time.RFC3339Nano), r.End.Format("15:04:05.000000"), time.Duration(r.DurationNS).Round(time.Millisecond))},
		{"packets in file", packetsSummary(r)},
		{"frames decoded", framesSummary(r)},
		{"nodes", fmt.Sprint(len(r.Nodes))},
		{"algorithm", algorithmSummary(r.Algorithm)},
		{"elections", fmt.Sprint(len(r.Elections))},
		{"final leader", leader},
		{"converged", conv},
		{"anomalies", fmt.Sprint(len(r.Anomalies))},
	}
	return &textTable{title: "Summary", rows: append(rows, r.summaryExtras()...)}
}

// summaryExtras are the summary's optional lines.
func (r *Report) summaryExtras() [][]string {
	var rows [][]string
	if a := r.Auth; a != nil {
		rows = append(rows, []string{"authentication", authSummary(a)})
	}
	if r.Capture != nil {
		rows = append(rows, []string{"live capture", liveCaptureSummary(r.Capture)})
	}
	if t := r.Truncated; t != nil {
		rows = append(rows, []string{"truncated", fmt.Sprintf("the file ends inside a block at byte %d; these are its first %d packets (bytes 0..%d)",
			t.SizeBytes, t.Packets, t.WholeBytes)})
	}
	s := r.Stream
	if s.Corrupt+s.Gaps+s.Incomplete+s.Retransmitted+s.OutOfOrder > 0 {
		rows = append(rows, []string{"tcp", fmt.Sprintf("%d retransmitted, %d out of order, %d corrupt frames, %d gaps, %d cut streams",
			s.Retransmitted, s.OutOfOrder, s.Corrupt, s.Gaps, s.Incomplete)})
	}
	return rows
}

// electionsTable lists the elections with their election messages by type.
func (r *Report) electionsTable() *textTable {
	var dets, ttls []*int64
	for _, e := range r.Elections {
		dets, ttls = append(dets, e.DetectionNS), append(ttls, e.TimeToLeaderNS)
	}
	det, ttl := pickDurUnit(dets...), pickDurUnit(ttls...)
	types := shownElectionTypes(r.Algorithm)
	var rows [][]string
	for _, e := range r.Elections {
		row := []string{fmt.Sprint(e.N), e.Start.Format("15:04:05.000"), triggerCell(&e), det.cell(e.DetectionNS), ttl.cell(e.TimeToLeaderNS), leaderCell(&e), fmt.Sprint(e.Epoch)}
		rows = append(rows, append(row, typeCells(e.Messages, types)...))
	}
	header := []string{"#", "start", "trigger", "detection (" + det.name + ")", "time to leader (" + ttl.name + ")", "leader", "epoch"}
	return &textTable{"Elections", append(header, typeNames(types)...), rows}
}

// triggerCell says what started e: a record's kind and nodes, or its
// first message.
func triggerCell(e *Election) string {
	if e.Trigger.Kind == "wire" {
		return fmt.Sprintf("%s %s (%s)", e.First.Type, e.First.From, e.First.Reason)
	}
	trig := e.Trigger.Kind
	if len(e.Trigger.Nodes) > 0 {
		trig += " " + strings.Join(e.Trigger.Nodes, ",")
	}
	return trig
}

// leaderCell names e's leader, and the nodes it had yet to reach if it
// did not converge.
func leaderCell(e *Election) string {
	l := e.Leader
	if l == "" {
		l = "-"
	}
	if !e.Converged && e.Leader != "" {
		l += " (pending " + strings.Join(e.Pending, ",") + ")"
	}
	return l
}

// nodesTable lists the nodes with what each sent and received, by type.
func (r *Report) nodesTable() *textTable {
	types := shownTypes(r.Algorithm)
	var rows [][]string
	for _, n := range r.Nodes {
		live := "down"
		if n.LiveAtEnd {
			live = "live"
		}
		row := []string{n.Name, n.Addr.String(), n.ID.String()[:8], live}
		for _, t := range types {
			row = append(row, fmt.Sprintf("%d/%d", n.Sent.Get(t), n.Received.Get(t)))
		}
		rows = append(rows, row)
	}
	return &textTable{"Per node (sent/received)", append([]string{"node", "addr", "id", "at end"}, typeNames(types)...), rows}
}

// anomaliesTable lists the anomalies, or says there are none.
func (r *Report) anomaliesTable() *textTable {
	var rows [][]string
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
	return &textTable{"Anomalies", []string{"kind", "election", "time", "packet", "detail"}, rows}
}

// faultChecksTable sets what each fault asked next to what the capture
// observed, if the capture has faults to check.
func (r *Report) faultChecksTable() *textTable {
	var rows [][]string
	if pd := r.PathDelay; pd != nil {
		rows = append(rows, []string{"-", "-", "path", "info", fmt.Sprintf("one-way delay without an injected one: p50 %s, p99 %s, max %s (%d segments, each ±%s)",
			fmtDur(pd.P50NS), fmtDur(pd.P99NS), fmtDur(pd.MaxNS), pd.Segments, fmtDur(pd.ErrorNS))})
	}
	for _, c := range r.FaultChecks {
		verdict := "ok"
		switch {
		case !c.OK:
			verdict = "FAILED"
		case !c.Verified:
			verdict = "unverified"
		}
		rows = append(rows, []string{fmt.Sprint(c.Packet), c.Kind, c.Check, verdict, c.Detail})
	}
	if len(rows) == 0 {
		return nil
	}
	return &textTable{"Faults on the wire", []string{"record", "fault", "check", "verdict", "observed"}, rows}
}

// authFailuresTable lists the frames that failed authentication, if any.
func (r *Report) authFailuresTable() *textTable {
	a := r.Auth
	if a == nil || len(a.Failures) == 0 {
		return nil
	}
	var rows [][]string
	for _, f := range a.Failures {
		rows = append(rows, []string{fmt.Sprint(f.Packet), f.Stream, fmt.Sprint(f.Frame), f.Type, f.From, f.Reason})
	}
	title := "Authentication failures"
	if n := int64(len(a.Failures)); n < a.Failed {
		title = fmt.Sprintf("Authentication failures (%d listed of %d frames that failed)", n, a.Failed)
	}
	return &textTable{title, []string{"packet", "stream", "frame", "type", "from", "reason"}, rows}
}

// replaysTable lists the replayed HELLOs, if any.
func (r *Report) replaysTable() *textTable {
	a := r.Auth
	if a == nil || len(a.Replays) == 0 {
		return nil
	}
	var rows [][]string
	for _, p := range a.Replays {
		rows = append(rows, []string{fmt.Sprint(p.Packet), p.Stream, p.From, fmt.Sprintf("packet %d, %s", p.FirstPacket, p.FirstStream)})
	}
	return &textTable{"Replayed HELLOs (nonce seen before)", []string{"packet", "stream", "from", "first seen"}, rows}
}

// streamErrorsTable lists the stream errors, if any.
func (r *Report) streamErrorsTable() *textTable {
	if len(r.StreamErrors) == 0 {
		return nil
	}
	var rows [][]string
	for _, e := range r.StreamErrors {
		rows = append(rows, []string{fmt.Sprint(e.Packet), e.Stream, fmt.Sprint(e.Offset), e.Error})
	}
	return &textTable{"Stream errors", []string{"packet", "stream", "offset", "error"}, rows}
}

// timelineTable lists the messages of the election in Timeline, if set.
func (r *Report) timelineTable() *textTable {
	tl := r.Timeline
	if tl == nil {
		return nil
	}
	var offs []*int64
	for i := range tl.Entries {
		offs = append(offs, &tl.Entries[i].OffsetNS)
	}
	// To the µs, as the entries' offsets are read.
	u := pickDurUnit(offs...)
	u.decimals++
	var rows [][]string
	for _, e := range tl.Entries {
		rows = append(rows, []string{"+" + u.cell(&e.OffsetNS), e.From + " > " + e.To, e.Type, fmt.Sprint(e.Epoch), e.Reason, fmt.Sprint(e.Packet)})
	}
	return &textTable{fmt.Sprintf("Election %d timeline (offset from its trigger)", tl.Election), []string{"offset (" + u.name + ")", "from > to", "type", "epoch", "reason", "packet"}, rows}
}
