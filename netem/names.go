//go:build linux

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

// Every kernel object a testbed creates carries its run name, so that two
// testbeds side by side never clash and `bullylab clean` finds what a killed
// run left behind without touching anything else.
//
//	run name          1 to 10 of [a-z0-9], a letter first   mylab, bl3f2a
//	switch namespace  <run>-sw                     bl3f2a-sw
//	node namespace    <run>-<node>                 bl3f2a-n007
//	switch-side veth  <run>v<index>                bl3f2av7
//	node-side veth    eth0 (node namespace)
//	nftables table    bullylab_<run> (inet family, in each node namespace)
//	state directory   /run/bullylab/<run>/
//
// A run name is given with --run or drawn by NewRunID: "bl" and 4 hex
// digits, a run ID. Interface names must fit IFNAMSIZ-1 = 15 bytes: a veth
// takes the name, "v" and up to 4 digits of node index (topologies allow
// 1..9999), which leaves 10 bytes for the name. Names hold no "-", so a
// namespace's run is what precedes its first "-", and no two runs share a
// kernel name: a veth name ends in digits after its last "v". (Runs built
// before the switch routed also had a bridge, <run>br, inside their switch
// namespace; deleting the namespace deletes it.)
//
// The kernel names carry no fixed marker: a marker that fits IFNAMSIZ
// next to a useful name is two letters, and "bl" followed by any name would
// claim foreign namespaces such as blue-sw. The state directory is the
// authority instead. Build claims it and writes state.json before it
// creates anything, and Close removes it last, so every kernel object of a
// bullylab run has a state directory beside it for as long as it exists;
// Clean removes the objects of a name only when that directory exists,
// never someone's foo-sw with no /run/bullylab/foo. Objects named after a
// run ID (bl and 4 hex digits) are cleaned even without one, as before run
// names were free-form: that pattern is bullylab's alone, and test
// fixtures build such namespaces without a state directory. Build refuses
// a name while namespaces named after it exist, so a state directory is
// never claimed over someone else's objects.

// RunPrefix starts every run ID NewRunID draws.
const RunPrefix = "bl"

// MaxRunName is the longest run name: SwitchVeth of node index 9999 then
// fills IFNAMSIZ-1 = 15 bytes.
const MaxRunName = 10

// RunNameRule says what a run name may be, for error messages.
const RunNameRule = "1 to 10 characters of a-z and 0-9, starting with a letter"

var runIDPattern = regexp.MustCompile(`^bl[0-9a-f]{4}$`)

// NewRunID returns a fresh random run ID.
func NewRunID() string {
	var b [2]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return RunPrefix + hex.EncodeToString(b[:])
}

// ValidRunID reports whether s has the form NewRunID returns. Any valid
// run name names a run; this form alone also marks kernel objects as
// bullylab's without a state directory (see above).
func ValidRunID(s string) bool { return runIDPattern.MatchString(s) }

// CheckRunName returns nil when s may name a run, else an error that
// quotes s and states the rule.
func CheckRunName(s string) error {
	if !ValidRunName(s) {
		return fmt.Errorf("run name %q: want %s", s, RunNameRule)
	}
	return nil
}

// ValidRunName reports whether s may name a run. Bytes, not runes, are
// checked: anything beyond ASCII is refused.
func ValidRunName(s string) bool {
	if len(s) < 1 || len(s) > MaxRunName || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// RunOfNamespace returns the run name a namespace name belongs to, if it
// has the form of one; whether the run is bullylab's is for its state
// directory to say.
func RunOfNamespace(ns string) (string, bool) {
	run, _, ok := strings.Cut(ns, "-")
	return run, ok && ValidRunName(run)
}

// RunOfLink returns the run name an interface name belongs to, if it has
// the form of SwitchVeth.
func RunOfLink(name string) (string, bool) {
	i := strings.LastIndexByte(name, 'v')
	if i < 0 || i == len(name)-1 {
		return "", false
	}
	for _, c := range []byte(name[i+1:]) {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return name[:i], ValidRunName(name[:i])
}

// SwitchNamespace names the namespace of a run's switch.
func SwitchNamespace(run string) string { return run + "-sw" }

// NodeNamespace names the namespace of a run's node.
func NodeNamespace(run, node string) string { return run + "-" + node }

// SwitchVeth names the switch-side end of node index i's veth.
func SwitchVeth(run string, i int) string { return fmt.Sprintf("%sv%d", run, i) }

// NodeVeth is the name of the node-side veth inside every node namespace.
const NodeVeth = "eth0"

// NodeMAC is the hardware address of a node's eth0: locally administered,
// 02:62 ('b') followed by the node's IPv4 address, so that a capture names
// the node by its MAC too, and the switch knows every node's MAC without
// asking (see addSwitchRoute).
func NodeMAC(addr netip.Addr) net.HardwareAddr {
	a := addr.As4()
	return net.HardwareAddr{0x02, 0x62, a[0], a[1], a[2], a[3]}
}

// NftTable names a run's nftables table.
func NftTable(run string) string { return "bullylab_" + run }

// StateDir is where a run records what it created, for `bullylab clean`.
func StateDir(run string) string { return "/run/bullylab/" + run }
