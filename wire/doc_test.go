package wire

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docTable returns the rows of the table in doc.go whose header line
// starts with the words of header: each row's number and name. A row
// continued on the next line (its first column blank) is one row.
func docTable(t *testing.T, doc, header string) map[int]string {
	t.Helper()
	lines := strings.Split(doc, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimPrefix(l, "//\t"), header) {
			if start >= 0 {
				t.Fatalf("doc.go has two tables headed %q", header)
			}
			start = i + 1
		}
	}
	if start < 0 {
		t.Fatalf("doc.go has no table headed %q", header)
	}
	row := regexp.MustCompile(`^//\t(\d+)\s+(\S+)\s+\S`)
	rows := map[int]string{}
	for _, l := range lines[start:] {
		if !strings.HasPrefix(l, "//\t") {
			break
		}
		if strings.HasPrefix(l, "//\t ") {
			continue // a row's meaning, continued
		}
		m := row.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("doc.go, table %q: row %q is not NUMBER NAME MEANING", header, l)
		}
		n, _ := strconv.Atoi(m[1])
		if _, dup := rows[n]; dup {
			t.Fatalf("doc.go, table %q: %d listed twice", header, n)
		}
		rows[n] = m[2]
	}
	return rows
}

// TestDocTables holds the type and reason tables of the package doc, which
// decoders written without this package go by, to the constants.
func TestDocTables(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)

	types := docTable(t, doc, "Type  Name")
	if len(types) != len(Types) {
		t.Errorf("doc.go lists %d types, Types has %d", len(types), len(Types))
	}
	for _, ty := range Types {
		if name := types[int(ty)]; name != ty.String() {
			t.Errorf("doc.go: type %d is %q, the constant's is %s", ty, name, ty)
		}
	}
	for n, name := range types {
		if !Type(n).Valid() {
			t.Errorf("doc.go lists type %d (%s), which this version does not define", n, name)
		}
	}
	if want := fmt.Sprintf("(0, or %d and up)", typeLimit); !strings.Contains(doc, want) {
		t.Errorf("doc.go does not say which numbers are no type: want %q", want)
	}

	reasons := docTable(t, doc, "Reason  Name")
	if len(reasons) != int(reasonLimit) {
		t.Errorf("doc.go lists %d reasons, there are %d", len(reasons), reasonLimit)
	}
	for r := range reasonLimit {
		if name := reasons[int(r)]; name != r.String() {
			t.Errorf("doc.go: reason %d is %q, the constant's is %s", r, name, r)
		}
	}
	if reasonLimit-1 > reasonMask {
		t.Errorf("reason %d does not fit the low nibble the doc gives it", reasonLimit-1)
	}
}
