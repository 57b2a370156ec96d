//go:build linux

package netem

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/vishvananda/netlink"
)

var impairBackends = []string{BackendNFQueue, BackendNetem}

func TestImpairProbe(t *testing.T) {
	requireRoot(t)
	caps := probedCaps(t)
	t.Logf("capabilities: %+v", caps)
	if caps.Reason == "" {
		t.Fatal("probe gave no reason")
	}
	if !caps.Netem && !strings.Contains(caps.Reason, "sch_netem") && !strings.Contains(caps.Reason, "netem qdisc") {
		t.Errorf("reason %q does not say why netem is unusable", caps.Reason)
	}
	if again, err := Probe(); err != nil || again != caps {
		t.Errorf("second probe %+v, %v differs from first %+v", again, err, caps)
	}
	if caps.Backend() == "" {
		t.Skipf("the kernel offers no impairment backend: %s", caps.Reason)
	}
}

// impairer opens an Impairer on nd with the given backend.
func impairer(t *testing.T, f *fixture, nd *fixtureNode, backend string) *Impairer {
	t.Helper()
	if caps := probedCaps(t); backend == BackendNFQueue && !caps.NFQueue {
		t.Skipf("the kernel lacks NFQUEUE, which the nfqueue backend needs: %s", caps.Reason)
	}
	im, err := NewImpairer(nd.ns, f.run, NodeVeth, ImpairerOptions{Backend: backend})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := im.Close(); err != nil {
			t.Errorf("closing impairer: %v", err)
		}
	})
	if im.Backend() != backend {
		t.Fatalf("backend %q, want %q", im.Backend(), backend)
	}
	return im
}

// applyOrSkip runs set and skips the test when the kernel lacks what the
// backend needs, naming the missing piece.
func applyOrSkip(t *testing.T, set func() error) {
	t.Helper()
	err := set()
	if errors.Is(err, ErrNotSupported) {
		t.Skipf("the kernel lacks what this backend needs: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestImpairLatency(t *testing.T) {
	for _, backend := range impairBackends {
		t.Run(backend, func(t *testing.T) {
			noLeak(t)
			f := newFaultsFixture(t, 2)
			a, b := f.nodes[0], f.nodes[1]

			base := measureRTT(t, a, b, 100)
			t.Logf("baseline RTT p50 %s p99 %s", msText(pct(base, 50)), msText(pct(base, 99)))
			if p50 := pct(base, 50); p50 >= time.Millisecond {
				t.Fatalf("baseline RTT p50 %s, want < 1 ms", msText(p50))
			}

			im := impairer(t, f, a, backend)
			t.Logf("why: %s", im.Why())
			applyOrSkip(t, func() error { return im.Set(fault.Impairment{Delay: 50 * time.Millisecond}) })
			rtt := measureRTT(t, a, b, 100)
			p50, p99 := pct(rtt, 50), pct(rtt, 99)
			t.Logf("50 ms on %s egress: RTT p50 %s p99 %s min %s; stats %+v",
				a.name, msText(p50), msText(p99), msText(rtt[0]), im.Stats())
			if p50 < 50*time.Millisecond || p50 > 56*time.Millisecond {
				t.Errorf("RTT p50 %s, want 50-56 ms", msText(p50))
			}

			if err := im.Clear(); err != nil {
				t.Fatal(err)
			}
			after := measureRTT(t, a, b, 50)
			t.Logf("after Clear: RTT p50 %s", msText(pct(after, 50)))
			if p50 := pct(after, 50); p50 >= time.Millisecond {
				t.Errorf("RTT p50 after Clear %s, want < 1 ms", msText(p50))
			}
		})
	}
}

// TestImpairBothEnds delays both nodes: each namespace binds its own NFQUEUE
// 0, which works only because queues are per network namespace.
func TestImpairBothEnds(t *testing.T) {
	for _, backend := range impairBackends {
		t.Run(backend, func(t *testing.T) {
			noLeak(t)
			f := newFaultsFixture(t, 2)
			a, b := f.nodes[0], f.nodes[1]
			ia := impairer(t, f, a, backend)
			ib := impairer(t, f, b, backend)
			applyOrSkip(t, func() error { return ia.Set(fault.Impairment{Delay: 30 * time.Millisecond}) })
			applyOrSkip(t, func() error { return ib.Set(fault.Impairment{Delay: 20 * time.Millisecond}) })
			rtt := measureRTT(t, a, b, 50)
			p50 := pct(rtt, 50)
			t.Logf("30 ms + 20 ms: RTT p50 %s p99 %s; a %+v; b %+v", msText(p50), msText(pct(rtt, 99)), ia.Stats(), ib.Stats())
			if p50 < 50*time.Millisecond || p50 > 56*time.Millisecond {
				t.Errorf("RTT p50 %s, want 50-56 ms", msText(p50))
			}
		})
	}
}

func TestImpairPairs(t *testing.T) {
	for _, backend := range impairBackends {
		t.Run(backend, func(t *testing.T) {
			noLeak(t)
			f := newFaultsFixture(t, 3)
			a, b, c := f.nodes[0], f.nodes[1], f.nodes[2]
			im := impairer(t, f, a, backend)
			applyOrSkip(t, func() error { return im.Set(fault.Impairment{Delay: 10 * time.Millisecond}) })
			applyOrSkip(t, func() error { return im.SetPair(b.addr, fault.Impairment{Delay: 30 * time.Millisecond}) })

			ab, ac := measureRTT(t, a, b, 50), measureRTT(t, a, c, 50)
			t.Logf("link 10 ms, pair a→b 30 ms: RTT a-b p50 %s, a-c p50 %s", msText(pct(ab, 50)), msText(pct(ac, 50)))
			within(t, "a-b", pct(ab, 50), 30, 36)
			within(t, "a-c", pct(ac, 50), 10, 16)

			// Loss on one pair only; the link-wide delay still applies to c.
			applyOrSkip(t, func() error { return im.SetPair(b.addr, fault.Impairment{Loss: 50}) })
			copiesB, _ := udpBurst(t, a, b, 1000)
			copiesC, _ := udpBurst(t, a, c, 1000)
			t.Logf("pair a→b loss 50%%: a→b delivered %d/1000, a→c %d/1000", len(copiesB), len(copiesC))
			if n := len(copiesB); n < 400 || n > 600 {
				t.Errorf("a→b delivered %d/1000, want 400-600", n)
			}
			if n := len(copiesC); n < 995 {
				t.Errorf("a→c delivered %d/1000, want all", n)
			}

			applyOrSkip(t, func() error { return im.SetPair(b.addr, fault.Impairment{}) })
			ab = measureRTT(t, a, b, 20)
			within(t, "a-b after removing the pair", pct(ab, 50), 10, 16)
		})
	}
}

func within(t *testing.T, what string, d time.Duration, loMs, hiMs float64) {
	t.Helper()
	ms := float64(d) / float64(time.Millisecond)
	if ms < loMs || ms > hiMs {
		t.Errorf("%s: %s, want %g-%g ms", what, msText(d), loMs, hiMs)
	}
}

func TestImpairLoss(t *testing.T) {
	for _, backend := range impairBackends {
		t.Run(backend, func(t *testing.T) {
			noLeak(t)
			f := newFaultsFixture(t, 2)
			a, b := f.nodes[0], f.nodes[1]
			const n = 2000
			base, _ := udpBurst(t, a, b, n)
			t.Logf("baseline: %d/%d datagrams delivered", len(base), n)
			if len(base) < n*995/1000 {
				t.Fatalf("baseline delivered %d/%d: the fixture itself loses datagrams", len(base), n)
			}
			im := impairer(t, f, a, backend)
			applyOrSkip(t, func() error { return im.Set(fault.Impairment{Loss: 20}) })
			got, _ := udpBurst(t, a, b, n)
			pct := 100 * float64(len(got)) / n
			t.Logf("20%% loss: %d/%d delivered (%.1f%%); stats %+v", len(got), n, pct, im.Stats())
			if pct < 70 || pct > 90 {
				t.Errorf("delivered %.1f%%, want 70-90%%", pct)
			}
		})
	}
}

func TestImpairDuplicate(t *testing.T) {
	for _, backend := range impairBackends {
		t.Run(backend, func(t *testing.T) {
			noLeak(t)
			f := newFaultsFixture(t, 2)
			a, b := f.nodes[0], f.nodes[1]
			im := impairer(t, f, a, backend)
			applyOrSkip(t, func() error { return im.Set(fault.Impairment{Duplicate: 50}) })
			const n = 1000
			copies, oneWay := udpBurst(t, a, b, n)
			maxCopies := 0
			for _, c := range copies {
				maxCopies = max(maxCopies, c)
			}
			t.Logf("50%% duplication: %d distinct, %d received, at most %d copies; stats %+v", len(copies), len(oneWay), maxCopies, im.Stats())
			if len(copies) < n*995/1000 {
				t.Errorf("%d/%d distinct datagrams arrived", len(copies), n)
			}
			if len(oneWay) < n*135/100 || len(oneWay) > n*165/100 {
				t.Errorf("%d datagrams received for %d sent, want 1350-1650", len(oneWay), n)
			}
			if maxCopies > 2 {
				t.Errorf("a datagram arrived %d times", maxCopies)
			}

			// TCP must survive duplicated segments.
			rtt := measureRTT(t, a, b, 20)
			t.Logf("TCP RTT with duplication p50 %s", msText(pct(rtt, 50)))
		})
	}
}

func TestImpairJitterReorder(t *testing.T) {
	for _, backend := range impairBackends {
		t.Run(backend, func(t *testing.T) {
			noLeak(t)
			f := newFaultsFixture(t, 2)
			a, b := f.nodes[0], f.nodes[1]
			im := impairer(t, f, a, backend)

			applyOrSkip(t, func() error {
				return im.Set(fault.Impairment{Delay: 20 * time.Millisecond, Jitter: 10 * time.Millisecond})
			})
			rtt := measureRTT(t, a, b, 100)
			t.Logf("20±10 ms: RTT min %s p50 %s p90 %s p99 %s", msText(rtt[0]), msText(pct(rtt, 50)), msText(pct(rtt, 90)), msText(pct(rtt, 99)))
			within(t, "min RTT", rtt[0], 9.9, 15)
			within(t, "p50 RTT", pct(rtt, 50), 15, 26)
			// Jitter must spread the RTTs up to the 30 ms maximum, and no
			// further: p90 is 28 ms for uniform jitter. The top samples
			// also hold the shared host's scheduling latency, one stall of
			// 30 ms among the 100 when other packages' tests load CI's two
			// cores (p99 60.9 ms seen), so they are held only to reach it.
			if p99 := pct(rtt, 99); p99 < 25 {
				t.Errorf("p99 RTT: %s, want at least 25 ms", msText(p99))
			}
			within(t, "p90 RTT", pct(rtt, 90), 22, 40)

			applyOrSkip(t, func() error { return im.Set(fault.Impairment{Delay: 30 * time.Millisecond, Reorder: 25}) })
			copies, oneWay := udpBurst(t, a, b, 1000)
			// A delayed packet takes at least the 30 ms; one sent without
			// the delay takes microseconds, or as long as a stall of the
			// shared host holds the queue's reader (17% counted early at a
			// 15 ms cut in a full test run): the cut just under 30 ms
			// tells them apart through any stall shorter than the delay.
			early := 0
			for _, d := range oneWay {
				if d < 29*time.Millisecond {
					early++
				}
			}
			share := 100 * float64(early) / float64(len(oneWay))
			t.Logf("30 ms, reorder 25%%: %d/1000 arrived, %.1f%% without the delay", len(copies), share)
			if len(copies) < 995 {
				t.Errorf("%d/1000 arrived", len(copies))
			}
			if share < 18 || share > 32 {
				t.Errorf("%.1f%% arrived early, want 18-32%%", share)
			}
		})
	}
}

// TestImpairNetemClassify checks the netem backend's per-pair htb classes and
// u32 filters with a plain pfifo leaf, so the classification is verified
// even on kernels without sch_netem.
func TestImpairNetemClassify(t *testing.T) {
	noLeak(t)
	f := newFaultsFixture(t, 3)
	a, b, c := f.nodes[0], f.nodes[1], f.nodes[2]
	if caps := probedCaps(t); !caps.HTB {
		t.Skipf("the kernel lacks the sch_htb qdisc the netem backend uses for pairs (%s)", caps.Reason)
	}
	im := impairer(t, f, a, BackendNetem)
	im.backend.(*netemBackend).leaf = func(attrs netlink.QdiscAttrs, _ fault.Impairment) netlink.Qdisc {
		return &netlink.GenericQdisc{QdiscAttrs: attrs, QdiscType: "pfifo"}
	}
	if err := im.SetPair(b.addr, fault.Impairment{Delay: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := im.Set(fault.Impairment{Delay: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	udpBurst(t, a, b, 100)
	udpBurst(t, a, c, 50)

	h, err := netlink.NewHandleAt(a.ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.LinkByName(NodeVeth)
	if err != nil {
		t.Fatal(err)
	}
	classes, err := h.ClassList(l, netlink.MakeHandle(netemRootMajor, 0))
	if err != nil {
		t.Fatal(err)
	}
	packets := map[uint32]uint32{}
	for _, cl := range classes {
		if s := cl.Attrs().Statistics; s != nil && s.Basic != nil {
			packets[cl.Attrs().Handle] = s.Basic.Packets
		}
	}
	pair, dflt := packets[netlink.MakeHandle(netemRootMajor, 2)], packets[netlink.MakeHandle(netemRootMajor, 1)]
	t.Logf("htb class packets: pair class %d, default class %d", pair, dflt)
	if pair < 100 || pair > 110 {
		t.Errorf("pair class saw %d packets, want the 100 sent to b", pair)
	}
	if dflt < 50 {
		t.Errorf("default class saw %d packets, want the 50 sent to c", dflt)
	}

	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	qs, err := h.QdiscList(l)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Attrs().Handle == netlink.MakeHandle(netemRootMajor, 0) {
			t.Errorf("qdisc %v left after Close", q)
		}
	}
}

func TestImpairAutoBackend(t *testing.T) {
	noLeak(t)
	f := newFaultsFixture(t, 1)
	im, err := NewImpairer(f.nodes[0].ns, f.run, NodeVeth, ImpairerOptions{})
	requireAvailable(t, err)
	defer im.Close()
	t.Logf("auto backend %s: %s", im.Backend(), im.Why())
	if want := probedCaps(t).Backend(); im.Backend() != want {
		t.Errorf("backend %s, probe says %s", im.Backend(), want)
	}
	if _, err := NewImpairer(f.nodes[0].ns, f.run, NodeVeth, ImpairerOptions{Backend: "tc"}); err == nil {
		t.Error("unknown backend accepted")
	}
	if err := im.SetPair(netip.MustParseAddr("::1"), fault.Impairment{Loss: 1}); err == nil {
		t.Error("IPv6 pair accepted")
	}
}
