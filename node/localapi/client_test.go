package localapi

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

type pair struct {
	A int    `json:"a"`
	B string `json:"b,omitempty"`
}

// serveTest serves the handlers TestCall calls, at a new socket.
func serveTest(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "api.sock")
	s, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		var p pair
		if err := ReadJSON(r.Body, 64, &p); err != nil {
			WriteError(w, http.StatusBadRequest, "echo: "+err.Error())
			return
		}
		WriteJSON(w, http.StatusOK, p)
	})
	mux.HandleFunc("GET /query", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, pair{B: r.URL.RawQuery})
	})
	mux.HandleFunc("GET /more", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]any{"a": 1, "later": true})
	})
	mux.HandleFunc("GET /big", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, pair{B: strings.Repeat("x", 100)})
	})
	mux.HandleFunc("GET /plain", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not JSON", http.StatusServiceUnavailable)
	})
	s.Serve(mux)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return path
}

func TestCall(t *testing.T) {
	c := NewClient(serveTest(t), 64)
	if c.Path() == "" {
		t.Error("Path() is empty")
	}
	ctx := t.Context()

	var got pair
	if err := c.Call(ctx, http.MethodPost, "/echo", pair{A: 7, B: "x"}, &got); err != nil || got != (pair{A: 7, B: "x"}) {
		t.Errorf("echo: %+v, %v", got, err)
	}
	if err := c.Call(ctx, http.MethodGet, "/query?members=0", nil, &got); err != nil || got.B != "members=0" {
		t.Errorf("query: %+v, %v", got, err)
	}
	// An answer may have fields out lacks: servers add some over time.
	if err := c.Call(ctx, http.MethodGet, "/more", nil, &got); err != nil || got.A != 1 {
		t.Errorf("answer with a field out lacks: %+v, %v", got, err)
	}
	// One that is not read may be as large as it likes.
	if err := c.Call(ctx, http.MethodGet, "/big", nil, nil); err != nil {
		t.Errorf("large answer, not read: %v", err)
	}

	for _, tc := range []struct {
		method, path string
		in           any
		code         int
		message      string
		err          string
	}{
		{"POST", "/echo", map[string]int{"c": 1}, 400, `echo: json: unknown field "c"`, `POST /echo: echo: json: unknown field "c"`},
		{"GET", "/plain", nil, 503, "", "GET /plain: 503 Service Unavailable"},
		{"GET", "/nothing", nil, 404, "", "GET /nothing: 404 Not Found"},
		{"PUT", "/echo", nil, 405, "", "PUT /echo: 405 Method Not Allowed"},
	} {
		err := c.Call(ctx, tc.method, tc.path, tc.in, &got)
		se, ok := errors.AsType[*StatusError](err)
		if !ok || se.Method != tc.method || se.Path != tc.path || se.StatusCode != tc.code || se.Message != tc.message || err.Error() != tc.err {
			t.Errorf("%s %s: %#v, want a StatusError %q", tc.method, tc.path, err, tc.err)
		}
	}

	err := c.Call(ctx, http.MethodGet, "/big", nil, &got)
	if be, ok := errors.AsType[*BodyError](err); !ok || be.Method != "GET" || be.Path != "/big" || err.Error() != "GET /big: answer larger than 64 bytes" {
		t.Errorf("answer over the limit: %#v", err)
	}
	var n int
	err = c.Call(ctx, http.MethodPost, "/echo", pair{A: 1}, &n)
	if _, ok := errors.AsType[*BodyError](err); !ok || !strings.HasPrefix(err.Error(), "POST /echo: json: cannot unmarshal object") {
		t.Errorf("answer that does not decode: %#v", err)
	}
	if _, ok := errors.AsType[*StatusError](err); ok {
		t.Errorf("a 200 that does not decode is a StatusError: %v", err)
	}
}

// Without a server the error is http.Client's, and it tells a socket that
// is not there from one nobody listens on.
func TestCallNoServer(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.sock")
	err := NewClient(missing, 64).Call(t.Context(), http.MethodGet, "/status", nil, nil)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing socket: %v, want fs.ErrNotExist", err)
	}
	for _, typed := range []any{new(*StatusError), new(*BodyError)} {
		if errors.As(err, typed) {
			t.Errorf("missing socket: %T is %T", err, typed)
		}
	}

	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	err = NewClient(stale, 64).Call(t.Context(), http.MethodGet, "/status", nil, nil)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("stale socket: %v, want ECONNREFUSED", err)
	}
}
