package yamlfile

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

var testDoc = DocErrors{Kind: "test", Empty: "empty test", Extra: "two tests"}

func TestErrorIsOneLine(t *testing.T) {
	for _, tc := range []struct {
		err  Error
		want string
	}{
		{Error{File: "a.yaml", Msg: "empty"}, "a.yaml: empty"},
		{Error{File: "a.yaml", Line: 3, Field: "x.y", Msg: "bad"}, "a.yaml:3: x.y: bad"},
		{Error{File: "a\nb.yaml", Line: 1, Field: "k\r", Msg: "m\n"}, `a\nb.yaml:1: k\r: m\n`},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.err, got, tc.want)
		}
	}
}

type embedding struct{ Parser }

func TestRecoverTurnsPanicIntoError(t *testing.T) {
	parse := func() (err error) {
		p := &embedding{Parser{File: "p.yaml"}}
		defer p.Recover(&err)
		panic("boom")
	}
	err := parse()
	var fe *Error
	if !errors.As(err, &fe) || err.Error() != "p.yaml: cannot parse: boom" {
		t.Fatalf("got %v, want an *Error p.yaml: cannot parse: boom", err)
	}
}

func TestDocument(t *testing.T) {
	for in, want := range map[string]string{
		"":             "f.yaml: empty test",
		"~\n":          "f.yaml:1: empty test",
		"a: 1\n---\n2": "f.yaml:2: two tests",
		"[1]\n":        "f.yaml:1: want a mapping of test fields, got a list",
		"a: [\n":       "f.yaml:1: did not find expected node content",
	} {
		p := &Parser{File: "f.yaml"}
		_, err := p.Document([]byte(in), testDoc)
		if err == nil || err.Error() != want {
			t.Errorf("%q: got %v, want %s", in, err, want)
		}
	}
}

func TestMaxNodesCountsAliasesEachTime(t *testing.T) {
	in := "a: &a [1, 2, 3, 4]\nb: [*a, *a, *a]\n"
	for maxNodes, wantErr := range map[int]bool{0: false, 100: false, 10: true} {
		p := &Parser{File: "f.yaml", MaxNodes: maxNodes}
		top, err := p.Document([]byte(in), testDoc)
		if err != nil {
			t.Fatal(err)
		}
		err = walk(p, top, "", 0)
		if gotErr := err != nil; gotErr != wantErr {
			t.Errorf("MaxNodes %d: got %v", maxNodes, err)
		}
		if err != nil && !strings.Contains(err.Error(), "file too complex (more than 10 YAML nodes after aliases)") {
			t.Errorf("MaxNodes %d: got %v", maxNodes, err)
		}
	}
}

// walk reads every value under v with every reader, returning the first
// error a mapping or list gives; scalar readers' errors are checked, not
// returned, since most of them refuse most values.
func walk(p *Parser, v *yaml.Node, path string, depth int) error {
	if depth > 100 {
		return nil
	}
	switch Deref(v).Kind {
	case yaml.MappingNode:
		return p.Mapping(v, path, nil, func(_ string, _, v *yaml.Node, fp string) error {
			return walk(p, v, fp, depth+1)
		})
	case yaml.SequenceNode:
		items, err := p.Sequence(v, path, "a list")
		for i, it := range items {
			if err == nil {
				err = walk(p, it, fmt.Sprintf("%s[%d]", path, i), depth+1)
			}
		}
		return err
	}
	return nil
}

// maxErrorLen bounds an error's length whatever the file holds.
const maxErrorLen = 1024

// TestLongValuesAreCut: every reader quotes at most the start of a 1 MB
// value, and says how long it was.
func TestLongValuesAreCut(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	for _, v := range []string{long, "-" + strings.Repeat("0", 1<<20) + "1s", "1" + strings.Repeat("0", 1<<20)} {
		p := &Parser{File: "f.yaml"}
		top, err := p.Document([]byte("a: "+v+"\n"), testDoc)
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range scalarErrors(p, top.Content[1]) {
			if err == nil {
				continue
			}
			if msg := err.Error(); len(msg) > 200 || !strings.Contains(msg, "bytes)") {
				t.Errorf("error of %d bytes: %.300s", len(msg), msg)
			}
		}
	}
	if got := Join("a", strings.Repeat("k", 1000)); len(got) > 100 || !strings.HasSuffix(got, "... (1000 bytes)") {
		t.Errorf("Join with a long key: %s", got)
	}
	p := &Parser{File: "f.yaml"}
	if _, err := p.Document([]byte("a: *"+long+"\n"), testDoc); err == nil || len(err.Error()) > 300 {
		t.Errorf("an unknown anchor's name: %.300v", err)
	}
}

func scalarErrors(p *Parser, v *yaml.Node) []error {
	_, e1 := p.Scalar(v, "s")
	_, e2 := p.Integer(v, "s", "a number")
	_, e3 := p.Boolean(v, "s")
	_, e4 := p.PositiveDuration(v, "s")
	_, e5 := p.Percent(v, "s")
	_, e6 := p.PositivePercent(v, "s")
	return []error{e1, e2, e3, e4, e5, e6}
}

// FuzzDocument checks that whatever a file holds, Document and the
// readers either accept it or return an *Error of one line naming the file.
func FuzzDocument(f *testing.F) {
	f.Add([]byte("a: 1\nb: [x, 5%, 1.5s, true, ~]\nc: {d: &e [1], f: *e}\n"))
	f.Add([]byte("? [a]\n: 1\n\"a\\nb\": -1s\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("---\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(err error) {
			var fe *Error
			if err == nil {
				return
			}
			if !errors.As(err, &fe) || fe.File != "fuzz.yaml" {
				t.Fatalf("error %v is not an *Error naming fuzz.yaml", err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "fuzz.yaml") || strings.ContainsAny(msg, "\r\n") || len(msg) > maxErrorLen {
				t.Fatalf("error is not one short line naming the file: %q", msg)
			}
		}
		p := &Parser{File: "fuzz.yaml", MaxNodes: 10_000}
		top, err := p.Document(data, testDoc)
		check(err)
		if err != nil {
			return
		}
		check(walk(p, top, "", 0))
		var visit func(n *yaml.Node, depth int)
		visit = func(n *yaml.Node, depth int) {
			if n == nil || depth > 20 {
				return
			}
			for _, err := range scalarErrors(p, n) {
				check(err)
			}
			for _, c := range n.Content {
				visit(c, depth+1)
			}
		}
		visit(top, 0)
	})
}

func TestDefaultName(t *testing.T) {
	for file, want := range map[string]string{
		"dir/two-site.yaml": "two-site",
		"x.yml":             "x",
		"a b.yaml":          "fallback",
		".yaml":             "fallback",
	} {
		if got := DefaultName(file, "fallback"); got != want {
			t.Errorf("DefaultName(%q) = %q, want %q", file, got, want)
		}
	}
}
