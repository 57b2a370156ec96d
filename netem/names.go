package netem

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
)

// Every kernel object a testbed creates carries its run ID, so that two
// testbeds side by side never clash and `bullylab clean` finds what a killed
// run left behind without touching anything else.
//
//	run ID            bl + 4 hex digits            bl3f2a
//	switch namespace  <run>-sw                     bl3f2a-sw
//	node namespace    <run>-<node>                 bl3f2a-n007
//	bridge            <run>br (switch namespace)   bl3f2abr
//	switch-side veth  <run>v<index>                bl3f2av7
//	node-side veth    eth0 (node namespace)
//	nftables table    bullylab_<run> (inet family, in each node namespace)
//	state directory   /run/bullylab/<run>/
//
// Interface names must fit IFNAMSIZ-1 = 15 bytes: 6 + 1 + up to 4 digits.

// RunPrefix starts every run ID.
const RunPrefix = "bl"

var runIDPattern = regexp.MustCompile(`^bl[0-9a-f]{4}$`)

// NewRunID returns a fresh random run ID.
func NewRunID() string {
	var b [2]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return RunPrefix + hex.EncodeToString(b[:])
}

// ValidRunID reports whether s has the form NewRunID returns.
func ValidRunID(s string) bool { return runIDPattern.MatchString(s) }

// RunOfNamespace returns the run ID a namespace name belongs to.
func RunOfNamespace(ns string) (string, bool) {
	run, _, ok := strings.Cut(ns, "-")
	return run, ok && ValidRunID(run)
}

// SwitchNamespace names the namespace holding a run's bridge.
func SwitchNamespace(run string) string { return run + "-sw" }

// NodeNamespace names the namespace of a run's node.
func NodeNamespace(run, node string) string { return run + "-" + node }

// BridgeName names a run's bridge.
func BridgeName(run string) string { return run + "br" }

// SwitchVeth names the switch-side end of node index i's veth.
func SwitchVeth(run string, i int) string { return fmt.Sprintf("%sv%d", run, i) }

// NodeVeth is the name of the node-side veth inside every node namespace.
const NodeVeth = "eth0"

// NodeMAC is the hardware address of a node's eth0: locally administered,
// 02:62 ('b') followed by the node's IPv4 address, so that a capture names
// the node by its MAC too and every node knows every peer's MAC without
// asking (see Build).
func NodeMAC(addr netip.Addr) net.HardwareAddr {
	a := addr.As4()
	return net.HardwareAddr{0x02, 0x62, a[0], a[1], a[2], a[3]}
}

// NftTable names a run's nftables table.
func NftTable(run string) string { return "bullylab_" + run }

// StateDir is where a run records what it created, for `bullylab clean`.
func StateDir(run string) string { return "/run/bullylab/" + run }
