package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// The control API is HTTP/1.1 over a unix socket, by default
// <data-dir>/control.sock:
//
//	GET  /status    200, a NodeStatus as JSON; with ?members=0 without
//	                its member list
//	POST /campaign  200 {"ok":true}: an election started (Reason manual),
//	                unless the node was already electing
//	POST /leave     200 {"ok":true}: LEAVE was sent and the node stopped;
//	                the process exits after answering
//
// Errors are a non-200 status with {"error":"..."}.

// ControlSocketName is the control socket's file name in the data dir.
const ControlSocketName = "control.sock"

// maxUnixPath is the longest path a unix socket address holds on Linux
// (sun_path is 108 bytes with the terminating NUL).
const maxUnixPath = 107

// ControlServer serves a Node's control API.
type ControlServer struct {
	path string
	file os.FileInfo // the socket file as bound, to recognise it later
	ln   net.Listener
	srv  *http.Server
	done chan error
}

// ListenControl serves n's control API on the unix socket at path, mode
// 0600 whatever the umask (see listenPrivate). A socket file left there by
// a process that died is removed; one that a live process still listens
// on is an error.
func ListenControl(path string, n *Node) (*ControlServer, error) {
	if len(path) > maxUnixPath {
		return nil, fmt.Errorf("control socket %s: path too long (%d bytes, max %d)", path, len(path), maxUnixPath)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	ln, err := listenPrivate(path)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, unwrapSyscall(err))
	}
	fi, err := os.Lstat(path)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket %s: %w", path, unwrapSyscall(err))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		st := n.Status()
		if r.URL.Query().Get("members") == "0" {
			st.Members = nil
		}
		writeJSON(w, http.StatusOK, st)
	})
	mux.HandleFunc("POST /campaign", func(w http.ResponseWriter, r *http.Request) {
		controlReply(w, n.Campaign(r.Context()))
	})
	mux.HandleFunc("POST /leave", func(w http.ResponseWriter, r *http.Request) {
		controlReply(w, n.Leave(r.Context()))
	})
	s := &ControlServer{
		path: path,
		file: fi,
		ln:   ln,
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		done: make(chan error, 1),
	}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// listenPrivate listens on a unix socket at path that only its owner can
// connect to: the control API stops the node on request, so it is
// owner-only like the data dir. bind(2) creates the socket file with mode
// 0777 less the umask, and the umask belongs to the whole process (a
// library caller's other goroutines included), so it cannot be narrowed
// just for this. Instead the socket is bound inside a new directory of
// mode 0700 beside path, which no other user can traverse to connect,
// chmodded to 0600 there, and only then linked to path. It never exists at
// path with a wider mode. link(2), unlike rename, fails if path exists:
// a socket another process bound there meanwhile is not replaced.
func listenPrivate(path string) (net.Listener, error) {
	tmp, err := mkdirPrivate(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp)
	bound := filepath.Join(tmp, "s")
	if len(bound) > maxUnixPath {
		return nil, fmt.Errorf("path too long: creating it takes the %d-byte path %s, max %d; use a shorter one", len(bound), bound, maxUnixPath)
	}
	ln, err := net.Listen("unix", bound)
	if err != nil {
		return nil, err
	}
	// The listener must not unlink on Close: a successor may already have
	// replaced the file with its own socket. Shutdown removes it instead,
	// after checking.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	defer os.Remove(bound)
	if err := os.Chmod(bound, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	if err := os.Link(bound, path); err != nil {
		ln.Close()
		if errors.Is(err, os.ErrExist) {
			return nil, errors.New("in use by another process (it appeared while this one started)")
		}
		return nil, err
	}
	return ln, nil
}

// mkdirPrivate creates a new directory of mode 0700 in dir, with a short
// name so that a socket path inside it fits where the final one does.
func mkdirPrivate(dir string) (string, error) {
	const letters = "abcdefghijklmnopqrstuvwxyz234567"
	for range 100 {
		var b [7]byte
		b[0] = '.'
		for i := 1; i < len(b); i++ {
			b[i] = letters[rand.IntN(len(letters))]
		}
		path := filepath.Join(dir, string(b[:]))
		err := os.Mkdir(path, 0o700)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		// A umask can only take bits away; this makes sure it did not
		// take the owner's.
		if err := os.Chmod(path, 0o700); err != nil {
			os.Remove(path)
			return "", err
		}
		return path, nil
	}
	return "", fmt.Errorf("no free name for a temporary directory in %s", dir)
}

// Path returns the socket's path.
func (s *ControlServer) Path() string { return s.path }

// Shutdown stops accepting, waits for requests in progress (so that a
// /leave gets its answer) until ctx is done, and removes the socket file.
func (s *ControlServer) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	<-s.done
	s.removeOwnSocket()
	return err
}

func (s *ControlServer) removeOwnSocket() {
	// Remove the file only if it is still the socket this server bound, not
	// one that a newer process put in its place.
	if fi, err := os.Lstat(s.path); err == nil && os.SameFile(fi, s.file) {
		os.Remove(s.path)
	}
}

func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("control socket %s: %w", path, unwrapSyscall(err))
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("control socket %s: file exists and is not a socket", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("control socket %s: in use by another process", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("control socket %s: %w", path, unwrapSyscall(err))
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("control socket %s: remove stale socket: %w", path, unwrapSyscall(err))
	}
	return nil
}

// unwrapSyscall cuts "listen unix /path: bind: " and the like from err,
// since the callers name the path themselves.
func unwrapSyscall(err error) error {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func controlReply(w http.ResponseWriter, err error) {
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	case errors.Is(err, ErrNotRunning):
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
	default:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	}
}

// ControlClient talks to a node's control socket.
type ControlClient struct {
	path string
	hc   *http.Client
}

// NewControlClient returns a client for the control socket at path.
func NewControlClient(path string) *ControlClient {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		// A restarted node listens on a new socket at the same path; a
		// kept-alive connection would still point at the dead one.
		DisableKeepAlives: true,
	}
	return &ControlClient{path: path, hc: &http.Client{Transport: tr}}
}

// Status fetches GET /status.
func (c *ControlClient) Status(ctx context.Context) (*NodeStatus, error) {
	var s NodeStatus
	if err := c.call(ctx, http.MethodGet, "/status", &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// StatusBrief fetches GET /status?members=0: the status without the member
// list, which is most of the answer's size in a large cluster, for polls
// that only look at who leads.
func (c *ControlClient) StatusBrief(ctx context.Context) (*NodeStatus, error) {
	var s NodeStatus
	if err := c.call(ctx, http.MethodGet, "/status?members=0", &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Campaign asks the node to start an election.
func (c *ControlClient) Campaign(ctx context.Context) error {
	return c.call(ctx, http.MethodPost, "/campaign", nil)
}

// Leave asks the node to leave the cluster and stop.
func (c *ControlClient) Leave(ctx context.Context) error {
	return c.call(ctx, http.MethodPost, "/leave", nil)
}

func (c *ControlClient) call(ctx context.Context, method, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://node"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("control %s: %w", c.path, unwrapSyscall(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("control %s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return fmt.Errorf("control %s %s: %s", method, path, e.Error)
		}
		return fmt.Errorf("control %s %s: %s", method, path, resp.Status)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("control %s %s: %w", method, path, err)
		}
	}
	return nil
}
