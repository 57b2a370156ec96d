package node

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/wire"
)

// Timeouts of the metrics endpoint: a scraper that is slow to send its
// request or to read the answer is cut off instead of holding a
// connection, and the node's work never waits on one.
const (
	metricsReadHeaderTimeout = 5 * time.Second
	metricsReadTimeout       = 10 * time.Second
	metricsWriteTimeout      = 10 * time.Second
	metricsIdleTimeout       = 60 * time.Second
	// metricsScrapeTimeout bounds one scrape's collection, below the
	// write timeout so that the 503 saying so still reaches the scraper.
	metricsScrapeTimeout = 5 * time.Second
	// metricsMaxInFlight bounds concurrent scrapes; more are answered 503.
	metricsMaxInFlight = 4
)

// MetricsServer is a node's metrics endpoint (`bullylab node --metrics
// ADDR`): it serves GET (and HEAD) /metrics over plain HTTP in the
// Prometheus text exposition format 0.0.4, uncompressed; another method
// is 405 and every other path 404. Beyond metricsMaxInFlight concurrent
// scrapes, and past metricsScrapeTimeout, a scrape is answered 503. The
// node's own metrics, read from its counters and its published view at
// each scrape:
//
//	bullylab_node_frames_total{direction,type}       counter  frames sent (direction="sent": the socket
//	                                                          took all of it) or read off a socket
//	                                                          (direction="received"), by wire type
//	bullylab_node_frames_dropped_total{reason}       counter  frames given up on, by DropReason
//	bullylab_node_frames_dropped_by_type_total{type} counter  the same frames, by wire type
//	bullylab_node_frames_rejected_total              counter  received frames with a malformed payload
//	bullylab_node_rx_errors_total                    counter  inbound connections closed on a framing error
//	bullylab_node_peer_issues_total{issue}           counter  what peers did wrong, by PeerIssue name;
//	                                                          issue="auth_failed" counts failed authentication
//	bullylab_node_elections_started_total            counter  elections this node started
//	bullylab_node_elections_won_total                counter  elections this node won
//	bullylab_node_leader_changes_total               counter  leaders this node accepted
//	bullylab_node_epoch                              gauge    the leader's epoch
//	bullylab_node_max_epoch                          gauge    the highest epoch seen
//	bullylab_node_is_leader                          gauge    1 while this node leads, else 0
//	bullylab_node_status{status}                     gauge    1 for the current status (electing,
//	                                                          halting, waiting, normal), 0 for the others
//	bullylab_node_members                            gauge    members in this node's list, itself included
//	bullylab_node_info{id,addr,algorithm}            gauge    1, naming the node and its election
//	bullylab_clock_offset_seconds                    gauge    how far the node's wall clock is from its
//	                                                          host's (Clock): 0 unless a clock fault or
//	                                                          --clock-offset set one
//	bullylab_clock_rate_ppm                          gauge    the rate the node's clock drifts at, ppm
//
// Every wire type, drop reason, issue and status has its series from the
// first scrape, zero or not, so that rates and alerts need no absent();
// a frame of a type this build does not know shows up as type="TYPE(n)".
// Beside them, a few standard metrics with their usual names and meaning:
//
//	go_goroutines                  gauge    goroutines that exist
//	go_memstats_heap_alloc_bytes   gauge    bytes of allocated heap objects
//	process_cpu_seconds_total      counter  user and system CPU time spent
//	process_resident_memory_bytes  gauge    resident memory size
//	process_open_fds               gauge    open file descriptors
//	process_max_fds                gauge    the limit on open file descriptors
//	process_start_time_seconds     gauge    process start time, in seconds since the Unix epoch
//
// The process_* ones are read from /proc/self, so only on Linux; one that
// cannot be read is left out of the scrape, and the others still answer.
//
// The endpoint writes the format itself rather than link a Prometheus
// client library: every node process would pay that library's package
// initialisation at start, metrics or not, and a testbed starts hundreds.
type MetricsServer struct {
	ln  net.Listener
	srv *http.Server
	// inFlight holds a token per scrape being answered; a scrape that
	// finds it full is answered 503 at once.
	inFlight chan struct{}
}

// ListenMetrics listens on addr (host:port; port 0 picks one) for the
// metrics endpoint, which answers once Serve is called. Listening apart
// from serving lets a node refuse a bad or busy address before it opens
// its data dir.
func ListenMetrics(addr string) (*MetricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if oe, ok := errors.AsType[*net.OpError](err); ok {
		// net's message repeats the address; say it once, with the flag.
		return nil, fmt.Errorf("metrics address (--metrics) %s: %v", addr, oe.Err)
	}
	if err != nil {
		return nil, fmt.Errorf("metrics address (--metrics) %s: %v", addr, err)
	}
	return &MetricsServer{ln: ln, inFlight: make(chan struct{}, metricsMaxInFlight), srv: &http.Server{
		ReadHeaderTimeout: metricsReadHeaderTimeout,
		ReadTimeout:       metricsReadTimeout,
		WriteTimeout:      metricsWriteTimeout,
		IdleTimeout:       metricsIdleTimeout,
		MaxHeaderBytes:    1 << 14,
	}}, nil
}

// Addr returns the address the endpoint listens on.
func (s *MetricsServer) Addr() string { return s.ln.Addr().String() }

// metricsContentType is the text exposition format's media type.
const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// Serve starts answering scrapes with n's metrics. A scrape reads atomics,
// n's published view and the process's own counters only: it never waits
// on the goroutine that runs n.
func (s *MetricsServer) Serve(n *Node) {
	scrape := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.inFlight <- struct{}{}:
			defer func() { <-s.inFlight }()
		default:
			http.Error(w, "Limit of concurrent requests reached ("+strconv.Itoa(metricsMaxInFlight)+"), try again later.", http.StatusServiceUnavailable)
			return
		}
		// The whole body is built before the header goes out, so that a
		// scrape cut off by the timeout is a clean 503, never half a body.
		var e expoWriter
		writeNodeMetrics(&e, n)
		writeStdMetrics(&e)
		w.Header().Set("Content-Type", metricsContentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(e.b)))
		w.Write(e.b)
	})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", http.TimeoutHandler(scrape, metricsScrapeTimeout,
		fmt.Sprintf("Exceeded configured timeout of %v.\n", metricsScrapeTimeout)))
	s.srv.Handler = mux
	go s.srv.Serve(s.ln) // returns ErrServerClosed on Close
}

// Close stops the endpoint and closes its connections, scrapes in progress
// included: a stopping node does not wait for its scrapers.
func (s *MetricsServer) Close() error {
	err := s.srv.Close()
	// Close closes the listener only once Serve has started tracking it.
	if lerr := s.ln.Close(); err == nil && lerr != nil && !errors.Is(lerr, net.ErrClosed) {
		err = lerr
	}
	return err
}

// writeNodeMetrics writes n's bullylab_node_* families, read from its
// counters and published view, so that the node keeps one set of counts
// for /status, the event log and Prometheus.
func writeNodeMetrics(e *expoWriter, n *Node) {
	ctr := n.tr.Counters()
	// Load each count once, so that a type's series and the choice to
	// show an unknown type at all agree within the scrape.
	var sent, recv, drop [len(ctr.sent)]uint64
	var types []wire.Type
	for i := range ctr.sent {
		t := wire.Type(i)
		sent[i], recv[i], drop[i] = ctr.sent[i].Load(), ctr.received[i].Load(), ctr.dropped[i].Load()
		if t.Valid() || sent[i]+recv[i]+drop[i] != 0 {
			types = append(types, t)
		}
	}
	const p = "bullylab_node_"
	e.family(p+"frames_total", "counter", "Frames written to a socket (direction=sent) or read off one (direction=received), by wire type.")
	for _, t := range types {
		e.sample(p+"frames_total", float64(sent[t]), "direction", "sent", "type", t.String())
		e.sample(p+"frames_total", float64(recv[t]), "direction", "received", "type", t.String())
	}
	e.family(p+"frames_dropped_total", "counter", "Frames given up on instead of written, by reason.")
	for r := range numDropReasons {
		e.sample(p+"frames_dropped_total", float64(ctr.byReason[r].Load()), "reason", r.String())
	}
	e.family(p+"frames_dropped_by_type_total", "counter", "Frames given up on instead of written, by wire type.")
	for _, t := range types {
		e.sample(p+"frames_dropped_by_type_total", float64(drop[t]), "type", t.String())
	}
	e.single(p+"frames_rejected_total", "counter", "Received frames not handed to the election because their payload was malformed.", float64(ctr.rejected.Load()))
	e.single(p+"rx_errors_total", "counter", "Inbound connections closed on a framing error.", float64(ctr.rxErrors.Load()))
	e.family(p+"peer_issues_total", "counter", "What peers did wrong, by issue (auth_failed: failed authentication).")
	for i := range numPeerIssues {
		e.sample(p+"peer_issues_total", float64(ctr.peerIssues[i].Load()), "issue", i.String())
	}

	st := n.status.Load()
	e.single(p+"elections_started_total", "counter", "Elections this node started.", float64(st.ElectionsStarted))
	e.single(p+"elections_won_total", "counter", "Elections this node won.", float64(st.ElectionsWon))
	e.single(p+"leader_changes_total", "counter", "Leaders this node accepted.", float64(st.LeaderChanges))
	e.single(p+"epoch", "gauge", "The epoch of this node's leader.", float64(st.Epoch))
	e.single(p+"max_epoch", "gauge", "The highest epoch this node has seen.", float64(st.MaxEpoch))
	e.single(p+"is_leader", "gauge", "1 while this node leads, else 0.", b2f(st.IsLeader))
	e.family(p+"status", "gauge", "1 for the node's current election status, 0 for the others.")
	for _, s := range election.Statuses() {
		e.sample(p+"status", b2f(s.String() == st.Status), "status", s.String())
	}
	e.single(p+"members", "gauge", "Members in this node's list, itself included.", float64(len(st.Members)))
	e.family(p+"info", "gauge", "Always 1; names the node and the election algorithm it runs.")
	e.sample(p+"info", 1, "id", st.ID.String(), "addr", st.Addr, "algorithm", st.Algorithm)
	skew := n.clock.Skew()
	e.single("bullylab_clock_offset_seconds", "gauge", "How far the node's wall clock is from its host's, by a clock fault or --clock-offset and the drift since.", skew.Offset.Seconds())
	e.single("bullylab_clock_rate_ppm", "gauge", "The rate the node's clock drifts at from its host's, in parts per million.", skew.RatePPM)
}

// writeStdMetrics writes the go_* and process_* families.
func writeStdMetrics(e *expoWriter) {
	e.single("go_goroutines", "gauge", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine()))
	// ReadMemStats stops the world for a moment, which once a scrape can
	// afford; runtime/metrics would not, but its package init costs every
	// node process more at start than this costs a scrape.
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	e.single("go_memstats_heap_alloc_bytes", "gauge", "Number of heap bytes allocated and currently in use.", float64(ms.HeapAlloc))
	writeProcessMetrics(e)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// expoWriter builds a body in the Prometheus text exposition format
// 0.0.4: each family's HELP and TYPE lines, then its samples, one a line.
// Names are the caller's constants; label values and help texts are
// escaped here, as the format asks.
type expoWriter struct{ b []byte }

// family starts the family name of type typ ("counter" or "gauge").
func (e *expoWriter) family(name, typ, help string) {
	e.b = append(e.b, "# HELP "...)
	e.b = append(e.b, name...)
	e.b = append(e.b, ' ')
	e.b = appendEscaped(e.b, help, false)
	e.b = append(e.b, "\n# TYPE "...)
	e.b = append(e.b, name...)
	e.b = append(e.b, ' ')
	e.b = append(e.b, typ...)
	e.b = append(e.b, '\n')
}

// sample writes one series of the current family; labels are name, value
// pairs.
func (e *expoWriter) sample(name string, v float64, labels ...string) {
	e.b = append(e.b, name...)
	if len(labels) > 0 {
		e.b = append(e.b, '{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.b = append(e.b, labels[i]...)
			e.b = append(e.b, `="`...)
			e.b = appendEscaped(e.b, labels[i+1], true)
			e.b = append(e.b, '"')
		}
		e.b = append(e.b, '}')
	}
	e.b = append(e.b, ' ')
	switch {
	case math.IsInf(v, 1):
		e.b = append(e.b, "+Inf"...)
	case math.IsInf(v, -1):
		e.b = append(e.b, "-Inf"...)
	case math.IsNaN(v):
		e.b = append(e.b, "NaN"...)
	case v == math.Trunc(v) && math.Abs(v) < 1<<53:
		// A count in full, as a reader of the body expects, not 1e+06.
		e.b = strconv.AppendInt(e.b, int64(v), 10)
	default:
		e.b = strconv.AppendFloat(e.b, v, 'g', -1, 64)
	}
	e.b = append(e.b, '\n')
}

// single writes a family of one series without labels.
func (e *expoWriter) single(name, typ, help string, v float64) {
	e.family(name, typ, help)
	e.sample(name, v)
}

// appendEscaped appends s to b with backslash and newline escaped, and
// the double quote too in a label value (quoted, unlike a help text).
// Invalid UTF-8, which the format does not allow, becomes U+FFFD.
func appendEscaped(b []byte, s string, quoted bool) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quoted:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// closeMetrics closes s, if any, for Serve's shutdown; its error is
// dropped, as a scraper cut off is no failure of the node.
func closeMetrics(s *MetricsServer) {
	if s != nil {
		_ = s.Close()
	}
}
