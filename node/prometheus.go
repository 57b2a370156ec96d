package node

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
// ADDR`): it serves GET /metrics over plain HTTP in the Prometheus
// exposition formats (text, or what the scraper negotiates); every other
// path is 404. The node's own metrics, read from its counters and its
// published view at each scrape:
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
//	bullylab_node_info{id,addr}                      gauge    1, naming the node
//
// Every wire type, drop reason, issue and status has its series from the
// first scrape, zero or not, so that rates and alerts need no absent();
// a frame of a type this build does not know shows up as type="TYPE(n)".
// The standard go_* and process_* metrics come with them.
type MetricsServer struct {
	ln  net.Listener
	srv *http.Server
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
	return &MetricsServer{ln: ln, srv: &http.Server{
		ReadHeaderTimeout: metricsReadHeaderTimeout,
		ReadTimeout:       metricsReadTimeout,
		WriteTimeout:      metricsWriteTimeout,
		IdleTimeout:       metricsIdleTimeout,
		MaxHeaderBytes:    1 << 14,
	}}, nil
}

// Addr returns the address the endpoint listens on.
func (s *MetricsServer) Addr() string { return s.ln.Addr().String() }

// Serve starts answering scrapes with n's metrics, on a registry of its own
// (not the process-wide default, which any imported package may fill).
// A scrape reads atomics and n's published view only: it never waits on
// the goroutine that runs n.
func (s *MetricsServer) Serve(n *Node) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newNodeCollector(n),
	)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		// A collector that fails (process_* on a system without /proc)
		// leaves out its metrics, not the node's.
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: metricsMaxInFlight,
		Timeout:             metricsScrapeTimeout,
	}))
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

// nodeCollector reads a Node's counters when scraped, so that the node
// keeps one set of counts for /status, the event log and Prometheus.
type nodeCollector struct {
	n *Node

	frames, dropped, droppedByType, rejected, rxErrors, issues *prometheus.Desc
	started, won, changes                                      *prometheus.Desc
	epoch, maxEpoch, isLeader, status, members, info           *prometheus.Desc
}

func newNodeCollector(n *Node) *nodeCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("bullylab_node_"+name, help, labels, nil)
	}
	return &nodeCollector{
		n:             n,
		frames:        d("frames_total", "Frames written to a socket (direction=sent) or read off one (direction=received), by wire type.", "direction", "type"),
		dropped:       d("frames_dropped_total", "Frames given up on instead of written, by reason.", "reason"),
		droppedByType: d("frames_dropped_by_type_total", "Frames given up on instead of written, by wire type.", "type"),
		rejected:      d("frames_rejected_total", "Received frames not handed to the election because their payload was malformed."),
		rxErrors:      d("rx_errors_total", "Inbound connections closed on a framing error."),
		issues:        d("peer_issues_total", "What peers did wrong, by issue (auth_failed: failed authentication).", "issue"),
		started:       d("elections_started_total", "Elections this node started."),
		won:           d("elections_won_total", "Elections this node won."),
		changes:       d("leader_changes_total", "Leaders this node accepted."),
		epoch:         d("epoch", "The epoch of this node's leader."),
		maxEpoch:      d("max_epoch", "The highest epoch this node has seen."),
		isLeader:      d("is_leader", "1 while this node leads, else 0."),
		status:        d("status", "1 for the node's current election status, 0 for the others.", "status"),
		members:       d("members", "Members in this node's list, itself included."),
		info:          d("info", "Always 1; names the node.", "id", "addr"),
	}
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.frames, c.dropped, c.droppedByType, c.rejected, c.rxErrors, c.issues,
		c.started, c.won, c.changes, c.epoch, c.maxEpoch, c.isLeader, c.status, c.members, c.info} {
		ch <- d
	}
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	ctr := c.n.tr.Counters()
	for i := range ctr.sent {
		t := wire.Type(i)
		sent, recv, drop := ctr.sent[i].Load(), ctr.received[i].Load(), ctr.dropped[i].Load()
		if !t.Valid() && sent+recv+drop == 0 {
			continue
		}
		counter(c.frames, sent, "sent", t.String())
		counter(c.frames, recv, "received", t.String())
		counter(c.droppedByType, drop, t.String())
	}
	for r := range numDropReasons {
		counter(c.dropped, ctr.byReason[r].Load(), r.String())
	}
	counter(c.rejected, ctr.rejected.Load())
	counter(c.rxErrors, ctr.rxErrors.Load())
	for i := range numPeerIssues {
		counter(c.issues, ctr.peerIssues[i].Load(), i.String())
	}

	st := c.n.status.Load()
	counter(c.started, st.ElectionsStarted)
	counter(c.won, st.ElectionsWon)
	counter(c.changes, st.LeaderChanges)
	gauge(c.epoch, float64(st.Epoch))
	gauge(c.maxEpoch, float64(st.MaxEpoch))
	gauge(c.isLeader, b2f(st.IsLeader))
	for _, s := range []Status{StatusElecting, StatusHalting, StatusWaiting, StatusNormal} {
		gauge(c.status, b2f(s.String() == st.Status), s.String())
	}
	gauge(c.members, float64(len(st.Members)))
	gauge(c.info, 1, st.ID.String(), st.Addr)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

var _ prometheus.Collector = (*nodeCollector)(nil)

// closeMetrics closes s, if any, for Serve's shutdown; its error is
// dropped, as a scraper cut off is no failure of the node.
func closeMetrics(s *MetricsServer) {
	if s != nil {
		_ = s.Close()
	}
}
