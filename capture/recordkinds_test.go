package capture

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/topologies/fault"
)

// TestDissectorKnowsRecordKinds keeps the Wireshark dissector's table of
// record kinds the kinds this package writes: a kind it misses is flagged
// unknown in every capture that has one.
func TestDissectorKnowsRecordKinds(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "scripts", "bullylab.lua"))
	if err != nil {
		t.Fatal(err)
	}
	table := regexp.MustCompile(`(?s)local record_kinds = \{(.*?)\n\}`).FindSubmatch(src)
	if table == nil {
		t.Fatal("scripts/bullylab.lua has no record_kinds table")
	}
	var lua []string
	for _, m := range regexp.MustCompile(`(\w+|\["\w+"\]) = true`).FindAllSubmatch(table[1], -1) {
		lua = append(lua, strings.Trim(string(m[1]), `[]"`))
	}
	var want []string
	for _, k := range RecordKinds() {
		want = append(want, string(k))
	}
	slices.Sort(lua)
	slices.Sort(want)
	if !slices.Equal(lua, want) {
		t.Errorf("scripts/bullylab.lua's record_kinds are %v, want %v", lua, want)
	}
	if len(want) != len(fault.Kinds)+2 {
		t.Errorf("RecordKinds() has %d kinds, want the %d fault kinds, testbed and end", len(want), len(fault.Kinds))
	}
}
