// Package localapi is HTTP/1.1 with JSON bodies over a unix socket only
// its owner can connect to, server and client: what the control APIs of a
// node and of a lab are served and called with. It imports nothing of
// bullylab, so that every package can use it.
package localapi

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// MaxPath is the longest path a unix socket address holds: sun_path less
// its terminating NUL, 107 bytes on Linux and 103 on macOS.
const MaxPath = len(syscall.RawSockaddrUnix{}.Path) - 1

// ErrInUse is wrapped by Listen's error for a socket that a live process
// listens on.
var ErrInUse = errors.New("in use by another process")

// Server serves HTTP on a unix socket of mode 0600.
type Server struct {
	path string
	file os.FileInfo // the socket file as bound, to recognise it later
	ln   net.Listener
	srv  *http.Server

	mu   sync.Mutex
	done chan struct{} // closed when Serve's goroutine returns; nil until Serve
}

// Listen binds a unix socket at path that only its owner can connect to,
// mode 0600 whatever the umask: it is bound in a private directory beside
// path and linked into place (see listenPrivate), never existing at path
// with a wider mode. A socket file left there by a process that died is
// removed. One that a live process still listens on is an error wrapping
// ErrInUse; any other file there is an error too.
//
// Its errors are *os.PathError with Op "listen" whose Err is the bare
// reason ("in use by another process", "permission denied"), for callers
// that name the socket in their own words.
func Listen(path string) (*Server, error) {
	fail := func(err error) (*Server, error) {
		return nil, &os.PathError{Op: "listen", Path: path, Err: err}
	}
	if len(path) > MaxPath {
		return fail(fmt.Errorf("path too long (%d bytes, max %d)", len(path), MaxPath))
	}
	if err := removeStaleSocket(path); err != nil {
		return fail(err)
	}
	ln, err := listenPrivate(path)
	if err != nil {
		return fail(Cause(err))
	}
	fi, err := os.Lstat(path)
	if err != nil {
		ln.Close()
		return fail(Cause(err))
	}
	return &Server{
		path: path,
		file: fi,
		ln:   ln,
		srv:  &http.Server{ReadHeaderTimeout: 5 * time.Second},
	}, nil
}

// listenPrivate listens on a unix socket at path that only its owner can
// connect to: a control API changes what the process does, so it is
// owner-only. bind(2) creates the socket file with mode 0777 less the
// umask, and the umask belongs to the whole process (a library caller's
// other goroutines included), so it cannot be narrowed just for this.
// Instead the socket is bound inside a new directory of mode 0700 beside
// path, which no other user can traverse to connect, chmodded to 0600
// there, and only then linked to path. It never exists at path with a
// wider mode. link(2), unlike rename, fails if path exists: a socket
// another process bound there meanwhile is not replaced.
func listenPrivate(path string) (net.Listener, error) {
	tmp, err := mkdirPrivate(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp)
	bound := filepath.Join(tmp, "s")
	if len(bound) > MaxPath {
		return nil, fmt.Errorf("path too long: creating it takes the %d-byte path %s, max %d; use a shorter one", len(bound), bound, MaxPath)
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
			return nil, fmt.Errorf("%w (it appeared while this one started)", ErrInUse)
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

// removeStaleSocket removes the socket file at path if no process listens
// on it. Its errors are bare reasons, without path.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return Cause(err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return errors.New("file exists and is not a socket")
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return ErrInUse
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return Cause(err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", Cause(err))
	}
	return nil
}

// Cause cuts "listen unix /path: bind: ", "dial unix /path: connect: " and
// the like from a socket error, leaving what the kernel said, for callers
// that name the socket themselves.
func Cause(err error) error {
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

// Path returns the socket's path.
func (s *Server) Path() string { return s.path }

// Serve serves h on the socket in the background until Shutdown. Call it
// once, before Shutdown.
func (s *Server) Serve(h http.Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil {
		panic("localapi: Serve called twice")
	}
	s.srv.Handler = h
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(s.ln) // ErrServerClosed after Shutdown
	}()
}

// Shutdown stops accepting, waits for requests in progress (so that a
// request that stops the process gets its answer) until ctx is done, then
// closes what is left, and removes the socket file if it is still the one
// Listen bound, not one a newer process put in its place. Its error is
// ctx's if requests were still in progress.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	var err error
	if done == nil {
		s.ln.Close()
	} else {
		err = s.srv.Shutdown(ctx)
		if err != nil {
			s.srv.Close()
		}
		<-done
	}
	if fi, lerr := os.Lstat(s.path); lerr == nil && os.SameFile(fi, s.file) {
		os.Remove(s.path)
	}
	return err
}
