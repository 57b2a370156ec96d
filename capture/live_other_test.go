//go:build !linux

package capture

import (
	"errors"
	"io"
	"testing"
)

// TestStartNotSupported checks that live capture fails clearly where it
// cannot run.
func TestStartNotSupported(t *testing.T) {
	w, err := NewWriter(io.Discard, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := StartLive(t.Context(), -1, map[int]NodePort{1: {Veth: "sw-1"}}, w)
	if !errors.Is(err, ErrNotSupported) || l != nil {
		t.Errorf("Start: %v, %v; want nil, ErrNotSupported", l, err)
	}
}
