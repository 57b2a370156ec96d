package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/bullylab/bullylab/node/localapi"
	"github.com/bullylab/bullylab/topologies/fault"
)

// The control API is HTTP/1.1 over a unix socket, by default
// <data-dir>/control.sock:
//
//	GET  /status    200, a NodeStatus as JSON; with ?members=0 without
//	                its member list
//	POST /campaign  200 {"ok":true}: an election started (Reason manual),
//	                unless the node was already electing
//	POST /release 200 {"ok":true}: a node started held (--hold-boot)
//	                starts its boot election, unless an election reached
//	                it meanwhile (Node.Release)
//	POST /leave     200 {"ok":true}: LEAVE was sent and the node stopped;
//	                the process exits after answering
//	POST /clock     body a fault.ClockSkew, {"offset_ns":..,"rate_ppm":..};
//	                200 {"ok":true}: the node's clock reads the host's
//	                plus offset_ns from now, drifting at rate_ppm
//	                (Node.SetClock); {} puts it back on the host's
//
// Errors are a non-200 status with {"error":"..."}.

// ControlSocketName is the control socket's file name in the data dir.
const ControlSocketName = "control.sock"

// maxControlAnswer bounds the answers ControlClient reads.
const maxControlAnswer = 1 << 20

// ControlServer serves a Node's control API.
type ControlServer struct {
	srv *localapi.Server
}

// ListenControl serves n's control API on the unix socket at path, mode
// 0600 whatever the umask: the API stops the node on request, so it is
// owner-only like the data dir (see localapi.Listen). A socket file left
// there by a process that died is removed; one that a live process still
// listens on is an error.
func ListenControl(path string, n *Node) (*ControlServer, error) {
	srv, err := localapi.Listen(path)
	if pe, ok := errors.AsType[*os.PathError](err); ok {
		return nil, fmt.Errorf("control socket %s: %w", path, pe.Err)
	}
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		st := n.Status()
		if r.URL.Query().Get("members") == "0" {
			st.Members = nil
		}
		localapi.WriteJSON(w, http.StatusOK, st)
	})
	mux.HandleFunc("POST /campaign", func(w http.ResponseWriter, r *http.Request) {
		controlReply(w, n.Campaign(r.Context()))
	})
	mux.HandleFunc("POST /release", func(w http.ResponseWriter, r *http.Request) {
		controlReply(w, n.Release(r.Context()))
	})
	mux.HandleFunc("POST /leave", func(w http.ResponseWriter, r *http.Request) {
		controlReply(w, n.Leave(r.Context()))
	})
	mux.HandleFunc("POST /clock", func(w http.ResponseWriter, r *http.Request) {
		var skew fault.ClockSkew
		if err := localapi.ReadJSON(r.Body, 1<<10, &skew); err != nil {
			localapi.WriteError(w, http.StatusBadRequest, err.Error())
			return
		}
		if err := skew.Validate(); err != nil {
			localapi.WriteError(w, http.StatusBadRequest, err.Error())
			return
		}
		controlReply(w, n.SetClock(r.Context(), skew))
	})
	srv.Serve(mux)
	return &ControlServer{srv: srv}, nil
}

// Path returns the socket's path.
func (s *ControlServer) Path() string { return s.srv.Path() }

// Shutdown stops accepting, waits for requests in progress (so that a
// /leave gets its answer) until ctx is done, and removes the socket file
// unless a newer process put its own in its place.
func (s *ControlServer) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

func controlReply(w http.ResponseWriter, err error) {
	switch {
	case err == nil:
		localapi.WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
	case errors.Is(err, ErrNotRunning):
		localapi.WriteError(w, http.StatusServiceUnavailable, err.Error())
	default:
		localapi.WriteError(w, http.StatusInternalServerError, err.Error())
	}
}

// ControlClient talks to a node's control socket.
type ControlClient struct {
	api *localapi.Client
}

// NewControlClient returns a client for the control socket at path.
func NewControlClient(path string) *ControlClient {
	return &ControlClient{api: localapi.NewClient(path, maxControlAnswer)}
}

// Status fetches GET /status.
func (c *ControlClient) Status(ctx context.Context) (*NodeStatus, error) {
	var s NodeStatus
	if err := c.call(ctx, http.MethodGet, "/status", nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// StatusBrief fetches GET /status?members=0: the status without the member
// list, which is most of the answer's size in a large cluster, for polls
// that only look at who leads.
func (c *ControlClient) StatusBrief(ctx context.Context) (*NodeStatus, error) {
	var s NodeStatus
	if err := c.call(ctx, http.MethodGet, "/status?members=0", nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Campaign asks the node to start an election.
func (c *ControlClient) Campaign(ctx context.Context) error {
	return c.call(ctx, http.MethodPost, "/campaign", nil, nil)
}

// Release asks a node started held to elect (POST /release).
func (c *ControlClient) Release(ctx context.Context) error {
	return c.call(ctx, http.MethodPost, "/release", nil, nil)
}

// Leave asks the node to leave the cluster and stop.
func (c *ControlClient) Leave(ctx context.Context) error {
	return c.call(ctx, http.MethodPost, "/leave", nil, nil)
}

// SetClock asks the node to skew its clock (POST /clock); a zero skew puts
// it back on the host's.
func (c *ControlClient) SetClock(ctx context.Context, skew fault.ClockSkew) error {
	return c.call(ctx, http.MethodPost, "/clock", skew, nil)
}

// call's errors are "control GET /status: " and what the node answered,
// or "control /path/control.sock: " and why it could not be asked.
func (c *ControlClient) call(ctx context.Context, method, path string, in, out any) error {
	err := c.api.Call(ctx, method, path, in, out)
	if _, ok := errors.AsType[*localapi.StatusError](err); ok {
		return fmt.Errorf("control %w", err)
	}
	if _, ok := errors.AsType[*localapi.BodyError](err); ok {
		return fmt.Errorf("control %w", err)
	}
	if err != nil {
		return fmt.Errorf("control %s: %w", c.api.Path(), localapi.Cause(err))
	}
	return nil
}
