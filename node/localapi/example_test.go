package localapi_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"syscall"

	"github.com/bullylab/bullylab/node/localapi"
)

// fault is a request body, as a lab's POST /fault takes.
type fault struct {
	Kind  string   `json:"kind"`
	Nodes []string `json:"nodes"`
}

// labCall words Call's errors as a lab's client does: the server's message
// as it is, the socket's errors with the run they concern.
func labCall(ctx context.Context, c *localapi.Client, run, method, path string, in, out any) error {
	err := c.Call(ctx, method, path, in, out)
	if se, ok := errors.AsType[*localapi.StatusError](err); ok {
		if se.Message != "" {
			return errors.New(se.Message)
		}
		return fmt.Errorf("testbed %s: %w", run, se)
	}
	if be, ok := errors.AsType[*localapi.BodyError](err); ok {
		return fmt.Errorf("testbed %s: %w", run, be.Err)
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("testbed %s is not answering", run)
	}
	if err != nil {
		return fmt.Errorf("testbed %s: %w", run, err)
	}
	return nil
}

// nodeCall words them as a node's client does: "control" and the request
// for what the server answered, "control" and the socket otherwise.
func nodeCall(ctx context.Context, c *localapi.Client, method, path string, out any) error {
	err := c.Call(ctx, method, path, nil, out)
	_, status := errors.AsType[*localapi.StatusError](err)
	_, body := errors.AsType[*localapi.BodyError](err)
	switch {
	case status || body:
		return fmt.Errorf("control %w", err)
	case err != nil:
		return fmt.Errorf("control %s: %w", c.Path(), err)
	}
	return nil
}

func Example() {
	dir, _ := os.MkdirTemp("", "")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "control.sock")

	srv, err := localapi.Listen(path) // mode 0600 whatever the umask
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /fault", func(w http.ResponseWriter, r *http.Request) {
		var f fault
		if err := localapi.ReadJSON(r.Body, 1<<20, &f); err != nil {
			localapi.WriteError(w, http.StatusBadRequest, "fault: "+err.Error())
			return
		}
		localapi.WriteJSON(w, http.StatusOK, f)
	})
	mux.HandleFunc("POST /campaign", func(w http.ResponseWriter, r *http.Request) {
		localapi.WriteError(w, http.StatusServiceUnavailable, "node is not running")
	})
	srv.Serve(mux)

	ctx := context.Background()
	lab := localapi.NewClient(path, 16<<20)
	var rec fault
	err = labCall(ctx, lab, "bl1a2b", http.MethodPost, "/fault", fault{Kind: "crash", Nodes: []string{"n1"}}, &rec)
	fmt.Println(rec, err)
	err = labCall(ctx, lab, "bl1a2b", http.MethodPost, "/fault", map[string]string{"kind": "crash", "node": "n1"}, &rec)
	fmt.Println(err)

	node := localapi.NewClient(path, 1<<20)
	fmt.Println(nodeCall(ctx, node, http.MethodPost, "/campaign", nil))

	srv.Shutdown(ctx) // removes the socket file
	fmt.Println(labCall(ctx, lab, "bl1a2b", http.MethodGet, "/status", nil, nil))
	// Output:
	// {crash [n1]} <nil>
	// fault: json: unknown field "node"
	// control POST /campaign: node is not running
	// testbed bl1a2b is not answering
}
