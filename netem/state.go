//go:build linux

package netem

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"
)

// StateRoot holds one state directory per run (see StateDir).
const StateRoot = "/run/bullylab"

// StateFile is the name of a run's record inside its state directory.
const StateFile = "state.json"

// ErrRunExists is returned (wrapped) by Build when the run ID is taken.
var ErrRunExists = errors.New("run already exists")

// RunState is what a run records in StateDir(run)/state.json. Build writes the
// namespaces before creating any of them, so that a build killed half-way
// can still be cleaned; entries that were never created are harmless.
type RunState struct {
	Run      string    `json:"run"`
	Topology string    `json:"topology"`
	Created  time.Time `json:"created"`
	// Owner is the process that built the run. Clean leaves a run alone
	// while its owner lives.
	Owner ProcRef `json:"owner"`
	// User is who started the run (CurrentUser): the commands that pick
	// the only testbed up when not given --run act only on a run of the
	// user calling them. Records of older versions have none.
	User            *RunUser `json:"user,omitempty"`
	Subnet          string   `json:"subnet"`
	Port            int      `json:"port"`
	SwitchNamespace string   `json:"switch_namespace"`
	// Switch is RoutedSwitch: the switch namespace routes between the
	// nodes. Records of older versions have none, and a "bridge" field
	// naming their switch's bridge, which reading ignores: Clean removes
	// those runs by their namespaces, as any other.
	Switch string      `json:"switch,omitempty"`
	Nodes  []StateNode `json:"nodes"`
	// Complete is set once every namespace and link exists.
	Complete  bool           `json:"complete"`
	Processes []StateProcess `json:"processes,omitempty"`
	// KeyFile is the cluster key file of a lab's nodes (KeyPath), mode
	// 0600, which verifies the tags of frames captured during the run. It
	// lives in the state directory and goes with it.
	KeyFile string `json:"key_file,omitempty"`
	// TCPTimestampUnitNS is Testbed.TCPTimestampUnit in nanoseconds, set
	// with Complete; 0 when the nodes' TSval does not follow the
	// monotonic clock.
	TCPTimestampUnitNS int64 `json:"tcp_timestamp_unit_ns,omitempty"`
}

// RunUser is who started a run.
type RunUser struct {
	UID  int    `json:"uid"`
	Name string `json:"name,omitempty"` // "" when the user database has none
}

func (u RunUser) String() string {
	if u.Name == "" {
		return "uid " + strconv.Itoa(u.UID)
	}
	return fmt.Sprintf("%s (uid %d)", u.Name, u.UID)
}

// CurrentUser returns who runs this process, as a run records it: the user
// sudo runs it for (SUDO_UID, SUDO_USER) when it runs as root through sudo,
// else its real user. The sudo variables of a process that is not root
// are ignored: anyone can set them.
func CurrentUser() RunUser {
	uid := os.Getuid()
	if uid == 0 {
		if sudo, err := strconv.Atoi(os.Getenv("SUDO_UID")); err == nil && sudo >= 0 {
			name := os.Getenv("SUDO_USER")
			if name == "" {
				name = userName(sudo)
			}
			return RunUser{UID: sudo, Name: name}
		}
	}
	return RunUser{UID: uid, Name: userName(uid)}
}

// userName looks uid up in the user database; "" when it has no entry.
func userName(uid int) string {
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return ""
	}
	return u.Username
}

// StateNode records one node's kernel objects.
type StateNode struct {
	Name       string `json:"name"`
	Index      int    `json:"index"`
	Addr       string `json:"addr"`
	Namespace  string `json:"namespace"`
	SwitchVeth string `json:"switch_veth"`
}

// StateProcess records a process started in a node namespace. Clean kills
// it only if the PID still has this start time.
type StateProcess struct {
	ProcRef
	Node string   `json:"node"`
	Argv []string `json:"argv"`
	Log  string   `json:"log,omitempty"`
}

// ReadState reads a run's record.
func ReadState(run string) (*RunState, error) {
	return readStateFile(filepath.Join(StateDir(run), StateFile))
}

func readStateFile(path string) (*RunState, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s RunState
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, nil
}

// writeStateFile replaces dir/state.json atomically, so a reader (or a kill)
// never sees half a record.
func writeStateFile(dir string, s *RunState) error {
	data, err := marshalState(s)
	if err != nil {
		return err
	}
	return writeStateData(dir, data)
}

func marshalState(s *RunState) ([]byte, error) {
	// Compact: at 250 nodes with their processes, indenting made each
	// encoding 4.8 times as long (0.91 ms against 0.19), and the record is
	// rewritten up to 20 times a second while the nodes boot. jq reads it.
	data, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// writeStateData replaces dir/state.json with data atomically.
func writeStateData(dir string, data []byte) error {
	tmp := filepath.Join(dir, StateFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, StateFile)); err != nil {
		return fmt.Errorf("writing state: %w", err)
	}
	return nil
}

// claimRun creates StateDir(run) holding s, atomically: the directory
// appears only with its state.json inside, so Clean never meets a run
// without an owner. It fails with ErrRunExists when the run ID is taken.
func claimRun(s *RunState) error {
	if err := os.MkdirAll(StateRoot, 0o755); err != nil {
		return classify(fmt.Errorf("creating %s: %w", StateRoot, err))
	}
	tmp, err := os.MkdirTemp(StateRoot, ".claim-"+s.Run+"-")
	if err != nil {
		return classify(fmt.Errorf("creating state directory: %w", err))
	}
	if err := writeStateFile(tmp, s); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	// rename(2) onto an existing non-empty directory fails (ENOTEMPTY, which
	// os.ErrExist matches), which is what makes two builds of one run ID
	// exclude each other.
	if err := os.Rename(tmp, StateDir(s.Run)); err != nil {
		os.RemoveAll(tmp)
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("run %s: %w (state in %s)", s.Run, ErrRunExists, StateDir(s.Run))
		}
		return fmt.Errorf("claiming %s: %w", StateDir(s.Run), err)
	}
	return nil
}

// ClaimRun claims run for a process that builds nothing on this host, such
// as the controller of a testbed across hosts: a state directory owned by
// this process, for its control socket and cluster key. Clean removes it
// once the owner is gone; ReleaseRun, before.
func ClaimRun(run, topology string) error {
	if !ValidRunName(run) {
		return fmt.Errorf("run %q: not a run name (%s)", run, RunNameRule)
	}
	user := CurrentUser()
	return claimRun(&RunState{Run: run, Topology: topology, Created: time.Now(), Owner: self(), User: &user, Complete: true})
}

// ReleaseRun removes the state directory ClaimRun made.
func ReleaseRun(run string) error {
	if !ValidRunName(run) {
		return fmt.Errorf("run %q: not a run name (%s)", run, RunNameRule)
	}
	return os.RemoveAll(StateDir(run))
}
