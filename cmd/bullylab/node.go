package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
	"github.com/bullylab/bullylab/wire/bounded"
	"github.com/urfave/cli/v2"
)

func nodeCommand() *cli.Command {
	def := election.DefaultConfig()
	return &cli.Command{
		Name:         "node",
		Usage:        "run one election node",
		OnUsageError: onUsageError,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "id", Usage: "node ID, a version-4 UUID", DefaultText: "the one in --data-dir, or a new one stored there"},
			&cli.StringFlag{Name: "listen", Usage: "TCP `host:port` to accept peers on"},
			&cli.IntFlag{Name: "listen-fd", Usage: "accept peers on the listening TCP socket inherited as file descriptor `FD` instead of binding --listen (from a parent that bound it, to list the address as a peer before the node starts)", DefaultText: "none"},
			&cli.StringFlag{Name: "advertise", Usage: "`host:port` peers dial", DefaultText: "--listen"},
			&cli.StringFlag{Name: "peers", Usage: "peers file (`ID host:port` per line), or a comma list of ID@host:port; lists every node, this one included at its --advertise or --listen address"},
			&cli.StringFlag{Name: "data-dir", Usage: "`dir` for the node's ID, state and control socket; yours, and writable by you only (chmod 700)"},
			&cli.StringFlag{Name: "cluster-key", Usage: "cluster key `FILE`, mode 0600, the same on every node (make one with `bullylab keygen --out FILE`); required unless --insecure"},
			&cli.StringFlag{Name: "member-key", Usage: "this node's own member key `FILE`, mode 0600 (make one with `bullylab keygen --member --out FILE`, and list the public key it prints in the peers file); it signs the node's HELLOs, so that no other member can speak in its name; required when the peers file lists member keys"},
			&cli.StringFlag{Name: "algorithm", Value: node.AlgorithmBully, Usage: "election `algorithm`: " + strings.Join(node.Algorithms(), " or ") + "; every node of a cluster runs the same"},
			&cli.BoolFlag{Name: "insecure", Usage: "run without a cluster key: accept unauthenticated frames from anyone who can reach --listen"},
			&cli.DurationFlag{Name: "heartbeat", Value: def.HeartbeatInterval, Usage: "leader heartbeat `interval`"},
			&cli.DurationFlag{Name: "failure-timeout", Value: def.FailureTimeout, Usage: "silence from the leader before an election"},
			&cli.DurationFlag{Name: "election-timeout", Value: def.ElectionTimeout, Usage: "wait for ANSWER and for HALT_ACKs"},
			&cli.DurationFlag{Name: "detection-stagger", Value: def.DetectionStagger, Usage: "extra failure-detection delay per member ranked between this node and its leader, capped at --election-timeout; 0 disables"},
			&cli.StringFlag{Name: "log", Value: "json", Usage: "event log format on stdout: json or text"},
			&cli.StringFlag{Name: "control", Usage: "control socket `path`, mode 0600", DefaultText: "<data-dir>/control.sock"},
			&cli.StringFlag{Name: "metrics", Usage: "serve Prometheus metrics (bullylab_node_*: frames by type and direction, drops by reason, peer issues, elections, leader changes, epoch, is_leader, status; with go_* and process_*) at http://`host:port`/metrics; plain HTTP, so bind it where only your scraper reaches", DefaultText: "off"},
			&cli.BoolFlag{Name: "join", Usage: "announce this node with JOIN: for a node the peers' lists do not name yet (--peers may then leave it out)"},
			&cli.IntFlag{Name: "max-members", Usage: "refuse a membership of more than `N` members, this node included (the peers file's must fit under it)", DefaultText: "1024"},
			&cli.BoolFlag{Name: "hold-boot", Usage: "start without the boot election: the node follows a leader that reaches it and elects once its control socket's POST /release asks it to (a launcher that starts the highest node last boots N nodes with about 3N election frames)"},
			&cli.StringFlag{Name: "clock-offset", Usage: "run the node's wall clock `OFFSET` from the host's (a signed duration like +90s): the time its HELLOs carry and it checks peers' against, to reproduce a host whose clock is off", DefaultText: "0"},
			&cli.StringFlag{Name: "clock-rate", Usage: "drift the node's clock at `PPM` parts per million from the host's (like 500 or -20ppm): its wall clock, and the timers its heartbeats and timeouts run on, as a drifting crystal", DefaultText: "0"},
			&cli.BoolFlag{Name: "reset-state", Usage: "start over at epoch 0, keeping the ID, when --data-dir has an id file but its state.json was lost; the node forgets its promises, so use it only knowing the state is gone"},
		},
		Action: runNode,
	}
}

func runNode(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("node: unexpected argument %q", c.Args().First())
	}
	if os.Getenv("GOMAXPROCS") == "" {
		// A node handles a few frames per heartbeat interval, never enough
		// to keep two threads busy; a second P only makes the scheduler
		// wake a spinning thread for frames that ready a goroutine, which
		// on a host running hundreds of nodes (a testbed) is much of an
		// idle follower's CPU: 1.5 ms a second with one P against 2.4 with
		// two, 100 nodes on loopback in one run of BenchmarkBootToLeader.
		runtime.GOMAXPROCS(1)
	}
	o := node.ServeOptions{
		Listen:     c.String("listen"),
		Advertise:  c.String("advertise"),
		DataDir:    c.String("data-dir"),
		Control:    c.String("control"),
		Metrics:    c.String("metrics"),
		Join:       c.Bool("join"),
		HoldBoot:   c.Bool("hold-boot"),
		MaxMembers: c.Int("max-members"),
		ResetState: c.Bool("reset-state"),
		Log:        c.App.Writer,
	}
	// The process is this node's alone: when it dies, its listener can
	// close first.
	o.TCP.ListenerClosesFirst = true
	algorithm, err := parseAlgorithm("--algorithm", c.String("algorithm"))
	if err != nil {
		return err
	}
	o.Algorithm = algorithm
	o.HeartbeatInterval, o.FailureTimeout, o.ElectionTimeout = c.Duration("heartbeat"), c.Duration("failure-timeout"), c.Duration("election-timeout")
	stagger := c.Duration("detection-stagger")
	o.DetectionStagger = &stagger
	if c.IsSet("clock-offset") {
		if o.Clock.Offset, err = fault.ParseClockOffset(c.String("clock-offset")); err != nil {
			return usagef("--clock-offset: %v", err)
		}
	}
	if c.IsSet("clock-rate") {
		if o.Clock.RatePPM, err = fault.ParseClockRate(c.String("clock-rate")); err != nil {
			return usagef("--clock-rate: %v", err)
		}
	}
	if err := o.Clock.Validate(); err != nil {
		return usagef("--clock-offset, --clock-rate: %v", err)
	}
	if c.IsSet("id") {
		// An explicit nil ID is refused, not taken to mean "none given".
		id, err := node.ParseID(c.String("id"))
		if err != nil {
			return usagef("--id %v", err)
		}
		o.ID = id
	}
	if c.IsSet("listen-fd") {
		if o.Listen != "" {
			return usagef("--listen and --listen-fd exclude each other: give one")
		}
		ln, err := inheritedListener(c.Int("listen-fd"))
		if err != nil {
			return usagef("--listen-fd %d: %v", c.Int("listen-fd"), err)
		}
		o.Listener = ln
	}
	// All at once, not one per try: they are checked after the values
	// given, and with the cluster key's below.
	var missing []string
	if o.Listen == "" && o.Listener == nil {
		missing = append(missing, "--listen (or --listen-fd)")
	}
	if o.DataDir == "" {
		missing = append(missing, "--data-dir")
	}
	if err := checkTimeouts(o); err != nil {
		return err
	}
	if err := checkMetricsAddr(c); err != nil {
		return err
	}
	format, err := node.ParseLogFormat(c.String("log"))
	if err != nil {
		return usagef("--log: %v", err)
	}
	o.LogFormat = format
	if o.Advertise != "" {
		if _, err := node.CanonicalAddr(o.Advertise); err != nil {
			return usagef("--advertise: %v", err)
		}
	}
	var peers node.Peers
	if peers, o.PeersSource, err = loadPeers(c.String("peers")); err != nil {
		return err
	}
	o.Peers, o.PeersFrom, o.PeerKeys = peers.Members, peers.From, peers.Keys
	hint := ""
	if c.String("cluster-key") == "" && !c.IsSet("cluster-key") && !c.Bool("insecure") {
		missing = append(missing, "--cluster-key (or --insecure)")
		hint = "make a cluster key with `bullylab keygen --out FILE`"
	}
	if err := missingFlags("node", missing, hint); err != nil {
		return err
	}
	if err := clusterKey(c, &o); err != nil {
		return err
	}
	if err := memberKey(c, &o); err != nil {
		return err
	}
	if o.Insecure {
		at := o.Listen
		if o.Listener != nil {
			at = o.Listener.Addr().String()
		}
		fmt.Fprintf(c.App.ErrWriter, "bullylab: warning: --insecure: peers are not authenticated; anyone who can reach %s can send this node frames as any member\n", at)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = node.Serve(ctx, o)
	if errors.Is(err, node.ErrStateMissing) {
		return fmt.Errorf("%v; to start it over at epoch 0 with its ID, add --reset-state", err)
	}
	return err
}

// missingFlags is the usage error of a command run without the flags it
// needs, all of them in one line and then hint, if any; nil when none is
// missing.
func missingFlags(command string, missing []string, hint string) error {
	var msg string
	switch len(missing) {
	case 0:
		return nil
	case 1:
		msg = fmt.Sprintf("%s: missing required flag %s", command, missing[0])
	default:
		msg = fmt.Sprintf("%s: missing required flags %s and %s", command, strings.Join(missing[:len(missing)-1], ", "), missing[len(missing)-1])
	}
	if hint != "" {
		msg += "; " + hint
	}
	return usagef("%s", msg)
}

// parseAlgorithm checks one election algorithm name given by flag.
func parseAlgorithm(flag, name string) (string, error) {
	if slices.Contains(node.Algorithms(), name) {
		return name, nil
	}
	return "", usagef("%s %s: not an election algorithm (known: %s)", flag, bounded.Quote(name), strings.Join(node.Algorithms(), ", "))
}

// clusterKey sets o's ClusterKey from --cluster-key, or Insecure from
// --insecure: exactly one of them.
func clusterKey(c *cli.Context, o *node.ServeOptions) error {
	path, insecure := c.String("cluster-key"), c.Bool("insecure")
	switch {
	case path != "" && insecure:
		return usagef("--cluster-key and --insecure exclude each other: give one")
	case insecure:
		o.Insecure = true
	case path != "":
		k, err := wire.ReadKeyFile(path)
		if err != nil {
			return fmt.Errorf("--cluster-key: %v", err)
		}
		o.ClusterKey = &k
	case c.IsSet("cluster-key"):
		return usagef("--cluster-key: empty path")
	default:
		return &exitError{node.ErrNoClusterKey.Error(), exitUsage}
	}
	return nil
}

// memberKey sets o's MemberKey from --member-key, and checks that a node
// whose peers list member keys has one.
func memberKey(c *cli.Context, o *node.ServeOptions) error {
	path := c.String("member-key")
	switch {
	case path != "" && o.Insecure:
		return usagef("--member-key and --insecure exclude each other: a member key signs the HELLOs that only a cluster key sends")
	case path != "":
		k, err := wire.ReadMemberKeyFile(path)
		if err != nil {
			return fmt.Errorf("--member-key: %v", err)
		}
		o.MemberKey = k
	case c.IsSet("member-key"):
		return usagef("--member-key: empty path")
	case len(o.PeerKeys) > 0 && !o.Insecure:
		return usagef("--peers %s lists member keys, so peers refuse unsigned HELLOs: give this node its own with --member-key FILE (make one with `bullylab keygen --member --out FILE`)", o.PeersSource)
	}
	return nil
}

// checkMetricsAddr refuses a --metrics that is no host:port as a usage
// error; a port that is busy or a host that is not this machine's is
// found when the node listens, and exits 1.
func checkMetricsAddr(c *cli.Context) error {
	if !c.IsSet("metrics") {
		return nil
	}
	v := c.String("metrics")
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return usagef("--metrics %q: not a host:port (like 127.0.0.1:9464 or :9464)", v)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return usagef("--metrics %q: port %q is not a number from 0 to 65535", v, port)
	}
	return nil
}

// checkTimeouts names the flags, where Config.Validate would name fields.
func checkTimeouts(o node.ServeOptions) error {
	for _, f := range []struct {
		name string
		v    any
		bad  bool
	}{
		{"--heartbeat", o.HeartbeatInterval, o.HeartbeatInterval <= 0},
		{"--failure-timeout", o.FailureTimeout, o.FailureTimeout <= 0},
		{"--election-timeout", o.ElectionTimeout, o.ElectionTimeout <= 0},
	} {
		if f.bad {
			return usagef("%s %v: must be positive", f.name, f.v)
		}
	}
	if o.FailureTimeout <= o.HeartbeatInterval {
		return usagef("--failure-timeout %v: must be longer than --heartbeat %v", o.FailureTimeout, o.HeartbeatInterval)
	}
	if o.DetectionStagger != nil && *o.DetectionStagger < 0 {
		return usagef("--detection-stagger %v: must not be negative (0 disables it)", *o.DetectionStagger)
	}
	return nil
}

// loadPeers reads --peers: a path if a file is there, else a list when it
// looks like one. Its From says where each member is, and source names
// the file or the flag, for Serve's errors.
func loadPeers(v string) (p node.Peers, source string, err error) {
	if strings.TrimSpace(v) == "" {
		return node.Peers{}, "", nil
	}
	if fi, err := os.Stat(v); err == nil {
		if fi.IsDir() {
			return node.Peers{}, "", fmt.Errorf("--peers %s: is a directory", v)
		}
		p, err := node.ReadPeersFile(v)
		return p, v, err
	}
	if strings.Contains(v, "@") {
		p, err := node.ParsePeerListKeys(v)
		if err != nil {
			return node.Peers{}, "", usagef("--peers: %v", err)
		}
		for i := range p.From {
			p.From[i] = "--peers " + strings.TrimPrefix(p.From[i], "peer list ")
		}
		return p, "--peers", nil
	}
	return node.Peers{}, "", usagef("--peers %s: no such file (a list takes the form ID@host:port,...)", v)
}

// inheritedListener returns the listening TCP socket this process
// inherited as file descriptor fd.
func inheritedListener(fd int) (net.Listener, error) {
	if fd < 3 {
		return nil, errors.New("not an inherited descriptor (0, 1 and 2 are stdin, stdout and stderr)")
	}
	f := os.NewFile(uintptr(fd), "listen-fd")
	if f == nil {
		return nil, errors.New("no such descriptor")
	}
	ln, err := net.FileListener(f) // a copy of the descriptor
	if err != nil {
		return nil, fmt.Errorf("not a listening socket: %v", err)
	}
	f.Close()
	if _, ok := ln.Addr().(*net.TCPAddr); !ok {
		ln.Close()
		return nil, fmt.Errorf("a %s socket, not TCP", ln.Addr().Network())
	}
	return ln, nil
}
