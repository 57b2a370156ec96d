// Package yamlfile reads hand-written YAML files (topologies, scenarios)
// node by node, so that every error is one line naming the file, line and
// field. Values and keys from the file appear in errors cut short
// (bounded.Quote), so that a 1 MB value makes no 1 MB error.
package yamlfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/bullylab/bullylab/wire/bounded"
)

// Error is a problem in a file. Its message is one line:
// "file:line: field: what is wrong".
type Error struct {
	File  string
	Line  int    // 1-based; 0 when the problem has no line
	Field string // path such as groups.site-a[2]; empty for the whole file
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	// File names and YAML keys may hold line breaks; callers print errors
	// one per line.
	return strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(b.String())
}

// Parser reads the nodes of one file; its methods return *Error.
type Parser struct {
	File string
	// MaxNodes bounds the YAML nodes Mapping and Sequence visit, counting
	// those an alias names again each time; 0 means no bound. Aliases let a
	// few bytes name a large list many times.
	MaxNodes int
	nodes    int
}

// The patterns compile on first use: package initialisation runs in every
// bullylab process, node processes included, which never parse a file.
var (
	yamlLinePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?s)^yaml: line (\d+): (.*)$`) })
	namePattern     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`) })
)

// MaxLibraryMessage bounds what an Error shows of a parsing library's
// message, which may quote the file (an unknown YAML anchor's name, a
// JSON number's digits).
const MaxLibraryMessage = 200

// Recover turns a panic into an *Error in *err; defer it in a Parse
// function. The YAML parser is third-party code fed untrusted files; a
// panic there must not take the whole run down.
func (p *Parser) Recover(err *error) {
	if r := recover(); r != nil {
		*err = &Error{File: p.File, Msg: "cannot parse: " + bounded.Clip(fmt.Sprint(r), MaxLibraryMessage)}
	}
}

// ErrAt returns an *Error at n's line (none when n is nil) and field.
func (p *Parser) ErrAt(n *yaml.Node, field, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &Error{File: p.File, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func (p *Parser) yamlErr(err error) error {
	if m := yamlLinePattern().FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: p.File, Line: line, Msg: bounded.Clip(m[2], MaxLibraryMessage)}
	}
	return &Error{File: p.File, Msg: bounded.Clip(strings.TrimPrefix(err.Error(), "yaml: "), MaxLibraryMessage)}
}

// DocErrors are the messages Document gives for a file that is not one
// mapping.
type DocErrors struct {
	Kind  string // what the file holds: "want a mapping of KIND fields"
	Empty string // the file is empty or null
	Extra string // the file holds a second document
}

// Document decodes data, which must hold one YAML document whose top is a
// mapping, and returns the top node (which may be an alias of the mapping).
func (p *Parser) Document(data []byte, e DocErrors) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, p.ErrAt(nil, "", "%s", e.Empty)
		}
		return nil, p.yamlErr(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, p.yamlErr(err)
		}
		return nil, p.ErrAt(&extra, "", "%s", e.Extra)
	}
	top := &doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		top = doc.Content[0]
	}
	if d := Deref(top); d.Kind != yaml.MappingNode {
		if d.Kind == yaml.ScalarNode && d.ShortTag() == "!!null" {
			return nil, p.ErrAt(top, "", "%s", e.Empty)
		}
		return nil, p.ErrAt(top, "", "want a mapping of %s fields, got %s", e.Kind, KindName(d))
	}
	return top, nil
}

func (p *Parser) visit(n int, at *yaml.Node, path string) error {
	if p.nodes += n; p.MaxNodes > 0 && p.nodes > p.MaxNodes {
		return p.ErrAt(at, path, "file too complex (more than %d YAML nodes after aliases)", p.MaxNodes)
	}
	return nil
}

// Mapping walks a mapping's fields in file order, rejecting repeated keys and
// keys not in known (any key when known is nil). fn gets the key's name,
// its node (for errors about the key itself), the value and the field path.
func (p *Parser) Mapping(v *yaml.Node, path string, known []string, fn func(key string, k, v *yaml.Node, fp string) error) error {
	d := Deref(v)
	if d.Kind != yaml.MappingNode {
		return p.ErrAt(v, path, "want a mapping, got %s", KindName(d))
	}
	seen := make(map[string]int, len(d.Content)/2)
	for i := 0; i+1 < len(d.Content); i += 2 {
		k, val := d.Content[i], d.Content[i+1]
		if err := p.visit(2, k, path); err != nil {
			return err
		}
		kd := Deref(k)
		if kd.Kind != yaml.ScalarNode {
			return p.ErrAt(k, path, "keys must be plain names, got %s", KindName(kd))
		}
		fp := Join(path, kd.Value)
		if known != nil && !slices.Contains(known, kd.Value) {
			return p.ErrAt(k, fp, "unknown field (want %s)", strings.Join(known, ", "))
		}
		if line, ok := seen[kd.Value]; ok {
			return p.ErrAt(k, fp, "repeated (first at line %d)", line)
		}
		seen[kd.Value] = k.Line
		if err := fn(kd.Value, k, val, fp); err != nil {
			return err
		}
	}
	return nil
}

// Sequence returns a list's items; want says what the list should be, as
// in "want a list of links".
func (p *Parser) Sequence(v *yaml.Node, path, want string) ([]*yaml.Node, error) {
	d := Deref(v)
	if d.Kind != yaml.SequenceNode {
		return nil, p.ErrAt(v, path, "want %s, got %s", want, KindName(d))
	}
	if err := p.visit(len(d.Content), v, path); err != nil {
		return nil, err
	}
	return d.Content, nil
}

// Scalar returns a single, non-null value as written.
func (p *Parser) Scalar(v *yaml.Node, path string) (string, error) {
	d := Deref(v)
	if d.Kind != yaml.ScalarNode {
		return "", p.ErrAt(v, path, "want a single value, got %s", KindName(d))
	}
	if d.ShortTag() == "!!null" {
		return "", p.ErrAt(v, path, "missing value")
	}
	return d.Value, nil
}

// Integer reads a YAML integer; want says what it stands for, as in "want
// a port number".
func (p *Parser) Integer(v *yaml.Node, path, want string) (int64, error) {
	d := Deref(v)
	if d.Kind != yaml.ScalarNode || d.ShortTag() != "!!int" {
		return 0, p.ErrAt(v, path, "want %s, got %s", want, Describe(d))
	}
	var x int64
	if err := d.Decode(&x); err != nil {
		return 0, p.ErrAt(v, path, "want %s, got %s", want, bounded.Quote(d.Value))
	}
	return x, nil
}

// Boolean reads true or false.
func (p *Parser) Boolean(v *yaml.Node, path string) (bool, error) {
	d := Deref(v)
	if d.Kind != yaml.ScalarNode || d.ShortTag() != "!!bool" {
		return false, p.ErrAt(v, path, "want true or false, got %s", Describe(d))
	}
	var b bool
	if err := d.Decode(&b); err != nil {
		return false, p.ErrAt(v, path, "want true or false, got %s", bounded.Quote(d.Value))
	}
	return b, nil
}

// Duration reads a Go duration (30ms, 1.5s) that is not negative.
func (p *Parser) Duration(v *yaml.Node, path string) (time.Duration, error) {
	s, err := p.Scalar(v, path)
	if err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, p.ErrAt(v, path, "%s is not a duration (want e.g. 30ms or 1.5s)", bounded.Quote(s))
	}
	if d < 0 {
		return 0, p.ErrAt(v, path, "%s is negative", bounded.Clip(s, bounded.MaxQuoted))
	}
	return d, nil
}

// PositiveDuration reads a Duration above zero.
func (p *Parser) PositiveDuration(v *yaml.Node, path string) (time.Duration, error) {
	d, err := p.Duration(v, path)
	if err == nil && d == 0 {
		err = p.ErrAt(v, path, "must be positive")
	}
	return d, err
}

// Percent reads a percentage 0..100 such as 5% or 0.5; the "%" is
// optional.
func (p *Parser) Percent(v *yaml.Node, path string) (float64, error) {
	return p.percent(v, path, func(f float64) bool { return f >= 0 && f <= 100 },
		"%s is not a percentage 0..100 (want e.g. 5%%)")
}

// PositivePercent reads a Percent above zero.
func (p *Parser) PositivePercent(v *yaml.Node, path string) (float64, error) {
	return p.percent(v, path, func(f float64) bool { return f > 0 && f <= 100 },
		"%s is not a percentage in (0, 100] (want e.g. 5%%)")
}

// percent reads a percentage that inRange accepts; format takes the value
// as written, quoted.
func (p *Parser) percent(v *yaml.Node, path string, inRange func(float64) bool, format string) (float64, error) {
	s, err := p.Scalar(v, path)
	if err != nil {
		return 0, err
	}
	num := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%"))
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || !inRange(f) {
		return 0, p.ErrAt(v, path, format, bounded.Quote(s))
	}
	return f, nil
}

// Join appends key to a field path, which is for errors: a long key is
// cut short.
func Join(path, key string) string {
	key = bounded.Clip(key, bounded.MaxQuoted)
	if path == "" {
		return key
	}
	return path + "." + key
}

// ValidName reports whether s may name what a file holds: names end up
// in benchmark names and file names.
func ValidName(s string) bool { return namePattern().MatchString(s) }

// Name reads a file's name field, which must be a ValidName.
func (p *Parser) Name(v *yaml.Node, path string) (string, error) {
	s, err := p.Scalar(v, path)
	if err == nil && !ValidName(s) {
		return "", p.ErrAt(v, path, "invalid name %s (want [A-Za-z0-9._-]{1,64})", bounded.Quote(s))
	}
	return s, err
}

// DefaultName names what a file holds when it has no name field: the
// file's name without folder and .yaml or .yml suffix, or fallback when
// that is no ValidName.
func DefaultName(file, fallback string) string {
	base := path.Base(file)
	for _, ext := range []string{".yaml", ".yml"} {
		base = strings.TrimSuffix(base, ext)
	}
	if !ValidName(base) {
		return fallback
	}
	return base
}

// Deref follows YAML aliases (*anchor) to the node they name; it never
// returns nil. Following at most 64 aliases bounds the work of a cycle.
func Deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 64; i++ {
		n = n.Alias
	}
	if n == nil {
		return &yaml.Node{}
	}
	return n
}

// KindName names n's kind for an error: "a mapping", "a list", ...
func KindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "nothing"
		}
		return "a single value"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	return "nothing"
}

// Describe is a single value quoted (bounded.Quote), or else KindName.
func Describe(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null" {
		return bounded.Quote(n.Value)
	}
	return KindName(n)
}
