package node

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
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
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("GET %s: Content-Type %q, want the text format 0.0.4", url, ct)
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
// epoch, one leader among them, the standard metrics beside, and the
// leader's HEARTBEATs counted as it sends them.
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
		checkStdMetrics(t, fams)
		if n == leader {
			// The leader keeps sending HEARTBEATs: the counter moves.
			hb := func(fams map[string]*dto.MetricFamily) float64 {
				return value(t, fams, "bullylab_node_frames_total", "direction", "sent", "type", wire.TypeHeartbeat.String())
			}
			first := hb(fams)
			for deadline := time.Now().Add(10 * time.Second); ; {
				if got := hb(scrape(t, url)); got > first {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("leader %s: frames_total{sent,HEARTBEAT} still %v after 10s", n.id, first)
				}
				time.Sleep(10 * time.Millisecond) // a poll interval: the deadline bounds the wait
			}
		}
	}
	if leaders != 1 {
		t.Errorf("%d nodes say is_leader 1, want 1", leaders)
	}
}

// checkStdMetrics checks the go_* and process_* metrics of a scrape of
// this test process against what it knows of itself.
func checkStdMetrics(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	if got := value(t, fams, "go_goroutines"); got < 2 {
		t.Errorf("go_goroutines %v, with a node and an endpoint running", got)
	}
	if got := value(t, fams, "go_memstats_heap_alloc_bytes"); got <= 0 {
		t.Errorf("go_memstats_heap_alloc_bytes %v", got)
	}
	if runtime.GOOS != "linux" {
		return
	}
	if got := value(t, fams, "process_cpu_seconds_total"); got <= 0 {
		t.Errorf("process_cpu_seconds_total %v", got)
	}
	if got := value(t, fams, "process_resident_memory_bytes"); got < 1<<20 {
		t.Errorf("process_resident_memory_bytes %v, below 1 MiB", got)
	}
	open, max := value(t, fams, "process_open_fds"), value(t, fams, "process_max_fds")
	if open < 3 || max < open {
		t.Errorf("process_open_fds %v, process_max_fds %v", open, max)
	}
	// The test binary started before this test and within its timeout;
	// the boot time in /proc/stat is whole seconds, hence the slack.
	start := time.Unix(0, int64(value(t, fams, "process_start_time_seconds")*1e9))
	if now := time.Now(); start.After(now.Add(2*time.Second)) || start.Before(now.Add(-time.Hour)) {
		t.Errorf("process_start_time_seconds says %v, now is %v", start, now)
	}
}

// TestPrometheusFirstScrape checks that a node's first scrape has every
// family with its HELP and TYPE, and every series of every wire type,
// drop reason, issue and status, zero or not.
func TestPrometheusFirstScrape(t *testing.T) {
	c := newTestCluster(t, 1)
	ms, err := ListenMetrics("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ms.Serve(c.nodes[0].Node)
	defer ms.Close()
	fams := scrape(t, "http://"+ms.Addr()+"/metrics")
	counter, gauge := dto.MetricType_COUNTER, dto.MetricType_GAUGE
	want := map[string]struct {
		typ    dto.MetricType
		series int
	}{
		"bullylab_node_frames_total":                 {counter, 2 * len(wire.Types)},
		"bullylab_node_frames_dropped_total":         {counter, int(numDropReasons)},
		"bullylab_node_frames_dropped_by_type_total": {counter, len(wire.Types)},
		"bullylab_node_frames_rejected_total":        {counter, 1},
		"bullylab_node_rx_errors_total":              {counter, 1},
		"bullylab_node_peer_issues_total":            {counter, int(numPeerIssues)},
		"bullylab_node_elections_started_total":      {counter, 1},
		"bullylab_node_elections_won_total":          {counter, 1},
		"bullylab_node_leader_changes_total":         {counter, 1},
		"bullylab_node_epoch":                        {gauge, 1},
		"bullylab_node_max_epoch":                    {gauge, 1},
		"bullylab_node_is_leader":                    {gauge, 1},
		"bullylab_node_status":                       {gauge, 4},
		"bullylab_node_members":                      {gauge, 1},
		"bullylab_node_info":                         {gauge, 1},
		"bullylab_clock_offset_seconds":              {gauge, 1},
		"bullylab_clock_rate_ppm":                    {gauge, 1},
		"go_goroutines":                              {gauge, 1},
		"go_memstats_heap_alloc_bytes":               {gauge, 1},
	}
	if runtime.GOOS == "linux" {
		want["process_cpu_seconds_total"] = struct {
			typ    dto.MetricType
			series int
		}{counter, 1}
		for _, g := range []string{"process_resident_memory_bytes", "process_open_fds", "process_max_fds", "process_start_time_seconds"} {
			want[g] = struct {
				typ    dto.MetricType
				series int
			}{gauge, 1}
		}
	}
	for name, w := range want {
		f, ok := fams[name]
		if !ok {
			t.Errorf("no %s in the first scrape", name)
			continue
		}
		if f.GetHelp() == "" || f.GetType() != w.typ || len(f.GetMetric()) != w.series {
			t.Errorf("%s: help %q, type %v, %d series; want a help, %v, %d series", name, f.GetHelp(), f.GetType(), len(f.GetMetric()), w.typ, w.series)
		}
	}
	for name := range fams {
		if _, ok := want[name]; !ok {
			t.Errorf("%s in the scrape, not in the documented list", name)
		}
	}
	for _, typ := range wire.Types {
		value(t, fams, "bullylab_node_frames_total", "direction", "sent", "type", typ.String())
		value(t, fams, "bullylab_node_frames_total", "direction", "received", "type", typ.String())
		value(t, fams, "bullylab_node_frames_dropped_by_type_total", "type", typ.String())
	}
	for i := range numPeerIssues {
		value(t, fams, "bullylab_node_peer_issues_total", "issue", i.String())
	}
	checkStdMetrics(t, fams)
}

// TestPrometheusEscaping writes label values and a help text holding what
// the format must escape, and values it spells specially, and parses them
// back with Prometheus's own parser.
func TestPrometheusEscaping(t *testing.T) {
	hostile := "a\\b\"c\nd} e=\"f\",g{\\n\xff"
	var e expoWriter
	e.family("x_total", "counter", "Help with \\ and \n and \"quotes\".")
	e.sample("x_total", 1e6, "addr", hostile, "id", "")
	e.sample("x_total", 0.5, "addr", "plain", "id", "1")
	e.family("y", "gauge", "Infinities.")
	e.sample("y", math.Inf(1), "s", "+")
	e.sample("y", math.Inf(-1), "s", "-")
	if !strings.Contains(string(e.b), " 1000000\n") {
		t.Errorf("1e6 not written in full:\n%s", e.b)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(e.b)))
	if err != nil {
		t.Fatalf("%v in:\n%s", err, e.b)
	}
	// Invalid UTF-8 is not allowed in the format; it comes out replaced.
	want := strings.ToValidUTF8(hostile, "\uFFFD")
	if got := value(t, fams, "x_total", "addr", want, "id", ""); got != 1e6 {
		t.Errorf("x_total{addr=hostile} %v, want 1e6", got)
	}
	if got := value(t, fams, "x_total", "addr", "plain", "id", "1"); got != 0.5 {
		t.Errorf("x_total{addr=plain} %v, want 0.5", got)
	}
	if got := fams["x_total"].GetHelp(); got != "Help with \\ and \n and \"quotes\"." {
		t.Errorf("help %q", got)
	}
	if got := value(t, fams, "y", "s", "+"); !math.IsInf(got, 1) {
		t.Errorf("y{s=+} %v", got)
	}
	if got := value(t, fams, "y", "s", "-"); !math.IsInf(got, -1) {
		t.Errorf("y{s=-} %v", got)
	}
}

// The endpoint serves GET and HEAD /metrics alone, answers 503 beyond
// metricsMaxInFlight scrapes at once, and cuts off a client that does not
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
	do := func(method, path string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, "http://"+ms.Addr()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, r := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/metrics", 200}, {"HEAD", "/metrics", 200},
		{"GET", "/", 404}, {"GET", "/status", 404}, {"GET", "/metrics/x", 404}, {"GET", "/debug/pprof/", 404},
		{"POST", "/metrics", 405}, {"PUT", "/metrics", 405}, {"DELETE", "/metrics", 405},
	} {
		if resp := do(r.method, r.path); resp.StatusCode != r.want {
			t.Errorf("%s %s: %s, want %d", r.method, r.path, resp.Status, r.want)
		}
	}

	// Hold every in-flight slot as scrapes in progress would: one more
	// is refused at once, and answered again once one slot is free.
	for range metricsMaxInFlight {
		ms.inFlight <- struct{}{}
	}
	if resp := do("GET", "/metrics"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET /metrics beyond %d in flight: %s, want 503", metricsMaxInFlight, resp.Status)
	}
	<-ms.inFlight
	if resp := do("GET", "/metrics"); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /metrics with a slot free: %s, want 200", resp.Status)
	}
	for range metricsMaxInFlight - 1 {
		<-ms.inFlight
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
	id := uuid.New()
	dir := t.TempDir()
	// Port 0: the node binds a free port and says which.
	r, err := StartServing(ServeOptions{ID: id, Listen: "127.0.0.1:0", DataDir: dir, ClusterKey: &key, Metrics: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		r.Stop()
		<-r.Done()
	}()
	addr := r.MetricsAddr()
	if host, port, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("MetricsAddr() = %q, want 127.0.0.1 and the port bound", addr)
	}
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
	r.Stop()
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		conn.Close()
		t.Fatalf("%s still accepts connections after the node stopped", addr)
	}
}
