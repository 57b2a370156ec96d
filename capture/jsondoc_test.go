package capture

import (
	"bytes"
	"encoding"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
)

// The JSON of a Report is documented in README.md, section "The analyze
// JSON", for readers that are not Go: one table per object, a row per key
// with its type, unit and meaning. The tests here hold that documentation
// to the Go types and to reports of real captures, in both directions.

const jsonDocHeading = "### The analyze JSON"

// docField is one row of an object's table.
type docField struct {
	key      string // "(Name)" for the keys of object Name, inline
	typ      string
	unit     string
	meaning  string
	embedded bool
}

// readJSONDoc returns the README section's objects by name, their rows in
// order, and the section's text.
func readJSONDoc(t *testing.T) (map[string][]docField, string) {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n"+jsonDocHeading+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", jsonDocHeading)
	}
	if end := regexp.MustCompile(`(?m)^#{1,3} `).FindStringIndex(section); end != nil {
		section = section[:end[0]]
	}
	objects := map[string][]docField{}
	var cur string
	keyCell := regexp.MustCompile("^`([^`]+)`$|^\\(([A-Za-z]+)\\)$")
	for i, line := range strings.Split(section, "\n") {
		if name, ok := strings.CutPrefix(line, "#### "); ok {
			if _, dup := objects[name]; dup {
				t.Fatalf("README.md: object %s described twice", name)
			}
			cur = name
			objects[cur] = nil
			continue
		}
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "| key |") || strings.HasPrefix(line, "|---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if cur == "" || len(cells) != 4 {
			t.Fatalf("README.md, %s line %d: %q is not a row of an object's table (key | type | unit | meaning)", jsonDocHeading, i+1, line)
		}
		for k := range cells {
			cells[k] = strings.TrimSpace(cells[k])
		}
		m := keyCell.FindStringSubmatch(cells[0])
		if m == nil {
			t.Fatalf("README.md, object %s: key cell %q is neither `key` nor (Object)", cur, cells[0])
		}
		f := docField{key: m[1], typ: cells[1], unit: cells[2], meaning: cells[3]}
		if m[2] != "" {
			f.key, f.embedded = "("+m[2]+")", true
		}
		objects[cur] = append(objects[cur], f)
	}
	return objects, section
}

// goField is one key a Go struct marshals to.
type goField struct {
	key      string
	typ      string // as the documentation writes types
	omit     bool   // omitempty or omitzero: absent when empty
	nullable bool   // a pointer or slice that is marshalled when nil: null
	embedded bool   // an anonymous struct whose keys are inlined
}

var (
	timeType          = reflect.TypeFor[time.Time]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// jsonObjects returns the objects rt marshals to, by Go type name, with
// their keys: rt's and those of the structs it holds.
func jsonObjects(t *testing.T, rt reflect.Type) map[string][]goField {
	objects := map[string][]goField{}
	var typeOf func(reflect.Type) string
	var walk func(reflect.Type)
	typeOf = func(rt reflect.Type) string {
		if rt.Kind() == reflect.Pointer {
			return typeOf(rt.Elem())
		}
		switch {
		case rt == timeType:
			return "time"
		case rt.Implements(textMarshalerType):
			return "string" // uuid.UUID, netip.Addr
		}
		switch rt.Kind() {
		case reflect.Slice, reflect.Array:
			return "[" + typeOf(rt.Elem()) + "]"
		case reflect.String:
			return "string"
		case reflect.Bool:
			return "boolean"
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return "integer"
		case reflect.Float32, reflect.Float64:
			return "number"
		case reflect.Struct:
			walk(rt)
			return rt.Name()
		}
		t.Fatalf("%s: a JSON type the documentation has no word for", rt)
		return ""
	}
	walk = func(rt reflect.Type) {
		if _, seen := objects[rt.Name()]; seen {
			return
		}
		objects[rt.Name()] = nil
		var fields []goField
		for i := range rt.NumField() {
			sf := rt.Field(i)
			if !sf.IsExported() {
				continue
			}
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if sf.Anonymous && name == "" {
				fields = append(fields, goField{key: "(" + sf.Type.Name() + ")", typ: typeOf(sf.Type), embedded: true})
				continue
			}
			if name == "" {
				t.Fatalf("%s.%s has no JSON name", rt.Name(), sf.Name)
			}
			omit := slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero")
			k := sf.Type.Kind()
			fields = append(fields, goField{key: name, typ: typeOf(sf.Type), omit: omit,
				nullable: !omit && (k == reflect.Pointer || k == reflect.Slice || k == reflect.Map)})
		}
		objects[rt.Name()] = fields
	}
	walk(rt)
	return objects
}

// TestJSONDocMatchesTypes holds README.md's description of the analyze
// JSON to the types Report marshals from: the same objects with the same
// keys, each of the type documented, with a unit and a meaning, the
// optional ones said to be omitted and the nullable ones null.
func TestJSONDocMatchesTypes(t *testing.T) {
	doc, section := readJSONDoc(t)
	code := jsonObjects(t, reflect.TypeFor[Report]())
	for name := range code {
		if _, ok := doc[name]; !ok {
			t.Errorf("README.md, %s: object %s (Go type capture.%s) is not described", jsonDocHeading, name, name)
		}
	}
	for name := range doc {
		if _, ok := code[name]; !ok {
			t.Errorf("README.md, %s: object %s is described but no report has one", jsonDocHeading, name)
		}
	}
	for name, fields := range code {
		rows := map[string]docField{}
		for _, r := range doc[name] {
			if _, dup := rows[r.key]; dup {
				t.Errorf("README.md, object %s: key %s described twice", name, r.key)
			}
			rows[r.key] = r
		}
		for _, f := range fields {
			r, ok := rows[f.key]
			if !ok {
				t.Errorf("README.md, object %s: key %s (%s) is not described", name, f.key, f.typ)
				continue
			}
			delete(rows, f.key)
			where := "README.md, " + name + "." + f.key
			if r.typ != f.typ {
				t.Errorf("%s: type %q, the JSON's is %q", where, r.typ, f.typ)
			}
			if r.unit == "" || r.meaning == "" {
				t.Errorf("%s: no unit or no meaning", where)
			}
			switch {
			case strings.HasSuffix(f.key, "_ns") != (r.unit == "ns"):
				t.Errorf("%s: unit %q; a key ends in _ns exactly when its unit is ns", where, r.unit)
			case strings.HasSuffix(f.key, "_pct") && r.unit != "%":
				t.Errorf("%s: unit %q, want %%", where, r.unit)
			}
			if f.embedded {
				continue
			}
			if says := strings.Contains(r.meaning, "omitted"); says != f.omit {
				t.Errorf("%s: the meaning says when it is omitted: %v, but the key is omitted when empty: %v", where, says, f.omit)
			}
			if says := strings.Contains(r.meaning, "null"); says && !f.nullable {
				t.Errorf("%s: the meaning says when it is null, but it cannot be", where)
			} else if !says && f.nullable && !strings.HasPrefix(f.typ, "[") {
				// A nil pointer is null whenever it is nil; an array is
				// held to [] by TestJSONDocMatchesReports.
				t.Errorf("%s: null when it is not set, and the meaning does not say when", where)
			}
		}
		for key := range rows {
			t.Errorf("README.md, object %s: key %s is described but not in the JSON", name, key)
		}
	}

	if r := doc["Report"]; len(r) == 0 || r[0].key != "schema" || !strings.Contains(r[0].meaning, "`"+Schema+"`") {
		t.Errorf("README.md: the first key of Report is not schema, of value %s", Schema)
	}
	if !strings.Contains(section, "`"+Schema+"`") || !strings.Contains(section, "**Version.**") {
		t.Errorf("README.md, %s: does not give the version %s and how it changes", jsonDocHeading, Schema)
	}
}

// jsonDocChecker walks a report's JSON against the documentation.
type jsonDocChecker struct {
	t       *testing.T
	doc     map[string][]docField
	name    string                // the report's, for messages
	covered map[string]bool       // Object.key seen
	fields  map[string][]docField // an object's keys, embedded ones inlined
}

func (c *jsonDocChecker) keys(object string) []docField {
	if fs, ok := c.fields[object]; ok {
		return fs
	}
	var out []docField
	for _, f := range c.doc[object] {
		if f.embedded {
			out = append(out, c.keys(f.typ)...)
		} else {
			out = append(out, f)
		}
	}
	c.fields[object] = out
	return out
}

// value checks that v, at path, is of documented type typ.
func (c *jsonDocChecker) value(path, typ string, v any) {
	t := c.t
	switch {
	case strings.HasPrefix(typ, "["):
		a, ok := v.([]any)
		if !ok {
			t.Errorf("%s: %s is %T, documented %s", c.name, path, v, typ)
			return
		}
		for _, e := range a {
			c.value(path+"[]", typ[1:len(typ)-1], e)
		}
	case typ == "string" || typ == "time":
		s, ok := v.(string)
		if !ok {
			t.Errorf("%s: %s is %T, documented %s", c.name, path, v, typ)
		} else if _, err := time.Parse(time.RFC3339Nano, s); typ == "time" && err != nil {
			t.Errorf("%s: %s: %v", c.name, path, err)
		}
	case typ == "integer" || typ == "number":
		n, ok := v.(json.Number)
		if !ok {
			t.Errorf("%s: %s is %T, documented %s", c.name, path, v, typ)
		} else if typ == "integer" && strings.ContainsAny(n.String(), ".eE") {
			t.Errorf("%s: %s is %s, documented an integer", c.name, path, n)
		}
	case typ == "boolean":
		if _, ok := v.(bool); !ok {
			t.Errorf("%s: %s is %T, documented boolean", c.name, path, v)
		}
	default:
		obj, ok := v.(map[string]any)
		if !ok {
			t.Errorf("%s: %s is %T, documented object %s", c.name, path, v, typ)
			return
		}
		fields := c.keys(typ)
		for _, f := range fields {
			fv, present := obj[f.key]
			switch {
			case !present:
				if !strings.Contains(f.meaning, "omitted") {
					t.Errorf("%s: %s.%s is absent, and documented always there", c.name, path, f.key)
				}
			case fv == nil:
				if !strings.Contains(f.meaning, "null") {
					t.Errorf("%s: %s.%s is null, and the documentation does not say when", c.name, path, f.key)
				}
			default:
				c.covered[typ+"."+f.key] = true
				c.value(path+"."+f.key, f.typ, fv)
			}
		}
		for k := range obj {
			if !slices.ContainsFunc(fields, func(f docField) bool { return f.key == k }) {
				t.Errorf("%s: %s.%s is not documented (object %s)", c.name, path, k, typ)
			}
		}
	}
}

// authTroubles returns a capture of an authenticated cluster with what
// the verification reports: a tampered frame (its CRC fixed up) and the
// frames after it, a connection recorded and played again, one that does
// not begin with a HELLO, and a segment the capture lost.
func authTroubles(tb testing.TB) []byte {
	var buf bytes.Buffer
	s := authSynth(tb, &buf, 31)
	s.alter = func(a, b, i int, f []byte) []byte {
		if a == 3 && b == 0 && i == 5 {
			f[11] ^= 1
			return recrc(f)
		}
		return f
	}
	authScenario(s)
	s.closeConn(2, 1) // so that the recording begins with a HELLO
	var recorded []byte
	var types []wire.Type
	s.alter = func(a, b, _ int, f []byte) []byte {
		if a == 2 && b == 1 {
			recorded = append(recorded, f...)
			types = append(types, wire.Type(f[2]))
		}
		return f
	}
	s.heartbeats(2, 3, 2)
	s.closeConn(2, 1)
	s.sendRaw(2, 1, recorded, types...)
	s.closeConn(0, 1)
	s.sendRaw(0, 1, wire.Append(nil, s.msg(wire.TypeHeartbeat, 0, 3, 0)), wire.TypeHeartbeat)
	s.mute = true // a segment the capture lost: a gap
	s.send(2, 0, s.msg(wire.TypeHeartbeat, 2, 3, 0))
	s.mute = false
	s.send(2, 0, s.msg(wire.TypeHeartbeat, 2, 3, 0))
	s.close(tb)
	return buf.Bytes()
}

// TestJSONDocMatchesReports holds the documentation to the JSON of real
// reports: of an authenticated cluster with and without its key, with
// failures, a replay and a timeline; of faults checked on the wire; of a
// truncated capture; of a capture without frames. Every key they hold is
// documented, of its documented type, present unless documented as
// omitted and null only where documented so.
func TestJSONDocMatchesReports(t *testing.T) {
	doc, _ := readJSONDoc(t)
	c := &jsonDocChecker{t: t, doc: doc, covered: map[string]bool{}, fields: map[string][]docField{}}
	check := func(name string, rep *Report) {
		t.Helper()
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatal(err)
		}
		c.name = name
		c.value("report", "Report", v)
	}

	// Authenticated: a tampered frame, a replayed connection, a
	// connection without a HELLO, a gap; with and without the key.
	data := authTroubles(t)
	rep := analyzeKey(t, data, &testKey)
	if a := rep.Auth; a.Failed == 0 || a.AfterFailure == 0 || a.ReplayCount == 0 || len(rep.StreamErrors) == 0 {
		t.Fatalf("the authenticated scenario did not come out as planned: %+v", a)
	}
	if rep.Timeline, _ = rep.ElectionTimeline(1); rep.Timeline == nil {
		t.Fatal("no election 1")
	}
	check("authenticated, with the key", rep)
	check("authenticated, without the key", analyzeKey(t, data, nil))

	// Truncated: the same capture, cut in its last block.
	cut := data[:len(data)-3]
	if rep := analyzeKey(t, cut, &testKey); rep.Truncated == nil {
		t.Fatal("the cut capture is not truncated")
	} else {
		check("truncated", rep)
	}

	// Faults checked on the wire, send times from the clock.
	fs, fbuf := faultSynth(t)
	fs.inForceRecord(Record{Kind: fault.Delay, Nodes: fs.names(0, 1, 2, 3, 4), Impair: &RecordImpairment{DelayNS: 5e6, JitterNS: 1e6}})
	fs.egress = map[int]time.Duration{0: 5 * time.Millisecond, 1: 5 * time.Millisecond, 2: 5 * time.Millisecond, 3: 5 * time.Millisecond, 4: 5 * time.Millisecond}
	fs.heartbeats(4, 1, 5)
	fs.egress = nil
	fs.inForceRecord(Record{Kind: fault.Loss, Nodes: fs.names(4), Peers: fs.names(0), Impair: &RecordImpairment{Loss: 10}})
	fs.retransmit = 0.1
	fs.heartbeats(4, 1, 20)
	fs.retransmit = 0
	fs.inForceRecord(Record{Kind: fault.Clear})
	fs.inForceRecord(Record{Kind: fault.Partition, Groups: [][]string{fs.names(3, 4), fs.names(0, 1, 2)}, OneWay: true})
	fs.noAck = true
	fs.heartbeats(4, 1, 2)
	fs.noAck = false
	fs.record(Record{Kind: fault.Heal, Nodes: fs.names(0, 1, 2, 3, 4)})
	fs.inForceRecord(Record{Kind: fault.Crash, Nodes: fs.names(4), Detail: "SIGKILL"})
	fs.live[4] = false
	fs.advance(time.Second)
	fs.elect(0, 1, wire.ReasonLeaderFailed)
	rep = analyzeSynth(t, fs, fbuf)
	if len(rep.FaultChecks) < 4 || rep.PathDelay == nil {
		t.Fatalf("the fault scenario did not come out as planned: %d checks, path delay %v", len(rep.FaultChecks), rep.PathDelay)
	}
	check("faults", rep)

	// Merged from two hosts' captures, with the end record.
	var mbuf bytes.Buffer
	ms := newSynth(t, &mbuf, 4, 9)
	ms.benchScenario(200)
	ms.close(t)
	caps, recs, tb := splitCapture(t, mbuf.Bytes(), [][]int{{1, 3}, {2, 4}}, []time.Duration{time.Millisecond, -time.Millisecond})
	var merged bytes.Buffer
	if _, err := Merge(&merged, []MergeInput{
		{Host: "h1", Nodes: []string{"n1", "n3"}, R: caps[0], Offset: time.Millisecond, Bound: 100 * time.Microsecond},
		{Host: "h2", Nodes: []string{"n2", "n4"}, R: caps[1], Offset: -time.Millisecond, Bound: 100 * time.Microsecond},
	}, MergeOptions{Testbed: tb, Records: recs, RecordBound: 100 * time.Microsecond}); err != nil {
		t.Fatal(err)
	}
	if rep := analyzeBytes(t, merged.Bytes()); rep.Capture == nil || rep.ClockErrorNS == 0 {
		t.Fatalf("the merged capture did not come out as planned: capture %v, clock error %d ns", rep.Capture, rep.ClockErrorNS)
	} else {
		check("merged", rep)
	}

	// No frames at all.
	var ebuf bytes.Buffer
	es := newSynth(t, &ebuf, 2, 1)
	es.close(t)
	check("records only", analyzeBytes(t, ebuf.Bytes()))

	var missed []string
	for object, fields := range doc {
		for _, f := range fields {
			if !f.embedded && !c.covered[object+"."+f.key] {
				missed = append(missed, object+"."+f.key)
			}
		}
	}
	slices.Sort(missed)
	t.Logf("the reports held %d documented keys; not %v", len(c.covered), missed)
}
