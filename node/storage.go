package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/wire"
	"github.com/bullylab/bullylab/wire/bounded"
)

// A data dir holds:
//
//	lock        flock'ed by the process that uses the dir; holds its pid, for
//	            the error another process gets
//	id          the node ID: a version-4 UUID in text form and a newline
//	state.json  the last saved State (format below); written, at epoch 0,
//	            right after a new id, so that an id without it means a
//	            state that was lost (ErrStateMissing), never a fresh node
//	*.tmp-*     a save in progress; one found at open time is left over from
//	            a save that crashed, and is removed
//
// state.json is a single line:
//
//	{"format":1,"crc32c":"89abcdef","state":{"epoch":7,...}}\n
//
// format is stateFormat and is bumped on any change a reader of the old one
// would misread. crc32c is the CRC-32C (Castagnoli) of the bytes of the state
// value exactly as they appear in the file, as eight lowercase hex digits.
// state is the JSON encoding of State. Load accepts only this exact byte
// form: the checksum does not cover the envelope, so the envelope is checked
// by re-encoding it and comparing, which catches a truncated file, a flipped
// bit in a key (encoding/json matches keys case-insensitively) or a missing
// newline. A file that fails any check is reported, never reset: a node that
// forgets a HALT_ACK promise can elect two leaders in one epoch.
const (
	stateFormat   = 1
	stateFileName = "state.json"
	idFileName    = "id"
	lockFileName  = "lock"
	tmpInfix      = ".tmp-"
	crcDigits     = 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var (
	// ErrCorruptState is wrapped by every error about a state or id file that
	// exists but cannot be decoded. The node must not start from scratch in
	// its place; an operator has to look.
	ErrCorruptState = errors.New("corrupt state")
	// ErrEpochBackwards is wrapped by the error Save returns for a State whose
	// Epoch is lower than the one already saved.
	ErrEpochBackwards = errors.New("epoch would go backwards")
	// ErrDataDirLocked is wrapped by the error OpenFileStore returns when
	// another process holds the data dir.
	ErrDataDirLocked = errors.New("data dir in use")
	// ErrStoreClosed is returned by every method of a closed FileStore.
	ErrStoreClosed = errors.New("file store closed")
	// ErrStateMissing is wrapped by the error Load and Save return for a
	// data dir that has an id file but no state file: the node's epoch and
	// promises are lost, and starting it afresh could elect two leaders in
	// one epoch. ResetState starts it over on purpose.
	ErrStateMissing = errors.New("state missing")
)

// FileStore keeps a node's ID and State in a data dir that only one process
// may use at a time. Its methods are safe for concurrent use.
type FileStore struct {
	dir string

	mu   sync.Mutex
	lock *os.File // nil once closed
	// dirFD is dir, open for syncing what saves rename into it.
	dirFD int
	// epoch is the Epoch of the state on disk, once epochKnown; Save compares
	// against it so that the rule holds across restarts, not just in memory.
	epoch      uint64
	epochKnown bool
}

// OpenFileStore opens the data dir, creating it with mode 0700 if needed, and
// locks it until Close. A data dir that other users could write to, or that
// another user owns, is refused (see checkDataDir).
func OpenFileStore(dir string) (*FileStore, error) {
	if dir == "" {
		return nil, errors.New("open data dir: empty path")
	}
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open data dir: %w", err)
	}
	if err := checkDataDir(dir); err != nil {
		return nil, err
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		// Without this a crash could lose the new dir's entry, and with it
		// every file later saved (and fsynced) inside it.
		if err := syncDir(filepath.Dir(dir)); err != nil {
			return nil, fmt.Errorf("open data dir: %w", err)
		}
	}
	lock, err := lockDataDir(dir)
	if err != nil {
		return nil, err
	}
	// Only now that we hold the lock can a temp file not be another
	// process's save in progress.
	if err := removeTemps(dir); err != nil {
		lock.Close()
		return nil, err
	}
	dirFD, err := openDir(dir)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("open data dir: %w", err)
	}
	return &FileStore{dir: dir, lock: lock, dirFD: dirFD}, nil
}

// checkDataDir refuses a data dir that another user could change: one
// with group or other write permission, or owned by another user. Whoever
// can write there can replace the id or state file, and with them the
// node's identity and promises, or put their own socket at the control
// socket's path.
func checkDataDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("open data dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("data dir %s: not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("data dir %s: owned by uid %d, not by this user (uid %d); use a data dir of your own, or run chown %d %s && chmod 700 %s", dir, st.Uid, os.Geteuid(), os.Geteuid(), dir, dir)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("data dir %s: mode %04o lets other users write to it; run chmod 700 %s", dir, perm, dir)
	}
	return nil
}

// Dir returns the data dir as given to OpenFileStore.
func (s *FileStore) Dir() string { return s.dir }

// Close releases the data dir. Calling it again is a no-op.
func (s *FileStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return nil
	}
	// Closing the descriptor releases the flock. The lock file stays:
	// removing it would let a process that opened it just before the removal
	// lock the orphaned inode while the next one locks a new file, and both
	// would run.
	err := s.lock.Close()
	s.lock = nil
	syscall.Close(s.dirFD)
	if err != nil {
		return fmt.Errorf("unlock data dir %s: %w", s.dir, err)
	}
	return nil
}

// Load returns the saved State, or (nil, nil) if none was ever saved: a
// fresh node, whose data dir has no id file either (LoadOrCreateID saves a
// first State along with a new ID). An id file without a state file is an
// error wrapping ErrStateMissing. A state file that exists but cannot be decoded is an error
// wrapping ErrCorruptState; one that cannot be read is an error wrapping the
// I/O error, so that a permission problem is not mistaken for corruption.
func (s *FileStore) Load() (*election.State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return nil, ErrStoreClosed
	}
	st, err := s.load()
	if err != nil {
		return nil, err
	}
	s.noteEpoch(st)
	return st, nil
}

func (s *FileStore) load() (*election.State, error) {
	path := filepath.Join(s.dir, stateFileName)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, s.checkFresh()
	}
	if err != nil {
		return nil, fmt.Errorf("load state: %w", err)
	}
	return decodeStateFile(path, data)
}

// checkFresh returns nil for a data dir without an id file, one whose
// missing state file means a fresh node, and an error wrapping
// ErrStateMissing for one with an id file, whose state was lost.
func (s *FileStore) checkFresh() error {
	_, err := os.Lstat(filepath.Join(s.dir, idFileName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("load state: %w", err)
	}
	return fmt.Errorf("%w: data dir %s has an %s file but no %s: the node's saved epoch and promises are lost", ErrStateMissing, s.dir, idFileName, stateFileName)
}

// ResetState starts a data dir whose state file is missing over: it saves
// a fresh State at epoch 0, keeping the ID. The node then forgets every
// promise it made, so an operator asks for this only knowing that the state
// is gone. A data dir that has a state file is refused, so that a reset
// cannot discard a state that exists; a fresh one (no id file) needs no
// reset and is left as it is.
func (s *FileStore) ResetState() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return ErrStoreClosed
	}
	path := filepath.Join(s.dir, stateFileName)
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("reset state: data dir %s has a %s; nothing to reset (a reset only starts a node whose state file is lost)", s.dir, stateFileName)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("reset state: %w", err)
	}
	if err := s.checkFresh(); err == nil {
		return nil
	} else if !errors.Is(err, ErrStateMissing) {
		return err
	}
	return s.saveFirst()
}

// saveFirst saves a fresh State at epoch 0; s.mu must be held.
func (s *FileStore) saveFirst() error {
	data, err := encodeState(&election.State{})
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	if _, err := writeAtomic(s.dir, s.dirFD, stateFileName, data); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	s.epoch, s.epochKnown = 0, true
	return nil
}

func decodeStateFile(path string, data []byte) (*election.State, error) {
	st, err := decodeState(data)
	if err != nil {
		return nil, fmt.Errorf("%w in %s: %v", ErrCorruptState, path, err)
	}
	return st, nil
}

func (s *FileStore) noteEpoch(st *election.State) {
	s.epoch, s.epochKnown = 0, true
	if st != nil {
		s.epoch = st.Epoch
	}
}

// Save replaces the saved State with st. When it returns nil, st is on
// stable storage and survives a crash or power loss; when it returns an
// error, either the old or the new State is on disk, never a mix. It refuses
// a State whose Epoch is lower than the saved one.
func (s *FileStore) Save(st *election.State) error {
	if st == nil {
		return errors.New("nil State")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return ErrStoreClosed
	}
	path := filepath.Join(s.dir, stateFileName)
	if !s.epochKnown {
		// Saving without a Load first must not bypass the epoch rule, nor
		// overwrite a corrupt file that nobody has looked at.
		prev, err := s.load()
		if err != nil {
			return fmt.Errorf("reading the saved state first: %w", err)
		}
		s.noteEpoch(prev)
	}
	if st.Epoch < s.epoch {
		return fmt.Errorf("%w: refusing to save epoch %d over epoch %d in %s", ErrEpochBackwards, st.Epoch, s.epoch, path)
	}
	pieces, err := statePieces(st)
	if err != nil {
		return err
	}
	// Save's caller says "save state"; writeAtomic's errors name the file.
	renamed, err := writeAtomic(s.dir, s.dirFD, stateFileName, pieces...)
	if renamed {
		// Even if the dir fsync failed, the new file is what a reader sees now.
		s.epoch = st.Epoch
	}
	if err != nil {
		return err
	}
	return nil
}

// LoadOrCreateID returns the node ID kept in the data dir. If there is none
// yet it stores want, or a new random version-4 UUID if want is uuid.Nil,
// and then, unless the dir has one, a first State at epoch 0: from then on
// a missing state file means a lost one (see Load). A stored ID that
// differs from a non-nil want is an error: the operator pointed a node at
// another node's data dir.
func (s *FileStore) LoadOrCreateID(want uuid.UUID) (uuid.UUID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return uuid.Nil, ErrStoreClosed
	}
	path := filepath.Join(s.dir, idFileName)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		id, err := decodeID(data)
		if err != nil {
			return uuid.Nil, fmt.Errorf("%w in %s: %v", ErrCorruptState, path, err)
		}
		if want != uuid.Nil && want != id {
			return uuid.Nil, fmt.Errorf("data dir %s belongs to node %s, not %s", s.dir, id, want)
		}
		return id, nil
	case !errors.Is(err, fs.ErrNotExist):
		return uuid.Nil, fmt.Errorf("load node ID: %w", err)
	}

	id := want
	_, statErr := os.Lstat(filepath.Join(s.dir, stateFileName))
	if statErr != nil && !errors.Is(statErr, fs.ErrNotExist) {
		return uuid.Nil, fmt.Errorf("load state: %w", statErr)
	}
	hasState := statErr == nil
	if id == uuid.Nil {
		// A dir with state but no id lost its identity; a fresh random one
		// would silently turn it into a different node with another node's
		// promises and epoch. Only the operator knows the right ID.
		if hasState {
			return uuid.Nil, fmt.Errorf("data dir %s has a %s but no %s file; give the node's ID explicitly", s.dir, stateFileName, idFileName)
		}
		if id, err = uuid.NewRandom(); err != nil {
			return uuid.Nil, fmt.Errorf("generate node ID: %w", err)
		}
	} else if why := election.IDProblem(id); why != "" {
		return uuid.Nil, fmt.Errorf("node ID %s is not a version-4 UUID (%s)", id, why)
	}
	if _, err := writeAtomic(s.dir, s.dirFD, idFileName, []byte(id.String()+"\n")); err != nil {
		return uuid.Nil, fmt.Errorf("save node ID: %w", err)
	}
	// The ID goes first: a crash between the two writes leaves an id
	// without state, which Load refuses and ResetState mends, rather than
	// a state without an id, which needs the operator to know the ID.
	if !hasState {
		if err := s.saveFirst(); err != nil {
			return uuid.Nil, err
		}
	}
	return id, nil
}

// decodeID accepts surrounding whitespace so that an operator can write the
// file with echo or an editor.
func decodeID(data []byte) (uuid.UUID, error) {
	text := strings.TrimSpace(string(data))
	if text == "" {
		return uuid.Nil, errors.New("empty file")
	}
	if len(text) != 36 {
		return uuid.Nil, fmt.Errorf("%s is not a UUID", bounded.Quote(text))
	}
	id, err := uuid.Parse(text)
	if err != nil {
		return uuid.Nil, fmt.Errorf("%s is not a UUID", bounded.Quote(text))
	}
	if why := election.IDProblem(id); why != "" {
		return uuid.Nil, fmt.Errorf("%s is not a version-4 UUID (%s)", id, why)
	}
	return id, nil
}

func encodeState(st *election.State) ([]byte, error) {
	pieces, err := statePieces(st)
	return bytes.Join(pieces, nil), err
}

// stateHead is State's fields before Members, in State's order.
type stateHead struct {
	Epoch       uint64          `json:"epoch"`
	Promise     election.Ballot `json:"promise"`
	Leader      uuid.UUID       `json:"leader"`
	LeaderEpoch uint64          `json:"leader_epoch"`
}

// statePieces returns st's file contents, byte for byte what envelope
// makes of json.Marshal(st), as pieces to write in order. The members'
// piece is shared (membersJSON) and must not be modified.
func statePieces(st *election.State) ([][]byte, error) {
	members, err := membersJSON(st.Members)
	if err != nil {
		return nil, err
	}
	head, err := json.Marshal(stateHead{Epoch: st.Epoch, Promise: st.Promise, Leader: st.Leader, LeaderEpoch: st.LeaderEpoch})
	if err != nil {
		return nil, err
	}
	head = append(head[:len(head)-1], `,"members":`...) // its closing brace comes after the members
	tail := []byte("}")
	if st.Left {
		tail = []byte(`,"left":true}`)
	}
	crc := crc32.Update(crc32.Update(crc32.Checksum(head, castagnoli), castagnoli, members), castagnoli, tail)
	return [][]byte{envelopeOpen(nil, stateFormat, formatCRC(crc)), head, members, append(tail, envelopeClose...)}, nil
}

func checksum(body []byte) string { return formatCRC(crc32.Checksum(body, castagnoli)) }

func formatCRC(crc uint32) string { return fmt.Sprintf("%0*x", crcDigits, crc) }

// sharedMembers is the member list this process encoded last, of
// sharedMembersMin members or more, with its JSON. Members are all but a
// hundred bytes of a state file and change only when a member joins or
// leaves, while a node saves on every promise and leader change, and the
// nodes of one host process have the same members: at 1000 members,
// encoding them took a millisecond a save, and 1000 nodes booting in one
// host process spent most of their CPU on it, and much of the rest
// faulting in fresh copies of it. Neither slice is ever modified.
var sharedMembers struct {
	sync.Mutex
	members []wire.Member
	json    []byte
}

// sharedMembersMin is the shortest member list sharedMembers keeps: a
// node's first state, with none, must not evict its host's long one.
const sharedMembersMin = 64

// membersJSON returns ms's JSON, shared when ms is long (sharedMembers).
func membersJSON(ms []wire.Member) ([]byte, error) {
	if len(ms) < sharedMembersMin {
		return json.Marshal(ms)
	}
	sharedMembers.Lock()
	defer sharedMembers.Unlock()
	if !slices.Equal(ms, sharedMembers.members) {
		b, err := json.Marshal(ms)
		if err != nil {
			return nil, err
		}
		sharedMembers.members, sharedMembers.json = slices.Clone(ms), b
	}
	return sharedMembers.json, nil
}

// envelopeClose ends what envelopeOpen began, after the state.
const envelopeClose = "}\n"

func envelopeOpen(b []byte, format int, crc string) []byte {
	return fmt.Appendf(b, `{"format":%d,"crc32c":"%s","state":`, format, crc)
}

func envelope(format int, crc string, body []byte) []byte {
	b := envelopeOpen(make([]byte, 0, len(body)+64), format, crc)
	b = append(b, body...)
	return append(b, envelopeClose...)
}

// decodeState returns the State in a state file, or why it cannot.
func decodeState(data []byte) (*election.State, error) {
	if len(data) == 0 {
		return nil, errors.New("empty file")
	}
	var env struct {
		Format int             `json:"format"`
		CRC    string          `json:"crc32c"`
		State  json.RawMessage `json:"state"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("undecodable (truncated?): %v", err)
	}
	// Check the version before the layout, so that a file from a newer
	// build says so instead of looking damaged.
	if env.Format != stateFormat {
		return nil, fmt.Errorf("format version %d, this build reads only version %d", env.Format, stateFormat)
	}
	if !isChecksum(env.CRC) {
		return nil, fmt.Errorf("bad checksum field %s", bounded.Quote(env.CRC))
	}
	if !bytes.Equal(data, envelope(env.Format, env.CRC, env.State)) {
		return nil, errors.New("not in the exact form this program writes (truncated, or edited by hand?)")
	}
	if got := checksum(env.State); got != env.CRC {
		return nil, fmt.Errorf("checksum mismatch: stored %s, computed %s", env.CRC, got)
	}
	if len(env.State) == 0 || env.State[0] != '{' {
		return nil, errors.New("state is not a JSON object")
	}
	// Unknown fields are refused rather than dropped: the file passed its
	// checksum, so they were written by a build that thought they mattered.
	dec := json.NewDecoder(bytes.NewReader(env.State))
	dec.DisallowUnknownFields()
	var st election.State
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("bad state: %v", err)
	}
	return &st, nil
}

func isChecksum(s string) bool {
	if len(s) != crcDigits {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// writeAtomic replaces dir/name with the concatenation of pieces so that a
// crash at any point leaves either the old file or the new one; dirFD is
// dir, open, for the final sync. renamed reports whether the new file took
// the old one's place, which is the case even if that sync failed.
//
// It calls the system directly, not through package os: a node saves on
// every promise, on the path of an election's messages, and os's file
// (registering with the poller, a write a piece, then the Lstat in Rename)
// took 24 system calls a save where this takes 6. On this kind of VM a
// system call costs about 2 µs: BenchmarkSaveState on tmpfs went from 152
// to 92 µs (medians of 3 interleaved rounds).
func writeAtomic(dir string, dirFD int, name string, pieces ...[]byte) (renamed bool, err error) {
	fd, tmp, err := createTemp(dir, name+tmpInfix)
	if err != nil {
		return false, err
	}
	defer func() {
		if !renamed {
			syscall.Unlink(tmp)
		}
	}()
	if err := writePieces(fd, pieces); err != nil {
		syscall.Close(fd)
		return false, &fs.PathError{Op: "write", Path: tmp, Err: err}
	}
	// Without this fsync the rename can reach the disk before the data, and
	// a power loss leaves an empty or partial file under the final name. A
	// fresh temp file per save also means a retry after a failed fsync
	// cannot "succeed" on pages the kernel already dropped.
	if err := ignoringEINTR(func() error { return syscall.Fsync(fd) }); err != nil {
		syscall.Close(fd)
		return false, &fs.PathError{Op: "sync", Path: tmp, Err: err}
	}
	if err := syscall.Close(fd); err != nil {
		return false, &fs.PathError{Op: "close", Path: tmp, Err: err}
	}
	final := filepath.Join(dir, name)
	if err := syscall.Rename(tmp, final); err != nil {
		return false, &os.LinkError{Op: "rename", Old: tmp, New: final, Err: err}
	}
	// The rename lives in the directory; until it is synced a crash can
	// bring the old file back.
	if err := ignoringEINTR(func() error { return syscall.Fsync(dirFD) }); err != nil {
		return true, fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return true, nil
}

// createTemp creates and opens a new file in dir named prefix and a random
// number, as os.CreateTemp does, and returns its descriptor and path.
func createTemp(dir, prefix string) (int, string, error) {
	for range 10000 {
		path := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10))
		var fd int
		err := ignoringEINTR(func() (err error) {
			fd, err = syscall.Open(path, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, 0o600)
			return err
		})
		if err == nil {
			return fd, path, nil
		}
		if err != syscall.EEXIST {
			return -1, "", &fs.PathError{Op: "open", Path: path, Err: err}
		}
	}
	return -1, "", &fs.PathError{Op: "createtemp", Path: filepath.Join(dir, prefix+"*"), Err: fs.ErrExist}
}

// writePieces writes every piece to fd, in one writev(2) unless it is
// cut short.
func writePieces(fd int, pieces [][]byte) error {
	pieces = slices.Clone(pieces)
	n := 0 // bytes of pieces written and not yet dropped from it
	for {
		for len(pieces) > 0 && n >= len(pieces[0]) {
			n -= len(pieces[0])
			pieces = pieces[1:]
		}
		if len(pieces) == 0 {
			return nil
		}
		pieces[0] = pieces[0][n:]
		var err error
		n, err = unix.Writev(fd, pieces)
		switch {
		case err == unix.EINTR:
			n = 0
		case err != nil:
			return err
		case n == 0:
			return io.ErrShortWrite
		}
	}
}

func ignoringEINTR(call func() error) error {
	for {
		if err := call(); err != syscall.EINTR {
			return err
		}
	}
}

// openDir opens dir for syncing its entries.
func openDir(dir string) (int, error) {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return fd, nil
}

func syncDir(dir string) error {
	fd, err := openDir(dir)
	if err == nil {
		err = ignoringEINTR(func() error { return syscall.Fsync(fd) })
		if cerr := syscall.Close(fd); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// removeTemps removes what saves that crashed left behind. Their
// content is never used: the rename never happened, so the previous file is
// still the one in force.
func removeTemps(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("open data dir: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, stateFileName+tmpInfix) || strings.HasPrefix(name, idFileName+tmpInfix) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("remove leftover temp file: %w", err)
			}
		}
	}
	return nil
}

// lockDataDir takes an exclusive flock on dir/lock. flock locks belong to the
// open file description, so the kernel drops them when the last descriptor
// closes, including when the process dies of SIGKILL or a crash: there is
// never a stale lock to clean up. (The pid left in the file may be stale; it
// is only shown while its writer still holds the lock.) os.OpenFile sets
// O_CLOEXEC, so child processes do not inherit the lock. flock may not work
// across hosts on NFS; a data dir is meant to be local.
func lockDataDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	fd := int(f.Fd())
	for {
		err = syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		holder := ""
		buf := make([]byte, 32)
		n, _ := f.ReadAt(buf, 0)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(buf[:n]))); perr == nil && pid > 0 {
			holder = fmt.Sprintf(" (pid %d)", pid)
		}
		f.Close()
		return nil, fmt.Errorf("%w: %s is locked by another process%s", ErrDataDirLocked, dir, holder)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock data dir %s: %w", dir, err)
	}
	// The pid only serves the error message above, so failing to write it
	// is not worth refusing to start.
	if f.Truncate(0) == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
