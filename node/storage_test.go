package node

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

var (
	idA = uuid.MustParse("6f1c2d3e-8a4b-4c5d-9e6f-0a1b2c3d4e5f")
	idB = uuid.MustParse("0b7e9a51-3c2d-4f10-8e7a-5b6c7d8e9f01")
	idC = uuid.MustParse("c3a1f0de-7b62-4e35-a9d4-1e2f3a4b5c6d")
)

func sampleState(epoch uint64) *election.State {
	return &election.State{
		Epoch:       epoch,
		Promise:     election.Ballot{Epoch: epoch, ID: idC},
		Leader:      idC,
		LeaderEpoch: epoch,
		Members: []wire.Member{
			{ID: idB, Addr: "10.0.0.2:7946"},
			{ID: idA, Addr: "[fd00::1]:7946"},
			{ID: idC, Addr: "node3.example.com:7946"},
		},
	}
}

func openTestStore(t testing.TB, dir string) *FileStore {
	t.Helper()
	s, err := OpenFileStore(dir)
	if err != nil {
		t.Fatalf("OpenFileStore: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func checkOneLine(t *testing.T, err error) {
	t.Helper()
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error spans lines: %q", err)
	}
}

func TestFileStoreRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "data")
	s := openTestStore(t, dir)

	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("data dir: %v, %v; want mode 0700", fi.Mode(), err)
	}
	st, err := s.Load()
	if st != nil || err != nil {
		t.Fatalf("fresh Load = %+v, %v; want nil, nil", st, err)
	}

	want := sampleState(7)
	if err := s.Save(want); err != nil {
		t.Fatalf("Save: %v", err)
	}
	got, err := s.Load()
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Load = %+v, %v; want %+v", got, err, want)
	}
	if fi, err := os.Stat(filepath.Join(dir, stateFileName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file: %v, %v; want mode 0600", fi.Mode(), err)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"lock", "state.json"}) {
		t.Errorf("data dir holds %q; want no temp files left", names)
	}

	// A restarted process sees the same state.
	s.Close()
	s2 := openTestStore(t, dir)
	got, err = s2.Load()
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Load after reopen = %+v, %v; want %+v", got, err, want)
	}

	// The zero State round-trips too (nil Members stays nil).
	if err := s2.Save(&election.State{Epoch: 7}); err != nil {
		t.Fatal(err)
	}
	got, err = s2.Load()
	if err != nil || !reflect.DeepEqual(got, &election.State{Epoch: 7}) {
		t.Fatalf("Load = %+v, %v", got, err)
	}

	if err := s2.Save(nil); err == nil {
		t.Error("Save(nil) succeeded")
	}
}

func TestFileStoreEpochNeverBackwards(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	if err := s.Save(sampleState(5)); err != nil {
		t.Fatal(err)
	}
	err := s.Save(sampleState(3))
	if !errors.Is(err, ErrEpochBackwards) || !strings.Contains(err.Error(), "epoch 3") || !strings.Contains(err.Error(), "epoch 5") {
		t.Fatalf("Save(epoch 3) after 5 = %v; want ErrEpochBackwards naming 3 and 5", err)
	}
	checkOneLine(t, err)
	// Same epoch is fine: the promise or leader can change within an epoch.
	if err := s.Save(sampleState(5)); err != nil {
		t.Fatalf("Save same epoch: %v", err)
	}
	if err := s.Save(sampleState(6)); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// The rule holds across a restart even if the new process saves before
	// it loads.
	s2 := openTestStore(t, dir)
	if err := s2.Save(sampleState(4)); !errors.Is(err, ErrEpochBackwards) {
		t.Fatalf("Save(epoch 4) after restart at 6 = %v; want ErrEpochBackwards", err)
	}
	got, err := s2.Load()
	if err != nil || got.Epoch != 6 {
		t.Fatalf("Load = %+v, %v; want epoch 6 kept", got, err)
	}
}

func TestFileStoreCorrupt(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	if err := s.Save(sampleState(9)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, stateFileName)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	check := func(t *testing.T, name string, data []byte) {
		t.Helper()
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := s.Load()
		if err == nil {
			t.Fatalf("%s: Load succeeded with %+v", name, st)
		}
		if !errors.Is(err, ErrCorruptState) || !strings.Contains(err.Error(), path) {
			t.Fatalf("%s: Load error %q; want ErrCorruptState naming %s", name, err, path)
		}
		checkOneLine(t, err)
	}

	t.Run("bit flips", func(t *testing.T) {
		// CRC-32C catches every single-bit error in the body; the exact-form
		// check must catch every one in the envelope.
		for i := range good {
			for bit := range 8 {
				data := bytes.Clone(good)
				data[i] ^= 1 << bit
				check(t, fmt.Sprintf("bit %d of byte %d", bit, i), data)
			}
		}
	})
	t.Run("truncation", func(t *testing.T) {
		for n := range len(good) {
			check(t, fmt.Sprintf("first %d bytes", n), good[:n])
		}
	})
	body := []byte(`{"epoch":9}`)
	for name, data := range map[string][]byte{
		"empty":          {},
		"garbage":        []byte("\x00\xff\x13garbage"),
		"zeros":          make([]byte, 4096),
		"json array":     []byte("[1,2,3]\n"),
		"plain state":    []byte(`{"epoch":9}` + "\n"),
		"future format":  envelope(2, checksum(body), body),
		"spaces added":   []byte(strings.Replace(string(envelope(1, checksum(body), body)), ",", ", ", 1)),
		"upper-case crc": envelope(1, strings.ToUpper(checksum([]byte(`{"epoch":99}`))), []byte(`{"epoch":99}`)),
		"null state":     envelope(1, checksum([]byte("null")), []byte("null")),
		"unknown field":  envelope(1, checksum([]byte(`{"epoch":9,"x":1}`)), []byte(`{"epoch":9,"x":1}`)),
		"wrong type":     envelope(1, checksum([]byte(`{"epoch":"9"}`)), []byte(`{"epoch":"9"}`)),
		"appended":       append(bytes.Clone(good), good...),
	} {
		t.Run(name, func(t *testing.T) { check(t, name, data) })
	}

	t.Run("future format names version", func(t *testing.T) {
		os.WriteFile(path, envelope(2, checksum(body), body), 0o600)
		if _, err := s.Load(); err == nil || !strings.Contains(err.Error(), "format version 2") {
			t.Errorf("Load = %v; want it to name format version 2", err)
		}
	})

	t.Run("save does not overwrite unread corrupt file", func(t *testing.T) {
		bad := []byte("garbage")
		os.WriteFile(path, bad, 0o600)
		s2 := &FileStore{dir: dir, lock: s.lock} // a fresh process would not have loaded yet
		if err := s2.Save(sampleState(10)); !errors.Is(err, ErrCorruptState) {
			t.Fatalf("Save over corrupt file = %v; want ErrCorruptState", err)
		}
		if data, _ := os.ReadFile(path); !bytes.Equal(data, bad) {
			t.Errorf("corrupt file was overwritten")
		}
	})
}

func TestFileStoreUnreadableIsNotCorrupt(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	// A directory in the state file's place stands in for EACCES or EIO,
	// which root (as in CI containers) cannot provoke with chmod.
	path := filepath.Join(dir, stateFileName)
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := s.Load()
	if err == nil || errors.Is(err, ErrCorruptState) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Load = %v; want an I/O error naming %s, not ErrCorruptState", err, path)
	}
}

func TestFileStoreLeftoverTempIgnored(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	want := sampleState(4)
	if err := s.Save(want); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadOrCreateID(idA); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// A crash between writing a temp file and renaming it leaves the temp
	// file behind, complete or not; either way it never took effect.
	newer, _ := encodeState(sampleState(5))
	leftovers := map[string][]byte{
		stateFileName + tmpInfix + "123": newer[:len(newer)/2],
		stateFileName + tmpInfix + "456": newer,
		idFileName + tmpInfix + "789":    []byte(idB.String()),
	}
	for name, data := range leftovers {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	s2 := openTestStore(t, dir)
	got, err := s2.Load()
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Load = %+v, %v; want the last completed save %+v", got, err, want)
	}
	if id, err := s2.LoadOrCreateID(uuid.Nil); err != nil || id != idA {
		t.Fatalf("LoadOrCreateID = %v, %v; want %v", id, err, idA)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"id", "lock", "state.json"}) {
		t.Errorf("data dir holds %q; want leftovers removed", names)
	}
}

func TestLoadOrCreateID(t *testing.T) {
	t.Run("generate and reload", func(t *testing.T) {
		dir := t.TempDir()
		s := openTestStore(t, dir)
		id, err := s.LoadOrCreateID(uuid.Nil)
		if err != nil {
			t.Fatal(err)
		}
		if election.IDProblem(id) != "" {
			t.Fatalf("generated %v, not a version-4 UUID", id)
		}
		s.Close()
		s = openTestStore(t, dir)
		for _, want := range []uuid.UUID{uuid.Nil, id} {
			if got, err := s.LoadOrCreateID(want); err != nil || got != id {
				t.Errorf("LoadOrCreateID(%v) = %v, %v; want %v", want, got, err, id)
			}
		}
		data, _ := os.ReadFile(filepath.Join(dir, idFileName))
		if string(data) != id.String()+"\n" {
			t.Errorf("id file = %q", data)
		}
	})

	t.Run("given", func(t *testing.T) {
		dir := t.TempDir()
		s := openTestStore(t, dir)
		if got, err := s.LoadOrCreateID(idA); err != nil || got != idA {
			t.Fatalf("LoadOrCreateID(%v) = %v, %v", idA, got, err)
		}
		_, err := s.LoadOrCreateID(idB)
		want := fmt.Sprintf("data dir %s belongs to node %s, not %s", dir, idA, idB)
		if err == nil || err.Error() != want {
			t.Fatalf("LoadOrCreateID(other) = %v; want %q", err, want)
		}
	})

	t.Run("given not v4", func(t *testing.T) {
		s := openTestStore(t, t.TempDir())
		v1 := uuid.MustParse("c3a1f0de-7b62-1e35-a9d4-1e2f3a4b5c6d")
		if _, err := s.LoadOrCreateID(v1); err == nil || !strings.Contains(err.Error(), "not a version-4 UUID") {
			t.Fatalf("LoadOrCreateID(v1) = %v", err)
		}
	})

	t.Run("state without id", func(t *testing.T) {
		dir := t.TempDir()
		s := openTestStore(t, dir)
		if err := s.Save(sampleState(3)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.LoadOrCreateID(uuid.Nil); err == nil || !strings.Contains(err.Error(), "no id file") {
			t.Fatalf("LoadOrCreateID(Nil) with state but no id = %v; want refusal", err)
		}
		if got, err := s.LoadOrCreateID(idA); err != nil || got != idA {
			t.Fatalf("LoadOrCreateID(%v) = %v, %v", idA, got, err)
		}
	})

	t.Run("hand-written", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, idFileName), []byte("  "+strings.ToUpper(idA.String())+"\r\n"), 0o600)
		s := openTestStore(t, dir)
		if got, err := s.LoadOrCreateID(uuid.Nil); err != nil || got != idA {
			t.Fatalf("LoadOrCreateID = %v, %v; want %v", got, err, idA)
		}
	})

	for name, content := range map[string]string{
		"empty":      "",
		"garbage":    "hello\n",
		"urn form":   "urn:uuid:" + idA.String(),
		"version 1":  "c3a1f0de-7b62-1e35-a9d4-1e2f3a4b5c6d\n",
		"variant":    "c3a1f0de-7b62-4e35-c9d4-1e2f3a4b5c6d\n",
		"nil":        uuid.Nil.String(),
		"truncated":  idA.String()[:20],
		"two of one": idA.String() + "\n" + idA.String() + "\n",
	} {
		t.Run("corrupt "+name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, idFileName)
			os.WriteFile(path, []byte(content), 0o600)
			s := openTestStore(t, dir)
			_, err := s.LoadOrCreateID(uuid.Nil)
			if !errors.Is(err, ErrCorruptState) || !strings.Contains(err.Error(), path) {
				t.Fatalf("LoadOrCreateID = %v; want ErrCorruptState naming %s", err, path)
			}
			checkOneLine(t, err)
			if data, _ := os.ReadFile(path); string(data) != content {
				t.Errorf("corrupt id file was overwritten")
			}
		})
	}
}

func TestFileStoreLock(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to open file descriptions, so a second open in the
	// same process conflicts just as another process would.
	_, err = OpenFileStore(dir)
	if !errors.Is(err, ErrDataDirLocked) || !strings.Contains(err.Error(), dir) ||
		!strings.Contains(err.Error(), "another process") || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second OpenFileStore = %v; want ErrDataDirLocked naming %s, another process and our pid", err, dir)
	}
	checkOneLine(t, err)

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if _, err := s.Load(); !errors.Is(err, ErrStoreClosed) {
		t.Errorf("Load after Close = %v", err)
	}
	if err := s.Save(sampleState(1)); !errors.Is(err, ErrStoreClosed) {
		t.Errorf("Save after Close = %v", err)
	}
	if _, err := s.LoadOrCreateID(uuid.Nil); !errors.Is(err, ErrStoreClosed) {
		t.Errorf("LoadOrCreateID after Close = %v", err)
	}

	s2, err := OpenFileStore(dir)
	if err != nil {
		t.Fatalf("OpenFileStore after Close: %v", err)
	}
	s2.Close()
}

const lockHelperEnv = "BULLYLAB_TEST_LOCK_HELPER_DIR"

// TestLockHelperProcess is not a test: TestLockReleasedOnSIGKILL runs the
// test binary with it to hold a data dir in another process.
func TestLockHelperProcess(t *testing.T) {
	dir := os.Getenv(lockHelperEnv)
	if dir == "" {
		t.Skip("helper process for TestLockReleasedOnSIGKILL")
	}
	if _, err := OpenFileStore(dir); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	time.Sleep(time.Minute)
	os.Exit(1)
}

func TestLockReleasedOnSIGKILL(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- line
	}()
	select {
	case line := <-ready:
		if line != "locked\n" {
			t.Fatalf("helper said %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("helper did not lock the data dir in time")
	}

	_, err = OpenFileStore(dir)
	if !errors.Is(err, ErrDataDirLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", cmd.Process.Pid)) {
		t.Fatalf("OpenFileStore while helper holds it = %v; want ErrDataDirLocked naming pid %d", err, cmd.Process.Pid)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	s, err := OpenFileStore(dir)
	if err != nil {
		t.Fatalf("OpenFileStore after the holder was killed: %v", err)
	}
	s.Close()
}

func FuzzLoadState(f *testing.F) {
	for _, epoch := range []uint64{0, 1, 1 << 63} {
		data, _ := encodeState(sampleState(epoch))
		f.Add(data)
	}
	data, _ := encodeState(&election.State{})
	f.Add(data)
	f.Add([]byte{})
	f.Add([]byte(`{"format":1,"crc32c":"00000000","state":{}}` + "\n"))
	f.Add([]byte(`{"epoch":1,"members":[{"ID":"6f1c2d3e-8a4b-4c5d-9e6f-0a1b2c3d4e5f","Addr":"x:1"}]}`))

	f.Fuzz(func(t *testing.T, data []byte) {
		// As a whole file. decodeStateFile is Load minus the read: going
		// through the file system would make fuzzing a hundred times slower.
		st, err := decodeStateFile("state.json", data)
		switch {
		case err != nil && (!errors.Is(err, ErrCorruptState) || !strings.Contains(err.Error(), "state.json")):
			t.Fatalf("error %q does not wrap ErrCorruptState or name the file", err)
		case err == nil && st == nil:
			t.Fatal("no state and no error")
		case err == nil:
			checkStateReencodes(t, st)
		}
		// As the body of a file with a valid checksum, which random bytes
		// alone would almost never reach.
		if st, err := decodeState(envelope(stateFormat, checksum(data), data)); err == nil {
			checkStateReencodes(t, st)
		}
	})
}

func checkStateReencodes(t *testing.T, st *election.State) {
	t.Helper()
	data, err := encodeState(st)
	if err != nil {
		t.Fatalf("decoded state does not encode: %v", err)
	}
	again, err := decodeState(data)
	if err != nil {
		t.Fatalf("re-encoded state does not decode: %v", err)
	}
	if !reflect.DeepEqual(st, again) {
		t.Fatalf("state changed across re-encoding: %+v became %+v", st, again)
	}
}

func TestFileStoreStateMissing(t *testing.T) {
	t.Run("new ID saves a first state", func(t *testing.T) {
		dir := t.TempDir()
		s := openTestStore(t, dir)
		if _, err := s.LoadOrCreateID(uuid.Nil); err != nil {
			t.Fatal(err)
		}
		st, err := s.Load()
		if err != nil || st == nil || !reflect.DeepEqual(*st, election.State{}) {
			t.Fatalf("Load after a new ID = %+v, %v; want a State at epoch 0", st, err)
		}
		if names := dirNames(t, dir); !slices.Equal(names, []string{"id", "lock", "state.json"}) {
			t.Errorf("data dir holds %q", names)
		}
	})

	t.Run("given ID keeps an existing state", func(t *testing.T) {
		dir := t.TempDir()
		s := openTestStore(t, dir)
		if err := s.Save(sampleState(7)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.LoadOrCreateID(idA); err != nil {
			t.Fatal(err)
		}
		if st, err := s.Load(); err != nil || st.Epoch != 7 {
			t.Fatalf("Load = %+v, %v; want the state saved before the ID", st, err)
		}
	})

	// A node at epoch 4 whose state.json is lost must not come back at
	// epoch 0 as if it never promised anything.
	lost := func(t *testing.T) string {
		dir := t.TempDir()
		s := openTestStore(t, dir)
		if _, err := s.LoadOrCreateID(idA); err != nil {
			t.Fatal(err)
		}
		if err := s.Save(sampleState(4)); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if err := os.Remove(filepath.Join(dir, stateFileName)); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	t.Run("lost", func(t *testing.T) {
		dir := lost(t)
		s := openTestStore(t, dir)
		st, err := s.Load()
		if !errors.Is(err, ErrStateMissing) || st != nil || !strings.Contains(err.Error(), dir) {
			t.Fatalf("Load = %+v, %v; want ErrStateMissing naming %s", st, err, dir)
		}
		checkOneLine(t, err)
		// Nor may a Save without a Load write a state over the loss.
		if err := s.Save(sampleState(1)); !errors.Is(err, ErrStateMissing) {
			t.Fatalf("Save = %v; want ErrStateMissing", err)
		}
		if id, err := s.LoadOrCreateID(uuid.Nil); err != nil || id != idA {
			t.Fatalf("LoadOrCreateID = %v, %v; want the stored %v", id, err, idA)
		}
		if _, err := s.Load(); !errors.Is(err, ErrStateMissing) {
			t.Fatalf("LoadOrCreateID mended a lost state: Load = %v", err)
		}
	})

	t.Run("reset", func(t *testing.T) {
		dir := lost(t)
		s := openTestStore(t, dir)
		if err := s.ResetState(); err != nil {
			t.Fatal(err)
		}
		st, err := s.Load()
		if err != nil || st == nil || st.Epoch != 0 {
			t.Fatalf("Load after ResetState = %+v, %v; want epoch 0", st, err)
		}
		if id, err := s.LoadOrCreateID(uuid.Nil); err != nil || id != idA {
			t.Fatalf("ResetState changed the ID: %v, %v", id, err)
		}
		// With the state there again, a second reset is refused.
		err = s.ResetState()
		if err == nil || !strings.Contains(err.Error(), "nothing to reset") {
			t.Fatalf("ResetState over a state file = %v", err)
		}
		checkOneLine(t, err)
	})

	t.Run("reset fresh", func(t *testing.T) {
		dir := t.TempDir()
		s := openTestStore(t, dir)
		if err := s.ResetState(); err != nil {
			t.Fatal(err)
		}
		if names := dirNames(t, dir); !slices.Equal(names, []string{"lock"}) {
			t.Errorf("ResetState of a fresh dir wrote %q", names)
		}
	})
}

// A data dir others can write to, or another user's, is refused with the
// fix in the message.
func TestFileStoreDataDirPermissions(t *testing.T) {
	for _, mode := range []os.FileMode{0o777, 0o770, 0o720, 0o702, 0o1777} {
		t.Run(fmt.Sprintf("%04o", mode), func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Chmod(dir, mode); err != nil {
				t.Fatal(err)
			}
			_, err := OpenFileStore(dir)
			want := fmt.Sprintf("data dir %s: mode %04o lets other users write to it; run chmod 700 %s", dir, mode.Perm(), dir)
			if err == nil || err.Error() != want {
				t.Fatalf("OpenFileStore = %v; want %q", err, want)
			}
			if names := dirNames(t, dir); len(names) != 0 {
				t.Errorf("a refused open wrote %q", names)
			}
		})
	}
	for _, mode := range []os.FileMode{0o700, 0o750, 0o755, 0o500} {
		dir := t.TempDir()
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		if mode == 0o500 && os.Geteuid() != 0 {
			continue // not writable, so no lock file: another error
		}
		s, err := OpenFileStore(dir)
		if err != nil {
			t.Errorf("mode %04o: %v", mode, err)
			continue
		}
		s.Close()
	}
	t.Run("another user's", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to give a dir away")
		}
		dir := t.TempDir()
		if err := os.Chown(dir, 4321, 4321); err != nil {
			t.Fatal(err)
		}
		_, err := OpenFileStore(dir)
		if err == nil || !strings.Contains(err.Error(), "data dir "+dir+": owned by uid 4321, not by this user (uid 0)") {
			t.Fatalf("OpenFileStore = %v", err)
		}
		checkOneLine(t, err)
	})
}

// A state file's pieces are what json.Marshal writes, byte for byte,
// through a run of saves that keep, change, empty and drop the member
// list, short ones and ones long enough to be shared (sharedMembersMin).
func TestStateEncoderMatchesMarshal(t *testing.T) {
	if n := reflect.TypeFor[election.State]().NumField(); n != 6 {
		t.Fatalf("election.State has %d fields; statePieces writes 6: teach it the new ones", n)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	members := func(n int) []wire.Member {
		ms := make([]wire.Member, n)
		for i := range ms {
			ms[i] = wire.Member{ID: uuid.New(), Addr: fmt.Sprintf("10.0.%d.%d:7946", i/250, i%250)}
		}
		return ms
	}
	cur := members(5)
	for i := range 200 {
		switch rng.IntN(6) {
		case 0:
			cur = members(rng.IntN(8) + sharedMembersMin*rng.IntN(2))
		case 1:
			cur = nil
		case 2:
			cur = []wire.Member{}
		case 3:
			if len(cur) > 0 {
				cur = slices.Clone(cur)
				cur[rng.IntN(len(cur))].Addr = "changed:1"
			}
		}
		st := &election.State{
			Epoch:       uint64(i),
			Promise:     election.Ballot{Epoch: uint64(i), ID: uuid.New()},
			Leader:      uuid.New(),
			LeaderEpoch: uint64(rng.IntN(i + 1)),
			Members:     cur,
			Left:        rng.IntN(4) == 0,
		}
		got, err := encodeState(st)
		if err != nil {
			t.Fatal(err)
		}
		body, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if want := envelope(stateFormat, checksum(body), body); !bytes.Equal(got, want) {
			t.Fatalf("save %d: encoded\n%s\nwant\n%s", i, got, want)
		}
	}
}

// BenchmarkSaveState is a save of a 1000-member state whose members did
// not change since the last, as a booting node's promise and leader
// saves are.
func BenchmarkSaveState(b *testing.B) {
	s := openTestStore(b, b.TempDir())
	st := &election.State{Members: make([]wire.Member, 1000)}
	for i := range st.Members {
		st.Members[i] = wire.Member{ID: uuid.New(), Addr: fmt.Sprintf("10.77.%d.%d:7946", i/250, i%250)}
	}
	for i := 0; b.Loop(); i++ {
		st.Epoch = uint64(i)
		if err := s.Save(st); err != nil {
			b.Fatal(err)
		}
	}
}

// writePieces writes pieces end to end, empty ones anywhere included, and
// leaves the caller's slice as it was.
func TestWritePieces(t *testing.T) {
	for _, pieces := range [][][]byte{
		nil,
		{{}, {}},
		{[]byte("head"), {}, []byte("members"), []byte("}\n")},
		{{}, bytes.Repeat([]byte("m"), 1<<20), {}},
	} {
		path := filepath.Join(t.TempDir(), "f")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		given := slices.Clone(pieces)
		err = writePieces(int(f.Fd()), pieces)
		f.Close()
		if err != nil {
			t.Fatalf("%d pieces: %v", len(pieces), err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if want := bytes.Join(pieces, nil); !bytes.Equal(got, want) {
			t.Errorf("%d pieces: wrote %d bytes, want %d", len(pieces), len(got), len(want))
		}
		for i := range pieces {
			if len(pieces[i]) != len(given[i]) {
				t.Errorf("piece %d cut to %d bytes in the caller's slice", i, len(pieces[i]))
			}
		}
	}
}
