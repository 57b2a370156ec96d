package node

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape GETs url and parses the answer as the Prometheus text format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("GET %s: Content-Type %q, want the text format", url, ct)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return fams
}

// value returns the value of the series of name whose labels include
// labels (name, value pairs), failing when there is not exactly one.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	var found []float64
series:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			if !hasLabel(m, labels[i], labels[i+1]) {
				continue series
			}
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			found = append(found, m.GetCounter().GetValue())
		case dto.MetricType_GAUGE:
			found = append(found, m.GetGauge().GetValue())
		default:
			t.Fatalf("%s is a %v", name, f.GetType())
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d series of %s%v, want 1", len(found), name, labels)
	}
	return found[0]
}

func hasLabel(m *dto.Metric, name, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue() == v
		}
	}
	return false
}

// TestPrometheusMetrics runs three nodes, each with its endpoint on
// 127.0.0.1:0, until they agree on the highest, and checks what a scrape
// of each says against the node's own status: its frames by type, its
// epoch, one leader among them, and the standard collectors beside.
func TestPrometheusMetrics(t *testing.T) {
	c := newTestCluster(t, 3)
	leader := highest(c.nodes)
	epoch := waitAgree(t, c.nodes, leader.id, 0)
	leaders := 0
	for _, n := range c.nodes {
		ms, err := ListenMetrics("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ms.Serve(n.Node)
		t.Cleanup(func() { ms.Close() })
		url := "http://" + ms.Addr() + "/metrics"
		// A HEARTBEAT may go out between the status and the scrape:
		// scrape between two statuses and compare with both. On a loaded
		// host the fast timeouts may also have the cluster elect again
		// meanwhile; the epoch and election counts only grow, so equal
		// ones before and after mean the scrape saw the same view.
		var before, after NodeStatus
		var fams map[string]*dto.MetricFamily
		deadline := time.Now().Add(10 * time.Second)
		for {
			before = n.Status()
			fams = scrape(t, url)
			after = n.Status()
			if after.Status == "normal" && before.Status == after.Status && before.Epoch == after.Epoch &&
				before.ElectionsStarted == after.ElectionsStarted && before.LeaderChanges == after.LeaderChanges {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s: no scrape between two equal views in 10s: %+v, then %+v", n.id, before, after)
			}
		}

		if got := value(t, fams, "bullylab_node_epoch"); got != float64(after.Epoch) || after.Epoch < epoch {
			t.Errorf("node %s: epoch %v, the node's is %d (agreed on %d)", n.id, got, after.Epoch, epoch)
		}
		isLeader := value(t, fams, "bullylab_node_is_leader")
		if isLeader == 1 {
			leaders++
		}
		if want := b2f(n == leader); isLeader != want {
			t.Errorf("node %s: is_leader %v, want %v", n.id, isLeader, want)
		}
		if got := value(t, fams, "bullylab_node_status", "status", "normal"); got != 1 {
			t.Errorf("node %s: status{normal} %v, want 1", n.id, got)
		}
		for _, s := range []string{"electing", "halting", "waiting"} {
			if got := value(t, fams, "bullylab_node_status", "status", s); got != 0 {
				t.Errorf("node %s: status{%s} %v, want 0", n.id, s, got)
			}
		}
		if got := value(t, fams, "bullylab_node_members"); got != 3 {
			t.Errorf("node %s: members %v, want 3", n.id, got)
		}
		if got := value(t, fams, "bullylab_node_info", "id", n.id.String(), "addr", after.Addr); got != 1 {
			t.Errorf("node %s: info %v, want 1", n.id, got)
		}
		for name, want := range map[string]uint64{
			"bullylab_node_elections_started_total": after.ElectionsStarted,
			"bullylab_node_elections_won_total":     after.ElectionsWon,
			"bullylab_node_leader_changes_total":    after.LeaderChanges,
		} {
			if got := value(t, fams, name); got != float64(want) {
				t.Errorf("node %s: %s %v, status says %d", n.id, name, got, want)
			}
		}
		for _, typ := range wire.Types {
			for dir, counts := range map[string][2]map[string]uint64{
				"sent":     {before.Counters.Sent, after.Counters.Sent},
				"received": {before.Counters.Received, after.Counters.Received},
			} {
				got := value(t, fams, "bullylab_node_frames_total", "direction", dir, "type", typ.String())
				if lo, hi := counts[0][typ.String()], counts[1][typ.String()]; got < float64(lo) || got > float64(hi) {
					t.Errorf("node %s: frames_total{%s,%s} %v, status counted %d then %d", n.id, dir, typ, got, lo, hi)
				}
			}
		}
		coordinators := value(t, fams, "bullylab_node_frames_total", "direction", "sent", "type", wire.TypeCoordinator.String())
		if n == leader && coordinators == 0 {
			t.Errorf("leader %s: no COORDINATOR sent", n.id)
		}
		if n != leader && value(t, fams, "bullylab_node_frames_total", "direction", "received", "type", wire.TypeCoordinator.String()) == 0 {
			t.Errorf("follower %s: no COORDINATOR received", n.id)
		}
		for r := range numDropReasons {
			value(t, fams, "bullylab_node_frames_dropped_total", "reason", r.String())
		}
		if got := value(t, fams, "bullylab_node_peer_issues_total", "issue", "auth_failed"); got != 0 {
			t.Errorf("node %s: %v auth failures among honest peers", n.id, got)
		}
		for _, std := range []string{"go_goroutines", "process_cpu_seconds_total"} {
			if _, ok := fams[std]; !ok {
				t.Errorf("node %s: no %s", n.id, std)
			}
		}
	}
	if leaders != 1 {
		t.Errorf("%d nodes say is_leader 1, want 1", leaders)
	}
}

// The endpoint serves /metrics alone, and cuts off a client that does not
// finish its request instead of keeping its connection.
func TestPrometheusEndpoint(t *testing.T) {
	c := newTestCluster(t, 1)
	ms, err := ListenMetrics("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ms.srv.ReadHeaderTimeout = 100 * time.Millisecond // for the slow client below
	ms.Serve(c.nodes[0].Node)
	defer ms.Close()
	for path, want := range map[string]int{"/metrics": 200, "/": 404, "/status": 404, "/metrics/x": 404, "/debug/pprof/": 404} {
		resp, err := http.Get("http://" + ms.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %s, want %d", path, resp.Status, want)
		}
	}

	conn, err := net.Dial("tcp", ms.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /metrics HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	// The deadline is the test's bound, far above the server's timeout.
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	if _, err := io.ReadAll(conn); err != nil {
		t.Fatalf("a client that never finished its request was not cut off after %v: %v", time.Since(start), err)
	}
	t.Logf("unfinished request cut off after %v", time.Since(start).Round(time.Millisecond))
}

// A busy port is refused in one line naming --metrics; Serve refuses it
// before it touches the data dir.
func TestPrometheusListenErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for addr, want := range map[string]string{
		busy.Addr().String(): "metrics address (--metrics) " + busy.Addr().String() + ": bind: address already in use",
		"127.0.0.1:99999":    "metrics address (--metrics) 127.0.0.1:99999: ",
		"no-port":            "metrics address (--metrics) no-port: ",
	} {
		_, err := ListenMetrics(addr)
		if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ListenMetrics(%q) = %v; want one line starting %q", addr, err, want)
		}
	}
	key, err := wire.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "data")
	err = Serve(t.Context(), ServeOptions{Listen: "127.0.0.1:0", DataDir: dir, ClusterKey: &key, Metrics: busy.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), "--metrics") {
		t.Fatalf("Serve with a busy metrics port = %v", err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Serve refused a busy metrics port after making its data dir: %v", err)
	}
}

// TestServeMetrics runs a node process's Serve with --metrics and checks
// that the endpoint answers while it runs and is closed once it stopped.
func TestServeMetrics(t *testing.T) {
	key, err := wire.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	id := uuid.New()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ServeOptions{ID: id, Listen: "127.0.0.1:0", DataDir: dir, ClusterKey: &key, Metrics: addr})
	}()
	defer func() {
		cancel()
		<-done
	}()
	// Alone, the node leads at once; wait for it through its control socket.
	ctl := NewControlClient(filepath.Join(dir, ControlSocketName))
	deadline := time.Now().Add(30 * time.Second)
	var st *NodeStatus
	for {
		st, err = ctl.Status(t.Context())
		if err == nil && st.IsLeader {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader after 30s: %+v, %v", st, err)
		}
		time.Sleep(10 * time.Millisecond) // a poll interval: the deadline bounds the wait
	}
	fams := scrape(t, "http://"+addr+"/metrics")
	if got := value(t, fams, "bullylab_node_is_leader"); got != 1 {
		t.Errorf("is_leader %v, want 1", got)
	}
	if got := value(t, fams, "bullylab_node_info", "id", id.String()); got != 1 {
		t.Errorf("info{id=%s} %v", id, got)
	}
	if got := value(t, fams, "bullylab_node_epoch"); got != float64(st.Epoch) {
		t.Errorf("epoch %v, the control socket says %d", got, st.Epoch)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil // for the deferred wait
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		conn.Close()
		t.Fatalf("%s still accepts connections after the node stopped", addr)
	}
}
