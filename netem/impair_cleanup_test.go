//go:build linux

package netem

import (
	"net"
	"slices"
	"testing"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/google/nftables"
)

// chains lists, sorted, the chains of our table in nd's namespace and
// the number of rules in each.
func chains(t *testing.T, f *fixture, nd *fixtureNode) map[string]int {
	t.Helper()
	conn, err := nftables.New(nftables.WithNetNSFd(int(nd.ns)))
	if err != nil {
		t.Fatal(err)
	}
	chains, err := conn.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, c := range chains {
		if c.Table.Name != NftTable(f.run) {
			continue
		}
		rules, err := conn.GetRules(c.Table, c)
		if err != nil {
			t.Fatal(err)
		}
		out[c.Name] = len(rules)
	}
	return out
}

// firewallRules is how many rules a Firewall's chain holds: one dropping
// the blocked sources, three for the rejected ones (resets pass, TCP is
// answered with a reset, the rest dropped).
const firewallRules = 4

func TestImpairCleanup(t *testing.T) {
	noLeak(t)
	f := newFaultsFixture(t, 2)
	a, b := f.nodes[0], f.nodes[1]
	table := []string{NftTable(f.run)}

	fw, err := NewFirewall(a.ns, f.run)
	if err != nil {
		t.Fatal(err)
	}
	// Reopening resets rather than stacking a second rule.
	fw.Close()
	if fw, err = NewFirewall(a.ns, f.run); err != nil {
		t.Fatal(err)
	}
	fw2, err := NewFirewall(a.ns, f.run)
	if err != nil {
		t.Fatal(err)
	}
	if got := chains(t, f, a); got[firewallChain] != firewallRules {
		t.Errorf("chains after reopening: %v, want %d rules in %s", got, firewallRules, firewallChain)
	}
	// fw2 shares fw's objects; closing it would remove them, so drop it
	// without Close by releasing only its resources.
	fw2.abort()

	im, err := NewImpairer(a.ns, f.run, NodeVeth, ImpairerOptions{Backend: BackendNFQueue})
	if err != nil {
		t.Fatal(err)
	}
	if err := im.Set(fault.Impairment{Delay: 5 * time.Millisecond, Loss: 1}); err != nil {
		t.Fatal(err)
	}
	if err := im.SetPair(b.addr, fault.Impairment{Delay: 7 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := fw.Block(b.addr); err != nil {
		t.Fatal(err)
	}
	if err := fw.Clear(); err != nil {
		t.Fatal(err)
	}
	measureRTT(t, a, b, 5)
	t.Logf("in use: tables %v, chains %v, queues %v, stats %+v", nftTables(t, a, f.run), chains(t, f, a), boundQueues(t, a), im.Stats())
	if got := boundQueues(t, a); !slices.Equal(got, []string{"0"}) {
		t.Errorf("bound queues %v, want [0]", got)
	}
	if got := boundQueues(t, b); len(got) != 0 {
		t.Errorf("queues bound in the other namespace: %v", got)
	}

	// Clear leaves only the duplicate-pass rule and unbinds the queue.
	if err := im.Clear(); err != nil {
		t.Fatal(err)
	}
	if got := chains(t, f, a); got[impairChain] != 1 {
		t.Errorf("chains after Clear: %v, want 1 rule in %s", got, impairChain)
	}
	if got := boundQueues(t, a); len(got) != 0 {
		t.Errorf("queues still bound after Clear: %v", got)
	}

	// Held packets are released, not dropped, when the Impairer closes.
	if err := im.Set(fault.Impairment{Delay: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	ua, ub := udpConn(t, a), udpConn(t, b)
	if _, err := ua.WriteToUDP([]byte{42}, ub.LocalAddr().(*net.UDPAddr)); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, im, 1)

	start := time.Now()
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Impairer.Close took %v", time.Since(start))
	_ = ub.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 4)
	if n, err := ub.Read(buf); err != nil || n != 1 || buf[0] != 42 {
		t.Errorf("held datagram after Close: %v %v, want it released at once", buf[:n], err)
	}
	if got := boundQueues(t, a); len(got) != 0 {
		t.Errorf("queues left after Close: %v", got)
	}
	// The Firewall still uses the table.
	if got := nftTables(t, a, f.run); !slices.Equal(got, table) {
		t.Errorf("tables after closing the impairer: %v, want %v", got, table)
	}
	if got := chains(t, f, a); len(got) != 1 || got[firewallChain] != firewallRules {
		t.Errorf("chains after closing the impairer: %v", got)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	if got := nftTables(t, a, f.run); len(got) != 0 {
		t.Errorf("tables left after Close: %v", got)
	}
	if err := im.Set(fault.Impairment{Loss: 1}); err == nil {
		t.Error("Set after Close succeeded")
	}
	if err := im.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	// The other order: Firewall first, then Impairer.
	fwb := firewall(t, f, b)
	imb, err := NewImpairer(b.ns, f.run, NodeVeth, ImpairerOptions{Backend: BackendNFQueue})
	if err != nil {
		t.Fatal(err)
	}
	if err := imb.Set(fault.Impairment{Delay: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := fwb.Close(); err != nil {
		t.Fatal(err)
	}
	if got := chains(t, f, b); len(got) != 1 || got[impairChain] == 0 {
		t.Errorf("chains after closing the firewall: %v", got)
	}
	if err := imb.Close(); err != nil {
		t.Fatal(err)
	}
	if got := nftTables(t, b, f.run); len(got) != 0 {
		t.Errorf("tables left after Close: %v", got)
	}
}

// TestDelayerSurvivesHookDrop deletes a base chain (by closing a
// Firewall) while the delayer holds a packet: the kernel drops the packet
// and answers its later verdict with ENOENT, which must not stop the delayer.
func TestDelayerSurvivesHookDrop(t *testing.T) {
	noLeak(t)
	f := newFaultsFixture(t, 2)
	a, b := f.nodes[0], f.nodes[1]
	im := impairer(t, f, a, BackendNFQueue)
	fw, err := NewFirewall(a.ns, f.run)
	if err != nil {
		t.Fatal(err)
	}
	if err := im.Set(fault.Impairment{Delay: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	ua, ub := udpConn(t, a), udpConn(t, b)
	if _, err := ua.WriteToUDP([]byte{42}, ub.LocalAddr().(*net.UDPAddr)); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, im, 1)
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	_ = ub.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, rerr := ub.Read(make([]byte, 4))
	t.Logf("datagram held while a base chain was deleted: read error %v; stats %+v", rerr, im.Stats())

	if err := im.Set(fault.Impairment{Delay: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	rtt := measureRTT(t, a, b, 20)
	within(t, "RTT after the hook drop", pct(rtt, 50), 20, 26)
}

// waitHeld waits until im's delayer holds want packets.
func waitHeld(t *testing.T, im *Impairer, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := im.Stats()
		if st.Held == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("delayer holds %d packets after 5s, want %d (stats %+v)", st.Held, want, st)
		}
		time.Sleep(time.Millisecond) // a poll interval: the deadline bounds the wait
	}
}
