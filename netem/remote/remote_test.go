package remote

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
)

// Without a key file and without an agent the error says what to give.
func TestNoCredentials(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "")
	_, err := Dial(t.Context(), topologies.Host{Name: "h1", SSH: "127.0.0.1:1", User: "root"})
	if err == nil || !strings.Contains(err.Error(), "no SSH agent") || !strings.HasPrefix(err.Error(), "host h1: ") {
		t.Errorf("Dial without credentials: %v", err)
	}
}

// Whatever a host's shell writes to standard error, in whatever pieces,
// only a line of digits is taken for the PID, and the rest is kept whole
// up to maxStderr.
func FuzzPidThenTail(f *testing.F) {
	f.Add([]byte("1234\nerror: no such file\n"), uint8(3))
	f.Add([]byte("12"), uint8(1))
	f.Add([]byte("not a pid\nx"), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, cut uint8) {
		w := &pidThenTail{pid: make(chan string, 1)}
		i := min(int(cut), len(data))
		w.Write(data[:i])
		w.Write(data[i:])
		select {
		case pid := <-w.pid:
			if !isDigits(pid) {
				t.Fatalf("pid %q", pid)
			}
		default:
		}
		if len(w.b) > maxStderr {
			t.Fatalf("kept %d bytes", len(w.b))
		}
		w.lastLine()
	})
}

// Whatever a controller sends, the agent answers each request it can read
// with one line, or stops with a one-line error naming the request.
func FuzzRunAgent(f *testing.F) {
	f.Add([]byte("{\"op\":\"hello\"}\n{\"op\":\"clock\"}\n{\"op\":\"probe\"}\n"))
	f.Add([]byte("{\"op\":\"nope\"}\n"))
	f.Add([]byte("not json\n"))
	f.Add([]byte("{\"op\":\"build\",\"build\":{\"run\":\"x\",\"vni\":1}}\n{\"op\":\"status\"}\n{\"op\":\"fault\",\"fault\":{\"kind\":\"crash\",\"nodes\":[\"n1\"]}}\n{\"op\":\"fault\"}\n{\"op\":\"capture\"}\n{\"op\":\"network\"}\n{\"op\":\"logs\"}\n{\"op\":\"build\"}\n{\"op\":\"down\"}\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out strings.Builder
		err := RunAgent(bytes.NewReader(in), &out, AgentConfig{Version: "test", Probe: func() (string, error) { return "", errors.New("no namespaces") }, Shares: fakeShares{}})
		if err != nil && strings.ContainsAny(err.Error(), "\n") {
			t.Fatalf("error is not one line: %q", err)
		}
		for line := range strings.SplitSeq(strings.TrimSuffix(out.String(), "\n"), "\n") {
			var r agentReply
			if line != "" && json.Unmarshal([]byte(line), &r) != nil {
				t.Fatalf("reply %q is not JSON", line)
			}
		}
	})
}

// fakeShares builds nothing and says so.
type fakeShares struct{}

func (fakeShares) Build(r ShareRequest) (ShareBuilt, error) {
	return ShareBuilt{}, fmt.Errorf("not building %q here", r.Run)
}
func (fakeShares) Start() (ShareBuilt, error) {
	return ShareBuilt{}, errors.New("nothing built to start")
}
func (fakeShares) Lead() error { return errors.New("nothing started to lead") }
func (fakeShares) Settle() (ShareBuilt, error) {
	return ShareBuilt{}, errors.New("nothing started to settle")
}
func (fakeShares) Down() error { return nil }
func (fakeShares) Apply(f fault.Fault) (fault.Fault, error) {
	return fault.Fault{}, fmt.Errorf("no node %v here", f.Nodes)
}
func (fakeShares) Status() (ShareStatus, error) {
	return ShareStatus{Nodes: json.RawMessage(`[{"node":"n1","state":"running","status":"normal"}]`)}, nil
}
func (fakeShares) Network() (ShareNetwork, error) { return ShareNetwork{}, nil }
func (fakeShares) Logs() (map[string][]byte, error) {
	return map[string][]byte{"n1": []byte("{}\n")}, nil
}
func (fakeShares) StopCapture() (capture.CaptureStats, error) { return capture.CaptureStats{}, nil }
