package localapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serveOK listens at path and answers GET /ok with {"ok":true}.
func serveOK(t *testing.T, path string) *Server {
	t.Helper()
	s, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ok", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
	s.Serve(mux)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s
}

func callOK(ctx context.Context, path string) error {
	return NewClient(path, 1<<10).Call(ctx, http.MethodGet, "/ok", nil, nil)
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// The socket ends up 0600 whatever the umask, in a private directory or
// in one every user can write to, and nothing else is left there.
func TestListenMode(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			dir := t.TempDir()
			if shared {
				if err := os.Chmod(dir, 0o1777); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(dir, "ctl.sock")
			s := serveOK(t, path)
			fi, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
				t.Errorf("socket mode %v, want a socket of mode 0600", fi.Mode())
			}
			if names := dirNames(t, dir); !slices.Equal(names, []string{"ctl.sock"}) {
				t.Errorf("dir holds %q, want the socket alone", names)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			if err := callOK(ctx, path); err != nil {
				t.Errorf("call over the linked socket: %v", err)
			}
			if err := s.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if names := dirNames(t, dir); len(names) != 0 {
				t.Errorf("dir holds %q after Shutdown", names)
			}
		})
	}
}

// A socket a dead process left is replaced; one a live process listens on
// is not, nor is a file that is no socket.
func TestListenExisting(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ctl.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	s := serveOK(t, path)

	_, err = Listen(path)
	if !errors.Is(err, ErrInUse) || err.Error() != "listen "+path+": in use by another process" {
		t.Errorf("second server on a live socket: %v", err)
	}
	if pe, ok := errors.AsType[*os.PathError](err); !ok || pe.Path != path || pe.Err != ErrInUse {
		t.Errorf("error %#v, want an *os.PathError whose Err is ErrInUse", err)
	}
	if err := callOK(t.Context(), path); err != nil {
		t.Errorf("the first server stopped answering: %v", err)
	}
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(path); err == nil || err.Error() != "listen "+path+": file exists and is not a socket" {
		t.Errorf("regular file at socket path: %v", err)
	}
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the regular file is gone: %v", err)
	}
}

// Shutdown removes the socket file only if it is still its own: a
// successor that took the path meanwhile keeps its socket.
func TestShutdownLeavesSuccessor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ctl.sock")
	old := serveOK(t, path)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	serveOK(t, path)
	if err := old.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := callOK(t.Context(), path); err != nil {
		t.Errorf("the successor's socket: %v", err)
	}
}

// A server shut down before it served closes its socket and removes it.
func TestShutdownUnserved(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ctl.sock")
	s, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
}

// A path over MaxPath is refused, and so is one that fits but whose
// temporary twin (bound first, see listenPrivate) does not; a path of
// exactly MaxPath bytes with a long enough name serves.
func TestListenPathTooLong(t *testing.T) {
	// dirOf returns a directory whose path is n bytes long.
	dirOf := func(n int) string {
		dir := t.TempDir()
		if len(dir)+2 > n {
			t.Skipf("temporary directory %s too long for this test", dir)
		}
		dir = filepath.Join(dir, strings.Repeat("d", n-len(dir)-1))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		return dir
	}

	long := filepath.Join(dirOf(MaxPath-6), "x.sock")
	_, err := Listen(long)
	if want := fmt.Sprintf("listen %s: path too long (%d bytes, max %d)", long, MaxPath+1, MaxPath); err == nil || err.Error() != want {
		t.Errorf("Listen(%d bytes) = %v, want %q", len(long), err, want)
	}

	dir := dirOf(MaxPath - 2)
	short := filepath.Join(dir, "s")
	_, err = Listen(short)
	if want := fmt.Sprintf("listen %s: path too long: creating it takes the %d-byte path ", short, MaxPath+8); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Listen(%d bytes, in a %d-byte dir) = %v, want %q...", len(short), len(dir), err, want)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("dir holds %q after the refusal", names)
	}

	fits := filepath.Join(dirOf(MaxPath-10), "ctrl.sock")
	if len(fits) != MaxPath {
		t.Fatalf("test path of %d bytes, want %d", len(fits), MaxPath)
	}
	serveOK(t, fits)
	if err := callOK(t.Context(), fits); err != nil {
		t.Errorf("socket at a path of MaxPath bytes: %v", err)
	}
}
