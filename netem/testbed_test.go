//go:build linux

package netem_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/bullylab/bullylab/topologies"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The test binary doubles as the program run inside node namespaces and as
// a builder that another test SIGKILLs: TestNetemHelperProcess does the job
// named by this variable and never returns to the test framework.
const tbHelperEnv = "BULLYLAB_NETEM_HELPER"

func TestNetemHelperProcess(t *testing.T) {
	mode := os.Getenv(tbHelperEnv)
	if mode == "" {
		return
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	switch mode {
	case "sleep": // args: run ID, to be found in /proc/PID/cmdline
		select {}
	case "exit":
		code, _ := strconv.Atoi(args[0])
		os.Exit(code)
	case "addrs":
		addrs, _ := net.InterfaceAddrs()
		fmt.Println(addrs)
		os.Exit(0)
	case "build": // args: run ID, node count, "procs" to start one per node
		n, _ := strconv.Atoi(args[1])
		topo, err := topologies.Star(n)
		if err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		tb, err := netem.Build(context.Background(), topo, args[0])
		if err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		if len(args) > 2 && args[2] == "procs" {
			for _, nd := range tb.Nodes() {
				if _, err := tb.Start(nd.Name, tbSleepArgv(args[0]), tbHelper("sleep"), ""); err != nil {
					fmt.Println(err)
					os.Exit(2)
				}
			}
		}
		fmt.Println("ready")
		select {}
	}
	os.Exit(3)
}

func tbHelper(mode string) []string { return append(os.Environ(), tbHelperEnv+"="+mode) }

func tbSleepArgv(run string) []string {
	return []string{os.Args[0], "-test.run=^TestNetemHelperProcess$", "--", run}
}

// tbRootLinks returns the names of the links in this process's namespace.
func tbRootLinks(t *testing.T) map[string]bool {
	t.Helper()
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatalf("listing links: %v", err)
	}
	names := make(map[string]bool, len(links))
	for _, l := range links {
		names[l.Attrs().Name] = true
	}
	return names
}

// tbInNode runs fn on a thread switched into node's namespace, as the
// sockets fn opens must be created there.
func tbInNode(t *testing.T, tb *netem.Testbed, node string, fn func()) {
	t.Helper()
	name, err := tb.Namespace(node)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	tbInNS(t, ns, fn)
}

// tbInNS runs fn on a thread switched into ns.
func tbInNS(t *testing.T, ns netns.NsHandle, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			t.Error(err)
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			t.Error(err)
			return
		}
		fn()
		if err := netns.Set(orig); err != nil {
			t.Error(err)
			return // stays locked: Go discards the thread
		}
		runtime.UnlockOSThread()
	}()
	<-done
}

func tbAddr(t *testing.T, tb *netem.Testbed, node string) netip.Addr {
	t.Helper()
	n, ok := tb.Topology().Node(node)
	if !ok {
		t.Fatalf("no node %s", node)
	}
	return n.Addr
}

func TestBuildTeardown(t *testing.T) {
	for _, n := range []int{3, 16} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			netemtest.RequireRoot(t)
			topo, err := topologies.Star(n)
			if err != nil {
				t.Fatal(err)
			}
			run := netemtest.RunName(t)
			netemtest.RequireClean(t, run)
			linksBefore := tbRootLinks(t)
			start := time.Now()
			tb, err := netem.Build(t.Context(), topo, run)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("built %d nodes in %v", n, time.Since(start))
			closed := false
			t.Cleanup(func() {
				if !closed {
					tb.Close()
				}
			})

			c := netemtest.CountLeftovers(t, run)
			if c.Namespaces != n+1 || c.RootLinks != 0 || !c.StateDir {
				t.Fatalf("after build: %d namespaces (want %d), %d root links (want 0), state dir %v",
					c.Namespaces, n+1, c.RootLinks, c.StateDir)
			}
			tbCheckWiring(t, tb)
			st, err := netem.ReadState(run)
			if err != nil || !st.Complete || len(st.Nodes) != n || st.Owner.PID != os.Getpid() {
				t.Fatalf("state.json = %+v, %v", st, err)
			}
			if st.User == nil || *st.User != netem.CurrentUser() {
				t.Errorf("state.json records user %v, want %v", st.User, netem.CurrentUser())
			}

			for _, nd := range tb.Nodes() {
				if _, err := tb.Start(nd.Name, tbSleepArgv(run), tbHelper("sleep"), ""); err != nil {
					t.Fatal(err)
				}
			}
			if c := netemtest.CountLeftovers(t, run); c.Processes != n {
				t.Errorf("%d processes carry the run ID, want %d", c.Processes, n)
			}
			// A process nobody recorded: Close must find it by namespace.
			stray := exec.Command(os.Args[0], tbSleepArgv(run)[1:]...)
			stray.Env = tbHelper("sleep")
			if err := tb.StartCmd("n1", stray); err != nil {
				t.Fatal(err)
			}
			go stray.Wait()

			start = time.Now()
			if err := tb.Close(); err != nil {
				t.Fatal(err)
			}
			closed = true
			t.Logf("tore %d nodes down in %v", n, time.Since(start))
			if err := tb.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			netemtest.RequireClean(t, run)
			// Other tests and testbeds add and remove links here too: only
			// a new link this build could have made is its leak.
			for name := range tbRootLinks(t) {
				if !linksBefore[name] && (name == netem.NodeVeth || strings.HasPrefix(name, run)) {
					t.Errorf("link %s is in the root namespace after teardown, not before", name)
				}
			}
		})
	}
}

// tbCheckWiring checks the switch's ports and routes and every node's
// eth0, neighbour entry and subnet route.
func tbCheckWiring(t *testing.T, tb *netem.Testbed) {
	t.Helper()
	sw, err := netns.GetFromName(netem.SwitchNamespace(tb.Run()))
	if err != nil {
		t.Fatal(err)
	}
	defer sw.Close()
	h, err := netlink.NewHandleAt(sw)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if v := tbSysctlIn(t, sw, "/proc/sys/net/ipv4/ip_forward"); v != "1" {
		t.Errorf("switch namespace: ip_forward = %s, want 1", v)
	}
	for _, nd := range tb.Nodes() {
		l, err := h.LinkByName(nd.SwitchVeth)
		if err != nil {
			t.Fatalf("node %s: switch port: %v", nd.Name, err)
		}
		if a := l.Attrs(); a.Flags&net.FlagUp == 0 || a.MasterIndex != 0 || a.HardwareAddr.String() != netem.SwitchMAC.String() {
			t.Errorf("switch port %s: up %v, master %d, MAC %s; want up, none, %s", a.Name, a.Flags&net.FlagUp != 0, a.MasterIndex, a.HardwareAddr, netem.SwitchMAC)
		}
		routes, err := h.RouteGet(netip.MustParseAddr(nd.Addr).AsSlice())
		if err != nil || len(routes) != 1 || routes[0].LinkIndex != l.Attrs().Index {
			t.Errorf("switch: route to %s (%s) = %v, %v; want through %s", nd.Name, nd.Addr, routes, err, nd.SwitchVeth)
		}
	}
	for _, nd := range tb.Nodes() {
		ns, err := netns.GetFromName(nd.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		nh, err := netlink.NewHandleAt(ns)
		ns.Close()
		if err != nil {
			t.Fatal(err)
		}
		eth0, err := nh.LinkByName(netem.NodeVeth)
		if err != nil {
			nh.Close()
			t.Fatalf("node %s: %v", nd.Name, err)
		}
		addrs, _ := nh.AddrList(eth0, netlink.FAMILY_V4)
		lo, _ := nh.LinkByIndex(1)
		neighs, err := nh.NeighList(0, netlink.FAMILY_V4)
		if err != nil {
			nh.Close()
			t.Fatal(err)
		}
		// A peer is reached through the gateway, whatever N.
		peer := netip.MustParseAddr(tb.Nodes()[(nd.Index)%len(tb.Nodes())].Addr)
		routes, rerr := nh.RouteGet(peer.AsSlice())
		nh.Close()
		if want := netem.NodeMAC(netip.MustParseAddr(nd.Addr)); eth0.Attrs().HardwareAddr.String() != want.String() {
			t.Errorf("node %s: eth0 has MAC %s, want %s", nd.Name, eth0.Attrs().HardwareAddr, want)
		}
		// One permanent entry, the gateway's: no ARP is ever sent, and the
		// node's state does not grow with N.
		if len(neighs) != 1 || neighs[0].State != netlink.NUD_PERMANENT || neighs[0].LinkIndex != eth0.Attrs().Index ||
			neighs[0].IP.String() != netem.SwitchGateway.String() || neighs[0].HardwareAddr.String() != netem.SwitchMAC.String() {
			t.Errorf("node %s: neighbours %v, want only %s at %s on eth0, permanent", nd.Name, neighs, netem.SwitchGateway, netem.SwitchMAC)
		}
		if rerr != nil || len(routes) != 1 || routes[0].Gw.String() != netem.SwitchGateway.String() || routes[0].LinkIndex != eth0.Attrs().Index {
			t.Errorf("node %s: route to %s = %v, %v; want through %s on eth0", nd.Name, peer, routes, rerr, netem.SwitchGateway)
		}
		if eth0.Attrs().Flags&net.FlagUp == 0 || lo == nil || lo.Attrs().Flags&net.FlagUp == 0 {
			t.Errorf("node %s: eth0 or lo is down", nd.Name)
		}
		want := nd.Addr + "/16"
		if len(addrs) != 1 || addrs[0].IPNet.String() != want {
			t.Errorf("node %s: eth0 has %v, want %s", nd.Name, addrs, want)
		}
	}
}

// tbSysctlIn reads a /proc/sys file as seen from namespace ns.
func tbSysctlIn(t *testing.T, ns netns.NsHandle, path string) string {
	t.Helper()
	var (
		b   []byte
		err error
	)
	tbInNS(t, ns, func() { b, err = os.ReadFile(path) })
	if err != nil {
		t.Fatalf("reading %s in a namespace: %v", path, err)
	}
	return strings.TrimSpace(string(b))
}

func TestTCPBetweenNodes(t *testing.T) {
	testTCPBetweenNodes(t, netemtest.Star(t, 3))
}

// testTCPBetweenNodes checks that n2 reaches n1 over TCP, and not while n1's
// switch port is down.
func testTCPBetweenNodes(t *testing.T, tb *netem.Testbed) {
	port := tb.Topology().Port
	var ln net.Listener
	tbInNode(t, tb, "n1", func() {
		var err error
		ln, err = net.Listen("tcp", netip.AddrPortFrom(tbAddr(t, tb, "n1"), uint16(port)).String())
		if err != nil {
			t.Error(err)
		}
	})
	if ln == nil {
		t.FailNow()
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()

	to := netip.AddrPortFrom(tbAddr(t, tb, "n1"), uint16(port)).String()
	dial := func(timeout time.Duration) (net.Conn, error) {
		var c net.Conn
		var err error
		tbInNode(t, tb, "n2", func() { c, err = net.DialTimeout("tcp", to, timeout) })
		return c, err
	}
	c, err := dial(2 * time.Second)
	if err != nil {
		t.Fatalf("n2 -> n1: %v", err)
	}
	if got := c.LocalAddr().(*net.TCPAddr).IP.String(); got != tbAddr(t, tb, "n2").String() {
		t.Errorf("n2's connection comes from %s", got)
	}
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "ping\n" {
		t.Fatalf("echo = %q, %v", line, err)
	}
	c.Close()

	if err := tb.SetNodeLink("n1", false); err != nil {
		t.Fatal(err)
	}
	if c, err := dial(300 * time.Millisecond); err == nil {
		c.Close()
		t.Fatal("n2 reached n1 while n1's switch port was down")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		// A real network is silent; an error would tell n2 at once.
		t.Errorf("n2 -> n1 with n1's port down: %v, want a timeout", err)
	}
	if err := tb.SetNodeLink("n1", true); err != nil {
		t.Fatal(err)
	}
	c, err = dial(2 * time.Second)
	if err != nil {
		t.Fatalf("n2 -> n1 after reconnecting: %v", err)
	}
	c.Close()
	if err := tb.SetNodeLink("n9", false); err == nil || !strings.Contains(err.Error(), `"n9"`) {
		t.Errorf("SetNodeLink(n9) error = %v, want it to name n9", err)
	}
}

func TestSideBySide(t *testing.T) {
	a := netemtest.Star(t, 3)
	b := netemtest.Star(t, 3)
	if a.Run() == b.Run() {
		t.Fatal("two testbeds share a run ID")
	}
	// Same subnet, same addresses: each node must reach its own run's peer.
	for _, tb := range []*netem.Testbed{a, b} {
		var ln net.Listener
		tbInNode(t, tb, "n1", func() { ln, _ = net.Listen("tcp", tbAddr(t, tb, "n1").String()+":0") })
		if ln == nil {
			t.Fatalf("%s: listen failed", tb.Run())
		}
		accepted := make(chan struct{})
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.Close()
				close(accepted)
			}
		}()
		var err error
		tbInNode(t, tb, "n3", func() {
			var c net.Conn
			if c, err = net.DialTimeout("tcp", ln.Addr().String(), 2*time.Second); err == nil {
				c.Close()
			}
		})
		if err != nil {
			t.Errorf("%s: n3 -> n1: %v", tb.Run(), err)
		} else {
			<-accepted
		}
		ln.Close()
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	netemtest.RequireClean(t, a.Run())
	if c := netemtest.CountLeftovers(t, b.Run()); c.Namespaces != 4 || !c.StateDir {
		t.Errorf("closing %s disturbed %s: %+v", a.Run(), b.Run(), c)
	}
}

func TestProcesses(t *testing.T) {
	tb := netemtest.Star(t, 2)

	// The child inherits the namespace: it sees n2's address.
	var out bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^TestNetemHelperProcess$")
	cmd.Env = tbHelper("addrs")
	cmd.Stdout = &out
	if err := tb.StartCmd("n2", cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if want := tbAddr(t, tb, "n2").String() + "/16"; !strings.Contains(out.String(), want) || strings.Contains(out.String(), tbAddr(t, tb, "n1").String()+"/") {
		t.Errorf("process in n2 sees %q, want %s only", out.String(), want)
	}

	p, err := tb.Start("n1", tbSleepArgv(tb.Run()), tbHelper("sleep"), "")
	if err != nil {
		t.Fatal(err)
	}
	st, err := netem.ReadState(tb.Run())
	if err != nil || len(st.Processes) != 1 || st.Processes[0].ProcRef != p.Ref() || st.Processes[0].StartTime == 0 {
		t.Fatalf("state records %+v (err %v), want %+v", st.Processes, err, p.Ref())
	}
	if _, err := os.Stat(netem.LogPath(tb.Run(), "n1")); err != nil {
		t.Errorf("no log file: %v", err)
	}
	tbWaitState(t, p.PID(), "S")
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	tbWaitState(t, p.PID(), "T")
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	tbWaitState(t, p.PID(), "SR")
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	ps, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if ws := ps.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("killed process: %v", ps)
	}
	if err := p.Kill(); err != nil {
		t.Errorf("second Kill: %v", err)
	}
	if err := p.Pause(); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Pause after exit = %v, want os.ErrProcessDone", err)
	}

	logFile := filepath.Join(t.TempDir(), "exit.log")
	q, err := tb.Start("n2", []string{os.Args[0], "-test.run=^TestNetemHelperProcess$", "--", "3"}, tbHelper("exit"), logFile)
	if err != nil {
		t.Fatal(err)
	}
	ps, err = q.Wait()
	if err != nil || ps.ExitCode() != 3 {
		t.Errorf("exit status %v, %v; want 3", ps, err)
	}
	if st, _ := netem.ReadState(tb.Run()); st == nil || len(st.Processes) != 0 {
		t.Errorf("exited processes still recorded: %+v", st)
	}
	if _, err := tb.Start("n7", []string{"true"}, nil, ""); err == nil || !strings.Contains(err.Error(), `"n7"`) {
		t.Errorf("Start on n7: %v, want an error naming n7", err)
	}
	if err := tb.Exec("n1", []string{"true"}); err != nil {
		t.Errorf("Exec true: %v", err)
	}
	if err := tb.Exec("n1", []string{"false"}); err == nil || !strings.HasPrefix(err.Error(), "node n1: false: exit status 1") {
		t.Errorf("Exec false: %v, want an error naming node and exit status", err)
	}
}

// tbWaitState waits until /proc/PID/stat shows one of states.
func tbWaitState(t *testing.T, pid int, states string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err == nil {
			s := string(data)
			fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
			if strings.Contains(states, fields[0]) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("process %d in state %s, want one of %s", pid, fields[0], states)
			}
		} else if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAttach(t *testing.T) {
	tb := netemtest.Star(t, 2)
	at, err := netem.Attach(tb.Run())
	if err != nil {
		t.Fatal(err)
	}
	if err := at.SetNodeLink("n2", false); err != nil {
		t.Fatal(err)
	}
	if err := at.SetNodeLink("n2", true); err != nil {
		t.Fatal(err)
	}
	if _, err := at.Start("n1", []string{"true"}, nil, ""); err == nil {
		t.Error("an attached testbed started a recorded process")
	}
	if err := at.Close(); err != nil {
		t.Fatal(err)
	}
	if c := netemtest.CountLeftovers(t, tb.Run()); c.Namespaces != 3 || !c.StateDir {
		t.Errorf("closing an attached testbed tore the run down: %+v", c)
	}
	if _, err := netem.Attach(netemtest.RunName(t)); err == nil {
		t.Error("attached to a run that does not exist")
	}
}

func TestBuildRefusesTakenRun(t *testing.T) {
	tb := netemtest.Star(t, 1)
	topo, _ := topologies.Star(1)
	_, err := netem.Build(t.Context(), topo, tb.Run())
	if !errors.Is(err, netem.ErrRunExists) {
		t.Fatalf("second build of %s: %v, want ErrRunExists", tb.Run(), err)
	}
	if c := netemtest.CountLeftovers(t, tb.Run()); c.Namespaces != 2 {
		t.Errorf("failed build disturbed the first: %+v", c)
	}
	if _, err := netem.Build(t.Context(), topo, "No-pe"); err == nil || !strings.Contains(err.Error(), netem.RunNameRule) {
		t.Errorf("Build with an invalid run name: %v", err)
	}
	for _, bad := range []func(*topologies.Topology){
		func(tp *topologies.Topology) { tp.Nodes[0].Name = "../x" },
		func(tp *topologies.Topology) { tp.Nodes[0].Addr = netip.Addr{} },
		func(tp *topologies.Topology) { tp.Nodes[0].Index = 0 },
		func(tp *topologies.Topology) { tp.Nodes = append(tp.Nodes, tp.Nodes[0]) },
	} {
		tp, _ := topologies.Star(1)
		bad(tp)
		run := netemtest.RunName(t)
		if _, err := netem.Build(t.Context(), tp, run); err == nil || !strings.Contains(err.Error(), "topology star1: ") {
			t.Errorf("Build of a broken topology: %v", err)
		}
		netemtest.RequireClean(t, run)
	}
}

func TestBuildCancelled(t *testing.T) {
	netemtest.RequireRoot(t)
	topo, _ := topologies.Star(64)
	run := netemtest.RunName(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := netem.Build(ctx, topo, run); !errors.Is(err, context.Canceled) {
		t.Fatalf("Build with a cancelled context: %v", err)
	}
	netemtest.RequireClean(t, run)
}

// tbHelperBuild starts the test binary building n nodes as run; it returns
// once the child prints "ready" (when wait is true) or at once.
func tbHelperBuild(t *testing.T, run string, n int, procs bool) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	args := []string{"-test.run=^TestNetemHelperProcess$", "--", run, strconv.Itoa(n)}
	if procs {
		args = append(args, "procs")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = tbHelper("build")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, bufio.NewReader(out)
}

func TestCleanAfterKill(t *testing.T) {
	netemtest.RequireRoot(t)

	t.Run("built", func(t *testing.T) {
		// The builder's node processes outlive it. Orphans go to PID 1,
		// which on some VMs never reaps them; as subreaper this test
		// inherits them and reaps them itself.
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
		run := netemtest.RunName(t)
		cmd, out := tbHelperBuild(t, run, 8, true)
		if line, err := out.ReadString('\n'); line != "ready\n" {
			t.Fatalf("builder said %q, %v", line, err)
		}
		cmd.Process.Kill()
		cmd.Wait()
		c := netemtest.CountLeftovers(t, run)
		if c.Namespaces != 9 || c.Processes != 8 || !c.StateDir {
			t.Fatalf("killed builder left %+v, want 9 namespaces, 8 processes and the state dir", c)
		}
		st, err := netem.ReadState(run)
		if err != nil || len(st.Processes) != 8 {
			t.Fatalf("state of the killed builder: %+v, %v", st, err)
		}
		tbCleanRun(t, run)
		for _, p := range st.Processes {
			var ws unix.WaitStatus
			if _, err := unix.Wait4(p.PID, &ws, 0, nil); err != nil {
				t.Errorf("reaping node process %d: %v", p.PID, err)
			} else if ws.Signal() != unix.SIGKILL {
				t.Errorf("node process %d ended with %v, want SIGKILL", p.PID, ws)
			}
		}
	})

	t.Run("mid-build", func(t *testing.T) {
		run := netemtest.RunName(t)
		cmd, _ := tbHelperBuild(t, run, 250, false)
		deadline := time.Now().Add(30 * time.Second)
		for netemtest.CountLeftovers(t, run).Namespaces < 20 {
			if time.Now().After(deadline) {
				t.Fatal("builder created no namespaces in 30s")
			}
			time.Sleep(time.Millisecond)
		}
		cmd.Process.Kill()
		cmd.Wait()
		c := netemtest.CountLeftovers(t, run)
		t.Logf("killed builder left %d namespaces", c.Namespaces)
		if c.Namespaces == 0 || !c.StateDir {
			t.Fatalf("killed builder left %+v", c)
		}
		tbCleanRun(t, run)
	})
}

func TestCleanRootVeth(t *testing.T) {
	netemtest.RequireRoot(t)
	run := netemtest.RunID(t)
	// Left down: a link in the root namespace must carry no traffic.
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: netem.SwitchVeth(run, 1)}, PeerName: run + "x"}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netlink.LinkDel(veth) })
	if c := netemtest.CountLeftovers(t, run); c.RootLinks != 2 {
		t.Fatalf("%d links named %s* in the root namespace, want 2", c.RootLinks, run)
	}
	tbCleanRun(t, run)
}

// tbCleanRun cleans run, and only run, and checks that nothing of it is
// left.
func tbCleanRun(t *testing.T, run string) {
	t.Helper()
	rep, err := netem.CleanRuns(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep)
	switch {
	case slices.Equal(rep.Runs, []string{run}) && len(rep.Live) == 0:
	case len(rep.Runs) == 0 && len(rep.Live) == 0 && rep.Empty():
		// Found nothing: what is left of run below says whether that is
		// a bug, or a clean of every dead run, which anyone may start on
		// this machine, took it first.
		t.Logf("CleanRuns(%s) found nothing of it: another process's clean removed it first", run)
	default:
		t.Errorf("CleanRuns(%s) cleaned %v, left %v alone, want %s alone cleaned: %+v", run, rep.Runs, rep.Live, run, rep)
	}
	netemtest.RequireClean(t, run)
}

func TestCleanLeavesLiveRuns(t *testing.T) {
	tb := netemtest.Star(t, 2)
	if _, err := tb.Start("n1", tbSleepArgv(tb.Run()), tbHelper("sleep"), ""); err != nil {
		t.Fatal(err)
	}
	rep, err := netem.CleanRuns(t.Context(), tb.Run())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) > 0 || len(rep.Live) != 1 || !strings.HasPrefix(rep.Live[0], tb.Run()+" ") {
		t.Fatalf("CleanRuns(%s) of a live run: cleaned %v, left %v alone; want it left alone", tb.Run(), rep.Runs, rep.Live)
	}
	if c := netemtest.CountLeftovers(t, tb.Run()); c.Namespaces != 3 || c.Processes != 1 || !c.StateDir {
		t.Errorf("CleanRuns disturbed a live run: %+v", c)
	}
}

// TestCleanRunsOnlyThose kills two builders of runs of this test's own
// and has CleanRuns clean one of them: the other's namespaces, state and
// processes stay until it is named.
func TestCleanRunsOnlyThose(t *testing.T) {
	netemtest.RequireRoot(t)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	var runs []string
	var recorded []netem.StateProcess
	for range 2 {
		run := netemtest.RunName(t)
		cmd, out := tbHelperBuild(t, run, 2, true)
		if line, err := out.ReadString('\n'); line != "ready\n" {
			t.Fatalf("builder of %s said %q, %v", run, line, err)
		}
		cmd.Process.Kill()
		cmd.Wait()
		st, err := netem.ReadState(run)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run)
		recorded = append(recorded, st.Processes...)
	}
	t.Cleanup(func() {
		netem.CleanRuns(context.Background(), runs...)
		for _, p := range recorded {
			var ws unix.WaitStatus
			unix.Wait4(p.PID, &ws, unix.WNOHANG, nil)
		}
	})
	tbCleanRun(t, runs[0])
	if c := netemtest.CountLeftovers(t, runs[1]); c.Namespaces != 3 || c.Processes != 2 || !c.StateDir {
		t.Errorf("CleanRuns(%s) disturbed %s: it has %+v, want 3 namespaces, 2 processes and its state dir", runs[0], runs[1], c)
	}
	tbCleanRun(t, runs[1])
	for _, p := range recorded {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(p.PID, &ws, 0, nil); err != nil {
			t.Errorf("reaping node process %d: %v", p.PID, err)
		}
	}

	for _, bad := range [][]string{nil, {"No-pe"}} {
		if _, err := netem.CleanRuns(t.Context(), bad...); err == nil {
			t.Errorf("CleanRuns(%q) did not fail", bad)
		}
	}
}

func TestCleanIgnoresOthers(t *testing.T) {
	netemtest.RequireRoot(t)
	// A namespace without a run name, one whose prefix only looks like a
	// run ID, and two named like a run's but with no state directory;
	// named afresh, so that two copies of this test do not meet.
	rnd := netem.NewRunID()[2:]
	others := []string{"bullylab-test-" + rnd, "blz" + rnd[1:] + "-x", "foo" + rnd + "-sw", "blue" + rnd + "-sw"}
	var runs []string // not "bullylab": a user's run may have that name
	for _, name := range others[1:] {
		run, _, _ := strings.Cut(name, "-")
		runs = append(runs, run)
	}
	for _, name := range others {
		done := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread is discarded
			ns, err := netns.NewNamed(name)
			if err == nil {
				ns.Close()
			}
			done <- err
		}()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Unmount(netem.NetnsDir+"/"+name, unix.MNT_DETACH); os.Remove(netem.NetnsDir + "/" + name) })
	}
	// Named, as any name a user passes: still not bullylab's.
	if _, err := netem.CleanRuns(t.Context(), runs...); err != nil {
		t.Fatal(err)
	}
	for _, name := range others {
		if _, err := os.Stat(netem.NetnsDir + "/" + name); err != nil {
			t.Errorf("CleanRuns removed %s: %v", name, err)
		}
	}
}

func TestRequireRootDoesNotSkipHere(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: RequireRoot is expected to skip")
	}
	ran := false
	t.Run("probe", func(t *testing.T) {
		netemtest.RequireRoot(t)
		ran = true
	})
	if !ran {
		t.Error("RequireRoot skipped as root on a kernel with namespaces")
	}
	if err := netem.ProbeNamespaces(); err != nil {
		t.Error(err)
	}
}

// CurrentUser is who a run records as its user: the real user ID, or as
// root the user sudo says it runs for.
func TestCurrentUser(t *testing.T) {
	t.Setenv("SUDO_UID", "")
	t.Setenv("SUDO_USER", "")
	self := netem.CurrentUser()
	if self.UID != os.Getuid() {
		t.Errorf("CurrentUser() = %v, want uid %d", self, os.Getuid())
	}
	if os.Getuid() == 0 && self.Name != "root" {
		t.Errorf("CurrentUser() as root = %v, want the name root", self)
	}
	t.Setenv("SUDO_UID", "4242")
	t.Setenv("SUDO_USER", "alice")
	want := netem.RunUser{UID: 4242, Name: "alice"}
	if os.Getuid() != 0 {
		want = self // anyone can set the variables: only root trusts them
	}
	if got := netem.CurrentUser(); got != want {
		t.Errorf("CurrentUser() with SUDO_UID=4242 SUDO_USER=alice = %v, want %v", got, want)
	}
	if got, want := want.String(), "alice (uid 4242)"; os.Getuid() == 0 && got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := (netem.RunUser{UID: 4242}).String(); got != "uid 4242" {
		t.Errorf("String() of a user without a name = %q", got)
	}
}
