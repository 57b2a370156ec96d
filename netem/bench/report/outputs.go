package report

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/bullylab/bullylab/netem/bench/results"
)

// WriteOutputs writes results.json, bench.txt and report.html (drawing
// seqs) into dir, OutputMode.
func WriteOutputs(dir string, res *results.Results, seqs []Sequence) error {
	if err := res.WriteFile(filepath.Join(dir, "results.json")); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	for _, out := range []struct {
		name  string
		write func(io.Writer) error
	}{
		{"bench.txt", func(w io.Writer) error { return results.WriteBenchText(w, res) }},
		{"report.html", func(w io.Writer) error { return Write(w, res, seqs...) }},
	} {
		path := filepath.Join(dir, out.name)
		if err := results.WriteOutputFile(path, out.write); err != nil {
			return fmt.Errorf("bench: writing %s: %w", path, err)
		}
	}
	return nil
}
