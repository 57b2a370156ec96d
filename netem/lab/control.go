//go:build linux

package lab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/node/localapi"
	"github.com/bullylab/bullylab/topologies/fault"
)

// The control API of a lab served by `bullylab up` is HTTP/1.1 with JSON
// bodies over the unix socket ControlSocket(run):
//
//	GET  /status  200, a Status
//	POST /fault   body a fault.Fault request; 200, the fault.Fault record
//	POST /down    200 {"ok":true}; the lab is then torn down and the
//	              serving process exits
//
// Errors are a non-200 status with {"error":"..."}: 400 for a fault the
// lab refused, 405 and 404 for the wrong method or path.

// ControlSocket is where a lab's control API is served: in the run's state
// directory, under the name a node gives its own in its data dir.
func ControlSocket(run string) string {
	return filepath.Join(netem.StateDir(run), node.ControlSocketName)
}

// RunStatus is what GET /status answers.
type RunStatus struct {
	Run      string `json:"run"`
	Topology string `json:"topology"`
	// PID is the process serving the lab (`bullylab up`).
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	// Backend is the impairment backend faults use, BackendWhy why.
	Backend    string `json:"backend"`
	BackendWhy string `json:"backend_why"`
	// Leader is the leader every running node follows right now, if they
	// agree (see Agreement).
	Leader *Leader     `json:"leader,omitempty"`
	Nodes  []NodeState `json:"nodes"`
	// Capture is the lab's capture of its switch, if any (`bullylab up
	// --capture`).
	Capture *CaptureStatus `json:"capture,omitempty"`
	// KeyFile is the nodes' cluster key file, which verifies the frames of
	// a capture; it is removed when the lab is.
	KeyFile string `json:"key_file,omitempty"`
}

// CaptureStatus is a running capture of a lab's switch.
type CaptureStatus struct {
	File    string    `json:"file"`
	Started time.Time `json:"started"`
	// Written counts the packets in the file so far, records included.
	Written uint64 `json:"written"`
}

// Agreement returns the leader every running node follows in st at one
// epoch, the leader among them, as Monitor.WaitLeader defines agreement,
// or false.
func Agreement(st []NodeState) (Leader, bool) {
	var ag Leader
	for _, s := range st {
		if s.State != ProcRunning {
			continue
		}
		if s.Status != "normal" || s.Leader == "" || s.View != nil && s.View.Left {
			return Leader{}, false
		}
		if len(ag.Nodes) == 0 {
			ag.Node, ag.Epoch = s.Leader, s.Epoch
		} else if s.Leader != ag.Node || s.Epoch != ag.Epoch {
			return Leader{}, false
		}
		if s.Node == ag.Node {
			ag.ID = s.ID
		}
		ag.Nodes = append(ag.Nodes, s.Node)
	}
	if len(ag.Nodes) == 0 || !slices.Contains(ag.Nodes, ag.Node) {
		return Leader{}, false
	}
	return ag, true
}

// Status returns the lab's status as GET /status serves it, the nodes'
// views without their member lists (Monitor.NodeStates).
func (l *Lab) Status() RunStatus {
	st := l.monitor.NodeStates()
	backend, why := l.faults.Backend()
	ls := RunStatus{
		Run: l.Run(), Topology: l.topo.Name, PID: os.Getpid(), Started: l.Times().Begin,
		Backend: backend, BackendWhy: why, Nodes: st, KeyFile: l.keyFile,
	}
	if l.capture != nil {
		cs := l.capture.Status()
		ls.Capture = &cs
	}
	if ag, ok := Agreement(st); ok {
		ag.At = time.Now()
		ls.Leader = &ag
	}
	return ls
}

// APIServer serves a Lab's control API.
type APIServer struct {
	api      *localapi.Server
	down     chan struct{}
	downOnce sync.Once
}

// Served is a testbed a control API serves: a Lab (Serve), or one across
// hosts.
type Served struct {
	Run    string
	Status func() RunStatus
	Apply  func(context.Context, fault.Fault) (fault.Fault, error)
}

// Serve serves l's control API at ControlSocket(l.Run()) until
// Close, owner-only: only root (or whoever runs the lab) may inject
// faults.
func Serve(l *Lab) (*APIServer, error) {
	return ServeTestbed(Served{Run: l.Run(), Status: l.Status, Apply: l.faults.Apply})
}

// ServeTestbed serves t's control API at ControlSocket(t.Run), as Serve
// does a Lab's.
func ServeTestbed(t Served) (*APIServer, error) {
	path := ControlSocket(t.Run)
	api, err := localapi.Listen(path)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, errors.Unwrap(err))
	}
	s := &APIServer{api: api, down: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		localapi.WriteJSON(w, http.StatusOK, t.Status())
	})
	mux.HandleFunc("POST /fault", func(w http.ResponseWriter, r *http.Request) {
		var f fault.Fault
		if err := localapi.ReadJSON(r.Body, maxFaultRequest, &f); err != nil {
			localapi.WriteError(w, http.StatusBadRequest, "fault: "+err.Error())
			return
		}
		rec, err := t.Apply(r.Context(), f)
		if err != nil {
			localapi.WriteError(w, http.StatusBadRequest, err.Error())
			return
		}
		localapi.WriteJSON(w, http.StatusOK, rec)
	})
	mux.HandleFunc("POST /down", func(w http.ResponseWriter, r *http.Request) {
		localapi.WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
		s.downOnce.Do(func() { close(s.down) })
	})
	api.Serve(mux)
	return s, nil
}

// Bounds of the control API's bodies: a fault request is a few hundred
// bytes; a status holds every node's, about 3 KB each.
const (
	maxFaultRequest = 1 << 20
	maxStatusAnswer = 16 << 20
)

// Down is closed when a client asks for the lab to go down.
func (s *APIServer) Down() <-chan struct{} { return s.down }

// Close stops serving, giving requests in progress a moment to finish.
func (s *APIServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.api.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil // a fault still running: the lab's Close ends it
	}
	return err
}

// ErrNoRun is wrapped by FindRun's error when no testbed is up.
var ErrNoRun = errors.New("no testbed is up")

// UpRun is a testbed that a live `bullylab up` serves, and who started it.
type UpRun struct {
	Run      string
	Topology string
	// User started it; nil for a run whose record predates run owners.
	User    *netem.RunUser
	Created time.Time
}

// StartedBy says who started the run, for messages.
func (r UpRun) StartedBy() string {
	if r.User == nil {
		return "an unknown user"
	}
	return r.User.String()
}

func (r UpRun) String() string {
	return fmt.Sprintf("%s (%s, started by %s at %s)", r.Run, r.Topology, r.StartedBy(), r.Created.Local().Format("15:04:05"))
}

// Of reports whether user started the run.
func (r UpRun) Of(user netem.RunUser) bool { return r.User != nil && r.User.UID == user.UID }

// UpRuns returns the testbeds that are up: a control socket in the state
// directory, and the run's owner still running. Sorted by run.
func UpRuns() ([]UpRun, error) {
	entries, err := os.ReadDir(netem.StateRoot)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var runs []UpRun
	for _, e := range entries {
		run := e.Name()
		if !e.IsDir() || !netem.ValidRunName(run) {
			continue
		}
		if _, err := os.Stat(ControlSocket(run)); err != nil {
			continue
		}
		st, err := netem.ReadState(run)
		if err != nil || !st.Owner.Alive() {
			continue
		}
		runs = append(runs, UpRun{Run: run, Topology: st.Topology, User: st.User, Created: st.Created})
	}
	return runs, nil
}

// WhichRunError is FindRun's error when no run is named and the testbeds
// up leave none to pick: more than one, or one another user started.
type WhichRunError struct {
	Runs []UpRun       // every testbed up
	User netem.RunUser // who asked
}

func (e *WhichRunError) Error() string {
	if len(e.Runs) == 1 {
		r := e.Runs[0]
		return fmt.Sprintf("the only testbed up, %s (%s), was started by %s, not by you, %s: pass --run %s to act on it",
			r.Run, r.Topology, r.StartedBy(), e.User, r.Run)
	}
	list := make([]string, len(e.Runs))
	for i, r := range e.Runs {
		list[i] = r.String()
	}
	return fmt.Sprintf("%d testbeds are up: %s: pick one with --run NAME", len(e.Runs), strings.Join(list, ", "))
}

// PickRun picks the run a command given no --run acts on: the only testbed
// up, if user started it. Otherwise it fails with ErrNoRun, or with a
// *WhichRunError that lists the testbeds up and their users: on a shared
// machine the only testbed up may be someone else's.
func PickRun(runs []UpRun, user netem.RunUser) (string, error) {
	switch {
	case len(runs) == 0:
		return "", fmt.Errorf("%w: start one with `bullylab up TOPOLOGY`", ErrNoRun)
	case len(runs) == 1 && runs[0].Of(user):
		return runs[0].Run, nil
	}
	return "", &WhichRunError{Runs: runs, User: user}
}

// FindRun picks the run a CLI command addresses: run when given (checked),
// whoever started it; else PickRun's for the calling user
// (netem.CurrentUser). Its errors are meant for the command line.
func FindRun(run string) (string, error) {
	if run != "" {
		if !netem.ValidRunName(run) {
			return "", fmt.Errorf("--run %q: not a run name (%s)", run, netem.RunNameRule)
		}
		if _, err := os.Stat(netem.StateDir(run)); errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%w with run name %s", ErrNoRun, run)
		}
		if _, err := os.Stat(ControlSocket(run)); err != nil {
			return "", fmt.Errorf("testbed %s has no control socket: it is still starting, or was not started by `bullylab up`", run)
		}
		return run, nil
	}
	runs, err := UpRuns()
	if err != nil {
		return "", err
	}
	return PickRun(runs, netem.CurrentUser())
}

// RemoteLab is a lab that another process serves (`bullylab up`), driven
// through its control API.
type RemoteLab struct {
	run string
	api *localapi.Client
}

// Dial returns a client for the lab FindRun(run) picks.
func Dial(run string) (*RemoteLab, error) {
	run, err := FindRun(run)
	if err != nil {
		return nil, err
	}
	return &RemoteLab{run: run, api: localapi.NewClient(ControlSocket(run), maxStatusAnswer)}, nil
}

// Run returns the run ID the client talks to.
func (c *RemoteLab) Run() string { return c.run }

// Status fetches GET /status.
func (c *RemoteLab) Status(ctx context.Context) (*RunStatus, error) {
	var s RunStatus
	if err := c.call(ctx, http.MethodGet, "/status", nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Fault applies f and returns its record.
func (c *RemoteLab) Fault(ctx context.Context, f fault.Fault) (fault.Fault, error) {
	var rec fault.Fault
	err := c.call(ctx, http.MethodPost, "/fault", f, &rec)
	return rec, err
}

// Down asks the lab to go down and waits until its state directory is
// gone, i.e. its processes and namespaces too.
func (c *RemoteLab) Down(ctx context.Context) error {
	if err := c.call(ctx, http.MethodPost, "/down", nil, nil); err != nil {
		return err
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(netem.StateDir(c.run)); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testbed %s: still tearing down: %w", c.run, ctx.Err())
		case <-tick.C:
		}
	}
}

// call is the API's call, its errors worded for the command line: the
// lab's own refusal as it is, the rest naming the testbed.
func (c *RemoteLab) call(ctx context.Context, method, path string, in, out any) error {
	err := c.api.Call(ctx, method, path, in, out)
	var se *localapi.StatusError
	var be *localapi.BodyError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se) && se.Message != "":
		return errors.New(se.Message)
	case errors.As(err, &se):
		return fmt.Errorf("testbed %s: %s %s: %s", c.run, method, path, se.Status)
	case errors.As(err, &be):
		return fmt.Errorf("testbed %s: %w", c.run, be.Err)
	case errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("testbed %s is not answering (its `bullylab up` is gone? `bullylab clean` removes what it left)", c.run)
	}
	return fmt.Errorf("testbed %s: %w", c.run, err)
}
