package bounded

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.yaml")
	if err := os.WriteFile(small, []byte("nodes: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := ReadFile("topology", small, 9)
	if err != nil || string(data) != "nodes: 3\n" {
		t.Fatalf("a file of exactly the limit: %q, %v", data, err)
	}
	_, err = ReadFile("topology", small, 8)
	var se *SizeError
	if !errors.As(err, &se) || err.Error() != "topology "+small+": larger than 8 bytes" {
		t.Errorf("a file over the limit: %v", err)
	}

	_, err = ReadFile("scenario", filepath.Join(dir, "missing.yaml"), 1<<20)
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != "scenario "+dir+"/missing.yaml: no such file or directory" {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := ReadFile("scenario", dir, 1<<20); err == nil || !strings.HasPrefix(err.Error(), "scenario "+dir+": ") {
		t.Errorf("a folder: %v", err)
	}
}

func TestReadFileDevZero(t *testing.T) {
	_, err := ReadFile("topology", "/dev/zero", 4<<20)
	if err == nil || err.Error() != "topology /dev/zero: larger than 4 MiB" {
		t.Fatalf("/dev/zero: %v", err)
	}
}

// A FIFO nobody writes to reads as empty instead of blocking the open
// forever; one being written is read to the end.
func TestReadFileFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	data, err := ReadFile("topology", fifo, 1<<20)
	if err != nil || len(data) != 0 {
		t.Fatalf("a FIFO without a writer: %q, %v", data, err)
	}

	// The writer opens its end only once the reader has it open, so the
	// open below cannot block; the reader then sees every byte and EOF.
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var (
		got  []byte
		rerr error
	)
	go func() {
		defer close(done)
		got, rerr = ReadFile("topology", fifo, 1<<20)
	}()
	if _, err := w.WriteString("nodes: 3\n"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	<-done
	if rerr != nil || string(got) != "nodes: 3\n" {
		t.Fatalf("a FIFO with a writer: %q, %v", got, rerr)
	}
}

func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"n9", `"n9"`},
		{"a\nb", `"a\nb"`},
		{strings.Repeat("x", MaxQuoted), `"` + strings.Repeat("x", MaxQuoted) + `"`},
		{strings.Repeat("x", 1<<20), `"` + strings.Repeat("x", MaxQuoted) + `"... (1048576 bytes)`},
		// A cut never splits a character: é is two bytes.
		{strings.Repeat("x", MaxQuoted-1) + "é", `"` + strings.Repeat("x", MaxQuoted-1) + `"... (65 bytes)`},
	} {
		if got := Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%.20q...) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestClip(t *testing.T) {
	if got := Clip("a\r\nb", 10); got != `a\r\nb` {
		t.Errorf("line breaks: %s", got)
	}
	if got := Clip(strings.Repeat("y", 300), 100); got != strings.Repeat("y", 100)+"... (300 bytes)" {
		t.Errorf("long: %s", got)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{8 << 20: "8 MiB", 512 << 10: "512 KiB", 1500: "1500 bytes", 3<<20 + 1: "3145729 bytes"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %s, want %s", n, got, want)
		}
	}
}

// FuzzQuote: whatever the input, a quote and a clip are one line of
// bounded length, and a quote is valid UTF-8.
func FuzzQuote(f *testing.F) {
	f.Add("n9")
	f.Add(strings.Repeat("é", 40))
	f.Add("a\nb\r\xff")
	f.Fuzz(func(t *testing.T, s string) {
		q := Quote(s)
		if strings.ContainsAny(q, "\r\n") || !utf8.ValidString(q) || len(q) > 4*MaxQuoted+40 {
			t.Fatalf("Quote(%q) = %q", s, q)
		}
		c := Clip(s, 32)
		if strings.ContainsAny(c, "\r\n") || len(s) > 32 && len(c) > 2*32+40 {
			t.Fatalf("Clip(%q) = %q", s, c)
		}
	})
}
