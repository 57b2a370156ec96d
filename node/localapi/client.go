package localapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
)

// Client calls the API served on a unix socket.
type Client struct {
	socket    string
	maxAnswer int64
	hc        *http.Client
}

// NewClient returns a client for the socket at path that reads answers of
// up to maxAnswer bytes. It connects anew for each call: a restarted
// server listens on a new socket at the same path, which a kept-alive
// connection would miss.
func NewClient(path string, maxAnswer int64) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		DisableKeepAlives: true,
	}
	return &Client{socket: path, maxAnswer: maxAnswer, hc: &http.Client{Transport: tr}}
}

// Path returns the socket's path.
func (c *Client) Path() string { return c.socket }

// StatusError is Call's error for an answer other than 200.
type StatusError struct {
	Method, Path string // the request's, path with its query
	StatusCode   int
	Status       string // the status line's, "503 Service Unavailable"
	// Message is the answer's "error", or "" if it has none.
	Message string
}

// Error is "GET /status: " and the Message, or the Status without one.
func (e *StatusError) Error() string {
	if e.Message != "" {
		return e.Method + " " + e.Path + ": " + e.Message
	}
	return e.Method + " " + e.Path + ": " + e.Status
}

// BodyError is Call's error for an answer whose body could not be read,
// or for a 200 whose body does not decode into out or is larger than the
// client's limit.
type BodyError struct {
	Method, Path string
	Err          error
}

// Error is "GET /status: " and Err.
func (e *BodyError) Error() string { return e.Method + " " + e.Path + ": " + e.Err.Error() }

func (e *BodyError) Unwrap() error { return e.Err }

// Call sends method path, with in as a JSON body unless it is nil, and
// decodes a 200 answer into out unless it is nil; out may have fields the
// answer lacks and the answer ones out lacks. A server that answered
// otherwise makes a *StatusError, an answer that did not read or decode a
// *BodyError. Any other error, above all the socket's (no server,
// refused, ctx done), is http.Client's as it is: it wraps the syscall's,
// so that errors.Is(err, syscall.ECONNREFUSED) and errors.Is(err,
// fs.ErrNotExist) tell a server that is gone.
func (c *Client) Call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://localapi"+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.maxAnswer+1))
	if err != nil {
		return &BodyError{Method: method, Path: path, Err: err}
	}
	if resp.StatusCode != http.StatusOK {
		e := &StatusError{Method: method, Path: path, StatusCode: resp.StatusCode, Status: resp.Status}
		var b errorBody
		if json.Unmarshal(data, &b) == nil {
			e.Message = b.Error
		}
		return e
	}
	if out == nil {
		return nil
	}
	if int64(len(data)) > c.maxAnswer {
		return &BodyError{Method: method, Path: path, Err: fmt.Errorf("answer larger than %d bytes", c.maxAnswer)}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &BodyError{Method: method, Path: path, Err: err}
	}
	return nil
}
