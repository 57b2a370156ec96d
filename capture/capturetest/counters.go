package capturetest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/bullylab/bullylab/node"
)

// FinalCounters returns what a node sent over its life, by type name: the
// node_counters record its event log at path ends with once its transport
// has closed.
func FinalCounters(path string) (map[string]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var last *node.LogRecord
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r node.LogRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		if r.Event == "node_counters" {
			last = &r
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if last == nil {
		return nil, fmt.Errorf("%s has no node_counters record", path)
	}
	if last.Sent == nil {
		return map[string]uint64{}, nil
	}
	return last.Sent, nil
}
