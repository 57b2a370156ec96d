package results

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/yamlfile"
	"github.com/bullylab/bullylab/wire"
	"github.com/bullylab/bullylab/wire/bounded"
)

// Schema names the version of results.json this package writes and reads.
const Schema = "bullylab.bench/v1"

// Results is results.json: one bench invocation. See the package
// documentation for every field.
type Results struct {
	Schema    string           `json:"schema"`
	Tool      Tool             `json:"tool"`
	Host      Host             `json:"host"`
	Started   time.Time        `json:"started"`
	Finished  time.Time        `json:"finished"`
	Topology  TopologyInfo     `json:"topology"`
	Seed      int64            `json:"seed"`
	Settings  RunSettings      `json:"settings"`
	Scenarios []ScenarioResult `json:"scenarios"`
	// Partial, when not nil, says the bench stopped before every run
	// finished: Scenarios hold the runs that did.
	Partial *Partial `json:"partial,omitempty"`
}

// Partial is why a bench holds fewer runs than it planned.
type Partial struct {
	// Reason is why it stopped, such as "interrupted by SIGINT".
	Reason string `json:"reason"`
	// RunsPlanned is every scenario's runs; RunsDone those in Scenarios.
	RunsPlanned int `json:"runs_planned"`
	RunsDone    int `json:"runs_done"`
}

// String is the partial bench in one line: "partial: interrupted by
// SIGINT after 3 of 10 runs".
func (p *Partial) String() string {
	return fmt.Sprintf("partial: %s after %d of %d runs", p.Reason, p.RunsDone, p.RunsPlanned)
}

// RunsDone counts the runs in r.
func (r *Results) RunsDone() int {
	n := 0
	for _, sc := range r.Scenarios {
		n += len(sc.Runs)
	}
	return n
}

// Tool is the program that measured.
type Tool struct {
	Name      string `json:"name"`
	Version   string `json:"version"`
	GoVersion string `json:"go_version"`
	Revision  string `json:"revision,omitempty"`
}

// Host is the machine that measured.
type Host struct {
	OS     string `json:"os"`
	Arch   string `json:"arch"`
	Kernel string `json:"kernel"`
	CPU    string `json:"cpu"`
	Cores  int    `json:"cores"`
}

// TopologyInfo is the testbed every run was built from.
type TopologyInfo struct {
	Name   string `json:"name"`
	Source string `json:"source,omitempty"`
	Nodes  int    `json:"nodes"`
	// Settings are the election timings every node uses, or most nodes
	// when NodeSettings lists exceptions.
	Settings     Timing            `json:"settings"`
	NodeSettings map[string]Timing `json:"node_settings,omitempty"`
	// Overrides are the timings bench --set gave every node over the
	// topology's own, in Settings already.
	Overrides []SettingOverride `json:"overrides,omitempty"`
}

// SettingOverride is a timing bench --set gave every node: Name as a
// topology file names it (failure_timeout...), the value set and the one
// most of the topology's nodes had.
type SettingOverride struct {
	Name       string `json:"name"`
	ValueNS    int64  `json:"value_ns"`
	TopologyNS int64  `json:"topology_ns"`
}

// OverridesOf are sets as results.json records them.
func OverridesOf(sets []topologies.SettingOverride) []SettingOverride {
	var out []SettingOverride
	for _, s := range sets {
		out = append(out, SettingOverride{Name: s.Name, ValueNS: int64(s.Value), TopologyNS: int64(s.Was)})
	}
	return out
}

// OverridesText is the overrides in a few words, "failure_timeout 600ms
// (topology: 500ms) by --set", "" without any.
func OverridesText(overrides []SettingOverride) string {
	if len(overrides) == 0 {
		return ""
	}
	parts := make([]string, len(overrides))
	for i, o := range overrides {
		parts[i] = fmt.Sprintf("%s %v (topology: %v)", o.Name, time.Duration(o.ValueNS), time.Duration(o.TopologyNS))
	}
	return strings.Join(parts, ", ") + " by --set"
}

// Timing is a node's election timing.
type Timing struct {
	HeartbeatNS       int64 `json:"heartbeat_ns"`
	FailureTimeoutNS  int64 `json:"failure_timeout_ns"`
	ElectionTimeoutNS int64 `json:"election_timeout_ns"`
	// DetectionStaggerNS is absent from benches before the stagger existed.
	DetectionStaggerNS int64 `json:"detection_stagger_ns,omitempty"`
}

// RunSettings is how the bench was asked to run.
type RunSettings struct {
	Runs     int    `json:"runs"`
	Scenario string `json:"scenario"`
	// Params are the scenario parameters given (k, delays, loss, faults).
	Params map[string]string `json:"params,omitempty"`
	// Backend is the impairment backend, netem or nfqueue.
	Backend string `json:"impair_backend,omitempty"`
	// SLE2BoundNS is the convergence bound the liveness check applied.
	SLE2BoundNS int64 `json:"sle2_bound_ns"`
}

// ScenarioResult is one scenario's runs and their summary.
type ScenarioResult struct {
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Source      string            `json:"source,omitempty"`
	// Algorithm is the election the runs ran (topologies.Algorithms);
	// DecodeResults reads a results.json from before there was a choice,
	// which has none, as Bully's.
	Algorithm string `json:"algorithm"`
	// Definition is the scenario as a file (scenario.Format), so results
	// say what ran even after the built-ins change.
	Definition string  `json:"definition,omitempty"`
	Runs       []Run   `json:"runs"`
	Summary    Summary `json:"summary"`
}

// Key identifies the scenario and its algorithm among the variants of
// one bench: the scenario's key (ScenarioKey), then " algorithm=NAME"
// unless the algorithm is Bully, so that the keys of the benches before
// there was a choice, all Bully's, stay as they were.
func (s *ScenarioResult) Key() string {
	if a := s.AlgorithmName(); a != topologies.DefaultAlgorithm {
		return s.ScenarioKey() + " algorithm=" + a
	}
	return s.ScenarioKey()
}

// ScenarioKey identifies the scenario alone: its name and labels.
func (s *ScenarioResult) ScenarioKey() string { return scenario.Key(s.Name, s.Labels) }

// AlgorithmName is the election the runs ran: Algorithm, or Bully when
// it is empty.
func (s *ScenarioResult) AlgorithmName() string {
	if s.Algorithm == "" {
		return topologies.DefaultAlgorithm
	}
	return s.Algorithm
}

// Algorithms lists the algorithms of r's scenarios, in order of first
// appearance.
func (r *Results) Algorithms() []string {
	var as []string
	for i := range r.Scenarios {
		if a := r.Scenarios[i].AlgorithmName(); !slices.Contains(as, a) {
			as = append(as, a)
		}
	}
	return as
}

// ResultOf starts the results of sc run on algorithm: everything but the
// runs.
func ResultOf(sc *scenario.Scenario, algorithm string) (ScenarioResult, error) {
	def, err := scenario.Format(sc)
	if err != nil {
		return ScenarioResult{}, err
	}
	return ScenarioResult{Name: sc.Name, Description: sc.Description, Labels: sc.Labels,
		Source: sc.Source, Algorithm: algorithm, Definition: string(def)}, nil
}

// Failure kinds: why a run failed.
const (
	FailSafety   = "safety"   // two leaders while the network was connected (SLE1)
	FailLiveness = "liveness" // no leader, or not the highest live node, within the bound (SLE2)
	FailTenures  = "tenures"  // the nodes' event logs and the capture disagree on who led which epoch when
	FailCounters = "counters" // the nodes' counters disagree with the capture
	FailFault    = "fault"    // the capture shows a fault not doing what was asked (see capture.FaultCheck)
	FailAuth     = "auth"     // a frame in the capture failed the cluster key's check, or a HELLO was replayed
	FailStep     = "step"     // a scenario step could not run (a fault failed, a selector found nobody)
	FailSetup    = "setup"    // the testbed, the nodes or the capture did not come up
	FailNode     = "node"     // a node stopped by itself, no fault stopping it (its error is named)
)

// Where a run's time to leader comes from (Run.TimeToLeaderFrom).
const (
	TimeFromCapture = "capture"  // the measured election in the capture
	TimeFromLabPoll = "lab poll" // the lab's poll, the capture showing no converged election
)

// Which detection started a run's measured election (Run.DetectedBy).
const (
	// DetectedByCrash: a follower saw its leader's connection end and its
	// host refuse a new one (wire reason leader-crashed).
	DetectedByCrash = "crash evidence"
	// DetectedByTimeout: no HEARTBEAT within the failure timeout (wire
	// reason leader-failed).
	DetectedByTimeout = "failure timeout"
)

// DetectedByReason is Run.DetectedBy for an election whose first message
// carried reason, by its wire name.
func DetectedByReason(reason string) string {
	switch reason {
	case wire.ReasonLeaderCrashed.String():
		return DetectedByCrash
	case wire.ReasonLeaderFailed.String():
		return DetectedByTimeout
	}
	return reason
}

// Run is one run of a scenario.
type Run struct {
	Index   int       `json:"index"` // from 1
	Seed    int64     `json:"seed"`
	Started time.Time `json:"started"`
	OK      bool      `json:"ok"`
	// FailureKind is one of the Fail constants; Failure says how, in one
	// line. Both are empty for a run that passed.
	FailureKind string `json:"failure_kind,omitempty"`
	Failure     string `json:"failure,omitempty"`
	// TimeToLeaderNS is the measured election's (see the package doc):
	// from its trigger, normally the record of the fault before the
	// measured wait_leader, until the winning COORDINATOR (the ring's:
	// ELECTED) left the leader for the last node it had to reach, by the capture; when the capture
	// shows the election not converging, from that fault to the lab's
	// poll that saw the nodes waited for follow one leader.
	TimeToLeaderNS int64 `json:"time_to_leader_ns"`
	// TimeToLeaderFrom says which of the two TimeToLeaderNS is:
	// TimeFromCapture or TimeFromLabPoll; empty for a run that measured
	// none.
	TimeToLeaderFrom string `json:"time_to_leader_from,omitempty"`
	// DetectionNS is from the same trigger to the election's first
	// message on the wire, its first ELECTION, HALT or RING_ELECTION,
	// whichever came first (capture.Election.DetectionNS); absent when no failure had to
	// be detected (cold start) or no record triggered the election.
	DetectionNS *int64 `json:"detection_ns,omitempty"`
	// DetectedBy says which detection started the measured election,
	// from the reason its first message carries: DetectedByCrash,
	// DetectedByTimeout, or another reason's wire name ("leader-left");
	// absent where DetectionNS is, and in results written before it.
	DetectedBy string `json:"detected_by,omitempty"`
	// ClockErrorNS, on a testbed across hosts, bounds what the hosts'
	// clocks add to the error of TimeToLeaderNS and DetectionNS
	// (capture.Report.ClockErrorNS); 0 on one host, whose one clock
	// stamps every frame and fault.
	ClockErrorNS int64  `json:"clock_error_ns,omitempty"`
	Leader       string `json:"leader,omitempty"`
	Epoch        uint64 `json:"epoch,omitempty"`
	// Election is the measured election's number in the capture's
	// analysis (capture.Election.N, as `bullylab analyze` lists them); 0
	// when the capture holds none.
	Election int `json:"election,omitempty"`
	// Messages counts the frames of the measured election on the wire, by
	// wire type name; HEARTBEATs are left out.
	Messages map[string]int `json:"messages"`
	Counters CountersCheck  `json:"counters"`
	// Capture is the run's pcapng file, relative to results.json.
	Capture string `json:"capture,omitempty"`
	// FramesVerified and FramesUnverified count the capture's frames whose
	// tags the run's cluster key verified, and those it could not check
	// (a connection that began before the capture); none may fail.
	FramesVerified   int64 `json:"frames_verified,omitempty"`
	FramesUnverified int64 `json:"frames_unverified,omitempty"`
	// Schedule is the run's fault schedule, one resolved step a line.
	Schedule []string `json:"schedule,omitempty"`
	Checks   Checks   `json:"checks"`
	// FaultChecks are the capture's observations of each fault next to
	// what it asked (capture.Report.FaultChecks); one outside its
	// tolerance fails the run (FailFault).
	FaultChecks []capture.FaultCheck `json:"fault_checks,omitempty"`
	// UnavailableNS is from the measured disruption's start until every
	// live node followed one leader it reached both ways and stayed so to
	// the run's end (to the run's end when that never came); LeaderChanges
	// counts the leader tenures, (leader, epoch), that began after the
	// disruption's start; Availability is the rest of what the nodes'
	// event logs and the faults tell of it. All three are absent when
	// unknown: a results.json from before they were measured, or a run
	// whose event logs could not be read.
	UnavailableNS *int64        `json:"unavailable_ns,omitempty"`
	LeaderChanges *int          `json:"leader_changes,omitempty"`
	Availability  *Availability `json:"availability,omitempty"`
	// LaterLeaderChanges counts the leader tenures, (leader, epoch), in
	// the capture that began after the run settled, its time to leader
	// from the measured fault, and before the next fault: the leader
	// changing again when nothing made it (CountLaterLeaderChanges).
	// Absent when unknown: no measured election, or a results.json from
	// before it was counted.
	LaterLeaderChanges *int `json:"later_leader_changes,omitempty"`
	// HostProcesses are the shared host processes that ran the nodes, in
	// order, with the most files each held open; absent when every node
	// ran as its own process, or across hosts.
	HostProcesses []HostProcess `json:"host_processes,omitempty"`
}

// CountersCheck compares the nodes' frame counters with the capture.
type CountersCheck struct {
	OK         bool     `json:"ok"`
	Mismatches []string `json:"mismatches,omitempty"`
	// AtMost lists the nodes whose counts could only be held as an upper
	// bound of the capture's: they wrote into a network that dropped
	// packets, where TCP can abort a connection with frames still queued
	// in the kernel and never transmitted.
	AtMost []string `json:"at_most,omitempty"`
}

// Summary aggregates a scenario's runs. Distributions cover the runs that
// passed; a failed run's numbers are not about the algorithm. Detection
// covers those of them with a DetectionNS, Convergence those with a
// Checks.ConvergenceNS; each is nil when none has one.
type Summary struct {
	Runs         int   `json:"runs"`
	OK           int   `json:"ok"`
	Failed       int   `json:"failed"`
	TimeToLeader Dist  `json:"time_to_leader"`
	Detection    *Dist `json:"detection,omitempty"`
	Convergence  *Dist `json:"convergence,omitempty"`
	// Messages is per wire type: the mean and the largest count of a run.
	Messages      map[string]Count `json:"messages"`
	MessagesTotal Count            `json:"messages_total"`
	Failures      []FailureGroup   `json:"failures,omitempty"`
	// ClockErrorNS is the largest of the runs' (Run.ClockErrorNS).
	ClockErrorNS int64 `json:"clock_error_ns,omitempty"`
	// DetectedBy counts the runs that passed by their Run.DetectedBy;
	// nil when none has one.
	DetectedBy map[string]int `json:"detected_by,omitempty"`
	// Availability is nil when no run measured it.
	Availability *AvailabilitySummary `json:"availability,omitempty"`
	// LaterChanges is over every run that counted its later leader
	// changes, nil when none did.
	LaterChanges *LaterChanges `json:"later_leader_changes,omitempty"`
	// HostFiles is over the runs whose nodes ran in shared host
	// processes, nil when none did.
	HostFiles *HostFiles `json:"host_files,omitempty"`
}

// Dist is a distribution of durations; percentiles are nearest-rank (see
// Percentile).
type Dist struct {
	N      int   `json:"n"`
	MinNS  int64 `json:"min_ns"`
	MeanNS int64 `json:"mean_ns"`
	P50NS  int64 `json:"p50_ns"`
	P95NS  int64 `json:"p95_ns"`
	P99NS  int64 `json:"p99_ns"`
	MaxNS  int64 `json:"max_ns"`
}

// Count is a message count over runs.
type Count struct {
	Mean float64 `json:"mean"`
	Max  int     `json:"max"`
}

// FailureGroup is the failed runs of one kind.
type FailureGroup struct {
	Kind    string `json:"kind"`
	Runs    []int  `json:"runs"`
	Example string `json:"example"` // the first run's Failure
}

// Summarize computes the summary of runs.
func Summarize(runs []Run) Summary {
	s := Summary{Runs: len(runs), Messages: map[string]Count{}}
	var ttl, det, conv []int64
	var totals []int
	perType := map[string][]int{}
	types := messageTypes(runs)
	groups := map[string]*FailureGroup{}
	var order []string
	for _, r := range runs {
		if !r.OK {
			s.Failed++
			kind := r.FailureKind
			if kind == "" {
				kind = "unknown"
			}
			g, ok := groups[kind]
			if !ok {
				g = &FailureGroup{Kind: kind, Example: r.Failure}
				groups[kind] = g
				order = append(order, kind)
			}
			g.Runs = append(g.Runs, r.Index)
			continue
		}
		s.OK++
		s.ClockErrorNS = max(s.ClockErrorNS, r.ClockErrorNS)
		ttl = append(ttl, r.TimeToLeaderNS)
		if r.DetectionNS != nil {
			det = append(det, *r.DetectionNS)
		}
		if r.DetectedBy != "" {
			if s.DetectedBy == nil {
				s.DetectedBy = map[string]int{}
			}
			s.DetectedBy[r.DetectedBy]++
		}
		if r.Checks.ConvergenceNS != nil {
			conv = append(conv, *r.Checks.ConvergenceNS)
		}
		total := 0
		for _, t := range types {
			perType[t] = append(perType[t], r.Messages[t])
			total += r.Messages[t]
		}
		totals = append(totals, total)
	}
	s.TimeToLeader = Distribution(ttl)
	if len(det) > 0 {
		d := Distribution(det)
		s.Detection = &d
	}
	if len(conv) > 0 {
		d := Distribution(conv)
		s.Convergence = &d
	}
	for _, t := range types {
		s.Messages[t] = countOf(perType[t])
	}
	s.MessagesTotal = countOf(totals)
	for _, k := range order {
		s.Failures = append(s.Failures, *groups[k])
	}
	s.Availability = summarizeAvailability(runs)
	s.LaterChanges = summarizeLaterChanges(runs)
	s.HostFiles = summarizeHostFiles(runs)
	return s
}

func countOf(v []int) Count {
	if len(v) == 0 {
		return Count{}
	}
	return Count{Mean: Mean(v), Max: slices.Max(v)}
}

// messageTypes lists the message types the runs passed count, in wire
// order, unknown names after them alphabetically.
func messageTypes(runs []Run) []string {
	seen := map[string]bool{}
	for _, r := range runs {
		if !r.OK {
			continue
		}
		for t := range r.Messages {
			seen[t] = true
		}
	}
	return SortMessageTypes(seen)
}

// SortMessageTypes lists the message types in seen in wire order, those
// the wire does not know last, by name.
func SortMessageTypes(seen map[string]bool) []string {
	types := make([]string, 0, len(seen))
	for t := range seen {
		types = append(types, t)
	}
	slices.SortFunc(types, func(a, b string) int {
		ta, oka := wire.ParseType(a)
		tb, okb := wire.ParseType(b)
		switch {
		case oka && okb:
			return int(ta) - int(tb)
		case oka:
			return -1
		case okb:
			return 1
		}
		return strings.Compare(a, b)
	})
	return types
}

// Summarize fills every scenario's Summary from its runs.
func (r *Results) Summarize() {
	for i := range r.Scenarios {
		r.Scenarios[i].Summary = Summarize(r.Scenarios[i].Runs)
	}
}

// TopologyOf describes topo for results.json.
func TopologyOf(topo *topologies.Topology) TopologyInfo {
	t := TopologyInfo{Name: topo.Name, Source: topo.Source, Nodes: len(topo.Nodes)}
	counts := map[Timing]int{}
	var common Timing
	for _, n := range topo.Nodes {
		tm := timingOf(n.Settings)
		counts[tm]++
		if counts[tm] > counts[common] {
			common = tm
		}
	}
	t.Settings = common
	for _, n := range topo.Nodes {
		if tm := timingOf(n.Settings); tm != common {
			if t.NodeSettings == nil {
				t.NodeSettings = map[string]Timing{}
			}
			t.NodeSettings[n.Name] = tm
		}
	}
	return t
}

func timingOf(s topologies.Settings) Timing {
	return Timing{HeartbeatNS: int64(s.Heartbeat), FailureTimeoutNS: int64(s.FailureTimeout), ElectionTimeoutNS: int64(s.ElectionTimeout),
		DetectionStaggerNS: int64(s.DetectionStagger)}
}

// Write writes r as indented JSON, setting Schema.
func (r *Results) Write(w io.Writer) error {
	r.Schema = Schema
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	// Failure reasons quote node output; < and > stay readable.
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// WriteFile writes r to path through a temporary file, so that a bench
// killed half-way never leaves a truncated results.json for compare. The
// file is OutputMode, as every bench output.
func (r *Results) WriteFile(path string) error {
	if err := WriteOutputFile(path, r.Write); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// OutputMode is the mode of results.json, bench.txt and report.html:
// readable by all, so that an unprivileged `bullylab compare` reads what
// `sudo bullylab bench` wrote.
const OutputMode = 0o644

// WriteOutputFile writes path through a temporary file in its folder, renamed
// over it once complete, with mode OutputMode whatever the umask.
func WriteOutputFile(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	bw := bufio.NewWriter(tmp)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		// CreateTemp makes files 0600.
		err = tmp.Chmod(OutputMode)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ReadResults reads and checks a results.json.
func ReadResults(path string) (*Results, error) {
	data, err := bounded.ReadFile("results", path, MaxResultsSize)
	if err != nil {
		return nil, err
	}
	return DecodeResults(path, data)
}

// MaxResultsSize bounds a results.json or bench.txt that DecodeResults,
// ReadResults and LoadComparable accept: 30 runs of a 250-node chaos
// scenario take a few MiB, a 60-run star16 bench 100 KiB.
const MaxResultsSize = 64 << 20

// DecodeResults parses and checks results.json data; name is used in
// errors, which are one line: "name:line: field: what is wrong". Unknown
// fields are ignored: v1 only ever gains fields.
func DecodeResults(name string, data []byte) (*Results, error) {
	if len(data) > MaxResultsSize {
		return nil, &FileError{File: name, Msg: "larger than " + bounded.Size(MaxResultsSize)}
	}
	var head struct {
		Schema *string `json:"schema"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, jsonError(name, data, err)
	}
	switch {
	case head.Schema == nil:
		return nil, &FileError{File: name, Field: "schema", Msg: "missing (not a bullylab results.json?)"}
	case *head.Schema != Schema:
		msg := fmt.Sprintf("%s is not %s", bounded.Quote(*head.Schema), Schema)
		if strings.HasPrefix(*head.Schema, "bullylab.bench/") {
			msg += " (written by another bullylab version)"
		}
		return nil, &FileError{File: name, Field: "schema", Msg: msg}
	}
	var r Results
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, jsonError(name, data, err)
	}
	if err := r.validate(name); err != nil {
		return nil, err
	}
	return &r, nil
}

// FileError is a problem in an input file (results.json, benchmark text);
// its message is one line, "file:line: field: what is wrong". It is the
// type topology and scenario files report, so that every input file a
// command reads fails alike.
type FileError = yamlfile.Error

// jsonError turns encoding/json's errors, which count bytes, into one
// that names a line and, for type errors, the field.
func jsonError(name string, data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return &FileError{File: name, Line: lineAt(data, syn.Offset), Msg: bounded.Clip(syn.Error(), yamlfile.MaxLibraryMessage)}
	case errors.As(err, &typ):
		// Field names the map keys on the way: the file's.
		return &FileError{File: name, Line: lineAt(data, typ.Offset), Field: bounded.Clip(typ.Field, yamlfile.MaxLibraryMessage),
			Msg: fmt.Sprintf("want %s, got JSON %s", typ.Type, bounded.Clip(typ.Value, bounded.MaxQuoted))}
	}
	return &FileError{File: name, Msg: bounded.Clip(err.Error(), yamlfile.MaxLibraryMessage)}
}

func lineAt(data []byte, off int64) int {
	off = min(max(off, 0), int64(len(data)))
	return bytes.Count(data[:off], []byte{'\n'}) + 1
}

// validate checks what compare and report rely on.
func (r *Results) validate(name string) error {
	bad := func(field, format string, args ...any) error {
		return &FileError{File: name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if r.Topology.Name == "" {
		return bad("topology.name", "missing")
	}
	if r.Topology.Nodes < 0 {
		return bad("topology.nodes", "negative")
	}
	if len(r.Scenarios) == 0 {
		return bad("scenarios", "no scenario")
	}
	keys := map[string]int{}
	for i, sc := range r.Scenarios {
		f := "scenarios[" + strconv.Itoa(i) + "]"
		if sc.Name == "" {
			return bad(f+".name", "missing")
		}
		if sc.Algorithm == "" {
			r.Scenarios[i].Algorithm = topologies.DefaultAlgorithm
		} else if !slices.Contains(topologies.Algorithms, sc.Algorithm) {
			return bad(f+".algorithm", "%s is not an election algorithm (want %s)", bounded.Quote(sc.Algorithm), strings.Join(topologies.Algorithms, " or "))
		}
		if j, ok := keys[sc.Key()]; ok {
			return bad(f, "scenario %s is also scenarios[%d]", bounded.Quote(sc.Key()), j)
		}
		keys[sc.Key()] = i
		indexes := map[int]bool{}
		for j, run := range sc.Runs {
			rf := fmt.Sprintf("%s.runs[%d]", f, j)
			switch {
			case run.Index < 1:
				return bad(rf+".index", "%d, want 1 or more", run.Index)
			case indexes[run.Index]:
				return bad(rf+".index", "run %d is listed twice", run.Index)
			case run.TimeToLeaderNS < 0:
				return bad(rf+".time_to_leader_ns", "negative")
			case run.DetectionNS != nil && *run.DetectionNS < 0:
				return bad(rf+".detection_ns", "negative")
			case run.UnavailableNS != nil && *run.UnavailableNS < 0:
				return bad(rf+".unavailable_ns", "negative")
			case run.LeaderChanges != nil && *run.LeaderChanges < 0:
				return bad(rf+".leader_changes", "negative")
			case run.LaterLeaderChanges != nil && *run.LaterLeaderChanges < 0:
				return bad(rf+".later_leader_changes", "negative")
			case !run.OK && run.FailureKind == "":
				return bad(rf+".failure_kind", "missing for a failed run")
			}
			for t, n := range run.Messages {
				if n < 0 {
					return bad(rf+".messages."+bounded.Clip(t, bounded.MaxQuoted), "negative")
				}
			}
			indexes[run.Index] = true
		}
	}
	return nil
}
