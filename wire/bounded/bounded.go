// Package bounded reads the files users hand bullylab (topologies,
// scenarios, bench results) and quotes their contents in errors, both
// within limits: a FIFO, /dev/zero or a 1 MB line costs a one-line error,
// not memory, a hang or a screenful of output.
//
// It lives under wire, the package every other imports, and imports
// nothing of bullylab, so that all of them can use it.
package bounded

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"
)

// SizeError is ReadFile's error for a file larger than its limit.
type SizeError struct {
	Kind, Path string
	Limit      int64
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("%s %s: larger than %s", e.Kind, oneLine(e.Path), Size(e.Limit))
}

// ReadFile reads the file at path, refusing it with a *SizeError once it
// holds more than limit bytes. kind says what the file is ("topology"),
// for errors, which read "KIND PATH: what is wrong" and wrap the system
// error, so that errors.Is(err, fs.ErrNotExist) holds for a missing file.
//
// The file is opened without blocking: a FIFO nobody writes to reads as
// empty rather than hanging the open. Anything that can be read still
// is: /dev/stdin, a pipe from process substitution or a FIFO being written
// (which is read until its writer closes it).
func ReadFile(kind, path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fileError(kind, path, err)
	}
	defer f.Close()
	size := int64(512)
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		if st.Size() > limit {
			return nil, &SizeError{Kind: kind, Path: path, Limit: limit}
		}
		size += st.Size()
	}
	data := make([]byte, 0, min(size, limit+1))
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := f.Read(data[len(data):min(cap(data), int(limit)+1)])
		data = data[:len(data)+n]
		if int64(len(data)) > limit {
			return nil, &SizeError{Kind: kind, Path: path, Limit: limit}
		}
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, fileError(kind, path, err)
		}
	}
}

// fileError names the file once: an *fs.PathError would name it again.
func fileError(kind, path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%s %s: %w", kind, oneLine(path), err)
}

// Size writes a limit as people read it: "8 MiB", "512 KiB", "100 bytes".
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// MaxQuoted is how many bytes of a value Quote shows.
const MaxQuoted = 64

// Quote quotes a value from user input for an error message, as
// strconv.Quote does, but shows at most MaxQuoted bytes of it; a longer
// value ends in "..." and its length: "aaaa"... (1048576 bytes).
func Quote(s string) string {
	if len(s) <= MaxQuoted {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:cut(s, MaxQuoted)]) + fmt.Sprintf("... (%d bytes)", len(s))
}

// Clip shortens text that goes into an error unquoted (a field path, a
// message from a library that quotes input) to about max bytes, ending a
// longer one in "..." and its length. Line breaks become \n and \r, so
// that the error stays one line.
func Clip(s string, max int) string {
	if len(s) > max {
		s = s[:cut(s, max)] + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return oneLine(s)
}

// lineBreaks makes text one line.
var lineBreaks = strings.NewReplacer("\n", `\n`, "\r", `\r`)

func oneLine(s string) string { return lineBreaks.Replace(s) }

// cut returns where to cut s to at most n bytes without splitting a
// UTF-8 sequence (invalid bytes count as one each).
func cut(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	i := n
	for i > 0 && i > n-utf8.UTFMax && !utf8.RuneStart(s[i]) {
		i--
	}
	if i > 0 && !utf8.RuneStart(s[i]) {
		return n // not UTF-8 around here: any cut will do
	}
	return i
}
