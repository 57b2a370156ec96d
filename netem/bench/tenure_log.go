//go:build linux

package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/topologies/fault"
)

// maxEventLog bounds how much of a node's event log a run reads: a node
// logs elections and membership changes, never heartbeats, so a run's log
// is kilobytes.
const maxEventLog = 64 << 20

// nodeLog is what a run read of one node's event log.
type nodeLog struct {
	node    string
	entries []logEntry
	err     error // why the log could not be read or parsed
}

// logEntry is one record of an event log, with its wall-clock time.
type logEntry struct {
	node.LogRecord
	wall time.Time // Time, parsed
	line int       // from 1
}

// readLogs reads every node's event log from the testbed, which must
// still be open (Close removes the logs), on this host's clock. The nodes
// may still be writing: a record cut short at the end is left out.
func readLogs(lb testbed) []nodeLog {
	var out []nodeLog
	for _, n := range lb.Nodes() {
		nl := nodeLog{node: n}
		data, ahead, err := lb.EventLog(n)
		if err == nil && len(data) > maxEventLog {
			err = fmt.Errorf("event log of %s: larger than %d MiB", n, maxEventLog>>20)
		}
		if err == nil {
			nl.entries, err = parseEventLog(data)
		}
		for i := range nl.entries {
			nl.entries[i].wall = nl.entries[i].wall.Add(-ahead)
		}
		nl.err = err
		out = append(out, nl)
	}
	return out
}

// readEventLog reads the file at path, at most maxEventLog bytes of it.
func readEventLog(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxEventLog+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxEventLog {
		return nil, fmt.Errorf("%s: larger than %d MiB", path, maxEventLog>>20)
	}
	return data, nil
}

// parseEventLog parses a node's event log as the lab keeps it: the JSON
// records of node/eventlog.go, one a line, among what else the process
// wrote to its stdout and stderr (the Go runtime's messages), which is
// skipped: lines that do not begin with '{'. A last line without its
// newline is a record still being written and is left out. A line that
// begins with '{' but is not a record (not a JSON object, no event, a time
// that is not RFC 3339, a negative mono_ns) is an error naming the line.
func parseEventLog(data []byte) ([]logEntry, error) {
	var out []logEntry
	for i := 1; len(data) > 0; i++ {
		line, rest, ok := bytes.Cut(data, []byte("\n"))
		if !ok {
			break // being written
		}
		data = rest
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var e logEntry
		if err := json.Unmarshal(line, &e.LogRecord); err != nil {
			return nil, fmt.Errorf("line %d: %v", i, err)
		}
		var err error
		switch {
		case e.Event == "":
			err = errors.New("no event")
		case e.MonoNS < 0:
			err = fmt.Errorf("mono_ns %d is negative", e.MonoNS)
		default:
			if e.wall, err = time.Parse(time.RFC3339Nano, e.Time); err != nil {
				err = fmt.Errorf("time %q is not RFC 3339", e.Time)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %s record: %v", i, e.Event, err)
		}
		e.line = i
		out = append(out, e)
	}
	return out, nil
}

// logSpans are the leads of one node by its event log: from each
// election_won (or leader_changed naming itself at a new epoch) until its
// status leaves normal, it follows another leader, it stops, or it wins
// again. A log's times are the node's monotonic clock (mono_ns, from when
// its process started its node: node_started), which the wall clock of its
// records puts on the capture's time line; a lead still open when the
// process's records end ends where the next process's begin, or never
// (the faults cut it: its process was killed).
//
// A clock fault with a rate runs the node's monotonic clock, and so
// mono_ns, at that rate from then on (from rated, zero when none did):
// from there the records' own times, which keep the host's clock, place
// them instead, and only the records before it estimate the origin.
func logSpans(name string, entries []logEntry, rated time.Time) []span {
	var out []span
	incs := incarnations(entries)
	for k, inc := range incs {
		pre := beforeRate(inc, rated)
		origin, ok := incarnationOrigin(pre), len(pre) > 0
		open := -1 // index in out of the lead in force
		end := func(t time.Time) {
			if open >= 0 {
				out[open].end = t
				open = -1
			}
		}
		for _, e := range inc {
			t := origin.Add(time.Duration(e.MonoNS))
			if !ok || !rated.IsZero() && !t.Before(rated) {
				t = e.wall
			}
			switch e.Event {
			case string(election.EventElectionWon):
				end(t)
				out = append(out, span{node: name, epoch: e.Epoch, start: t, end: forever})
				open = len(out) - 1
			case string(election.EventLeaderChanged):
				switch {
				case e.Leader != e.Node:
					end(t)
				case open < 0 || out[open].epoch != e.Epoch:
					end(t)
					out = append(out, span{node: name, epoch: e.Epoch, start: t, end: forever})
					open = len(out) - 1
				}
			case string(election.EventStatus):
				if e.To != election.StatusNormal.String() {
					end(t)
				}
			case "node_stopped":
				end(t)
			}
		}
		if open >= 0 && k+1 < len(incs) {
			// Left open by a process that was killed: over by the
			// time the next one started.
			next := incs[k+1][0].wall
			if pre := beforeRate(incs[k+1], rated); len(pre) > 0 {
				next = incarnationOrigin(pre)
			}
			out[open].end = maxTime(out[open].start, next)
		}
	}
	return out
}

// incarnations splits a log's entries by process: each node_started
// begins one.
func incarnations(entries []logEntry) [][]logEntry {
	var out [][]logEntry
	for i, e := range entries {
		if i == 0 || e.Event == "node_started" {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], e)
	}
	return out
}

// incarnationOrigin is the wall-clock time at which a process's mono_ns
// was 0. A record's time is when it was written, at or after the event it
// records, so each record's time less its mono_ns is at or after the
// origin, and the smallest is the best estimate: node_started's, written
// as the clock starts, is within microseconds of it.
func incarnationOrigin(inc []logEntry) time.Time {
	var o time.Time
	for i, e := range inc {
		if t := e.wall.Add(-time.Duration(e.MonoNS)); i == 0 || t.Before(o) {
			o = t
		}
	}
	return o
}

// beforeRate are the records of inc written before rated, when a clock
// rate began to run the node's monotonic clock off the host's; all of them
// when rated is zero.
func beforeRate(inc []logEntry, rated time.Time) []logEntry {
	if rated.IsZero() {
		return inc
	}
	i := 0
	for i < len(inc) && inc[i].wall.Before(rated) {
		i++
	}
	return inc[:i]
}

// rateStart is when the first clock fault with a rate struck each node.
func rateStart(faults []fault.Fault) map[string]time.Time {
	out := map[string]time.Time{}
	for _, f := range faults {
		if f.Kind != fault.Clock || f.Clock == nil || f.Clock.RatePPM == 0 {
			continue
		}
		for _, n := range f.Nodes {
			if _, ok := out[n]; !ok {
				out[n] = f.Time
			}
		}
	}
	return out
}

// logTenures are the tenures the nodes' event logs show, cut by faults,
// clipped to [from, to] and relative to origin as the capture's are, and
// one line for each node whose log could not be read.
func logTenures(logs []nodeLog, faults []fault.Fault, from, to, origin time.Time) ([]Tenure, []string) {
	var spans []span
	var problems []string
	rated := rateStart(faults)
	for _, nl := range logs {
		if nl.err != nil {
			problems = append(problems, fmt.Sprintf("%s's event log: %v", nl.node, nl.err))
			continue
		}
		spans = append(spans, logSpans(nl.node, nl.entries, rated[nl.node])...)
	}
	return spanTenures(cutSpans(spans, faults), from, to, origin), problems
}

// tenureSlack is what TenureSlack allows beyond the message delay: a node's
// wait for a core on a loaded host between deciding and writing.
const tenureSlack = 100 * time.Millisecond

// addLogTenures puts the tenures of the nodes' event logs next to the
// capture's in in, on the same time line (origin the measured fault), cut
// by the same faults.
func (ru *runner) addLogTenures(in *CheckInput, rep *capture.Report, faults []fault.Fault, origin time.Time) {
	in.LogTenures, in.LogProblems = logTenures(ru.logs, faults, ru.tenuresFrom(rep), ru.ended, origin)
	in.CompareLogs = true
	in.TenureSlack = messageDelay(ru.faults.owd, ru.backend) + tenureSlack
}
