//go:build linux

package lab

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"golang.org/x/sys/unix"
)

// notifyGrowth returns a channel that receives when the file at path is
// written to, and a function that stops the watch. It uses inotify, so
// that a lab waiting for a booting node reads its log when the node
// writes it: polling it every 2 ms, two nodes at a time, was 1,000 wakeups
// and stat calls a second through a 250-node boot, on the same two cores
// as the nodes. Where inotify is not available (no instances left), grew
// is nil and poll ticks every readyPoll instead.
func notifyGrowth(path string) (grew <-chan struct{}, poll <-chan time.Time, stop func()) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err == nil {
		if _, err = unix.InotifyAddWatch(fd, path, unix.IN_MODIFY); err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		tick := time.NewTicker(readyPoll)
		return nil, tick.C, tick.Stop
	}
	// Non-blocking, so os.File reads through the netpoller and Close
	// ends a pending Read.
	f := os.NewFile(uintptr(fd), "inotify")
	c := make(chan struct{}, 1)
	go func() {
		var buf [4096]byte
		for {
			if _, err := f.Read(buf[:]); err != nil {
				return
			}
			select {
			case c <- struct{}{}:
			default: // one pending wakeup covers every write before it
			}
		}
	}()
	return c, nil, func() { f.Close() }
}

// eventWatch reads the records a node appends to its JSON event log.
type eventWatch struct {
	path    string
	off     int64
	partial []byte
	started bool
	normal  bool
}

// watchEvents watches the records appended to path from now on: a log
// kept in a LogDir across runs or restarts holds older ones.
func watchEvents(path string) (*eventWatch, error) {
	w := &eventWatch{path: path}
	fi, err := os.Stat(path)
	switch {
	case err == nil:
		w.off = fi.Size()
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	return w, nil
}

// scan reads what was appended and reports whether the node has started
// and whether it has been Normal.
func (w *eventWatch) scan() (started, normal bool, err error) {
	fi, err := os.Stat(w.path)
	if errors.Is(err, os.ErrNotExist) || err == nil && fi.Size() <= w.off {
		return w.started, w.normal, nil
	}
	if err != nil {
		return false, false, err
	}
	f, err := os.Open(w.path)
	if err != nil {
		return false, false, err
	}
	defer f.Close()
	buf := make([]byte, fi.Size()-w.off)
	k, err := f.ReadAt(buf, w.off)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, false, err
	}
	w.off += int64(k)
	data := append(w.partial, buf[:k]...)
	for {
		line, rest, ok := bytes.Cut(data, []byte("\n"))
		if !ok {
			break
		}
		data = rest
		var rec struct {
			Event string `json:"event"`
			To    string `json:"to"`
		}
		if json.Unmarshal(line, &rec) != nil {
			continue // not a record: a Go runtime message, say
		}
		switch {
		case rec.Event == "node_started":
			w.started = true
		case rec.Event == "status" && rec.To == election.StatusNormal.String():
			w.started, w.normal = true, true
		}
	}
	w.partial = slices.Clone(data)
	return w.started, w.normal, nil
}

// logTail returns the last lines of a log, joined by " | ".
func logTail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	ls := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(ls[max(0, len(ls)-lines):], " | ")
}

// lastWords returns the last line a node wrote to the log at path that is
// not an event record: where the node says why it stopped.
func lastWords(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("no log: %v", err)
	}
	defer f.Close()
	const tail = 16 << 10
	buf := make([]byte, tail)
	size, _ := f.Seek(0, io.SeekEnd)
	n, _ := f.ReadAt(buf, max(size-tail, 0))
	lines := strings.Split(strings.TrimRight(string(buf[:n]), "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "{") {
			return l
		}
	}
	return "exited without saying why (log " + path + ")"
}
