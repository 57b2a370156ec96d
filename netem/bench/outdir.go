//go:build linux

package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
)

// outputNames are the files RunBench writes into OutDir besides the
// captures.
var outputNames = []string{"results.json", "bench.txt", "report.html"}

// capturePattern matches the captures RunBench names, run-KEY-N.pcapng,
// KEY the scenario key made file-safe (fileSafe), and their cluster key
// files, run-KEY-N.key (capture.ClusterKeyFile).
var capturePattern = regexp.MustCompile(`^run-[A-Za-z0-9._-]+-[1-9][0-9]*\.(pcapng|key)$`)

// IsOutputFile reports whether name is the name of a file RunBench writes:
// results.json, bench.txt, report.html, a run's capture or its cluster key
// file.
func IsOutputFile(name string) bool {
	return slices.Contains(outputNames, name) || capturePattern.MatchString(name)
}

// OutputFiles lists the files in dir that a bench wrote (IsOutputFile,
// and not a directory), sorted; a missing dir has none.
func OutputFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && IsOutputFile(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// CheckOutDir returns an error naming dir and a file in it when dir holds
// another bench's outputs, which a new bench would mix with its own. A
// missing or empty dir, or one with only other files, is fine.
func CheckOutDir(dir string) error {
	names, err := OutputFiles(dir)
	if err != nil {
		return err
	}
	if len(names) > 0 {
		first := names[0]
		if slices.Contains(names, "results.json") {
			first = "results.json"
		}
		return fmt.Errorf("%s holds another bench's outputs (%s): use another directory, or --force to remove them", dir, first)
	}
	return nil
}

// RemoveOutputs removes the files in dir that a bench wrote (OutputFiles)
// and nothing else.
func RemoveOutputs(dir string) error {
	names, err := OutputFiles(dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
