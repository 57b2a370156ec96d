package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// maxFileSize bounds what Parse reads; a scenario is a page of steps.
const maxFileSize = 1 << 20

// maxNodes bounds the YAML nodes Parse visits. Aliases let a few bytes
// name a large list many times; without a bound a small file could cost
// minutes.
const maxNodes = 1_000_000

var (
	topFields         = []string{"name", "description", "start", "labels", "steps"}
	stepKinds         = []string{"inject", "wait_leader", "wait_election", "wait", "heal"}
	waitLeaderFields  = []string{"timeout", "expect", "among", "measure"}
	timeoutFields     = []string{"timeout"}
	durationFields    = []string{"duration"}
	partitionFields   = []string{"groups", "one_way"}
	delayFields       = []string{"nodes", "delay", "jitter"}
	lossFields        = []string{"nodes", "percent"}
	yamlLinePattern   = regexp.MustCompile(`(?s)^yaml: line (\d+): (.*)$`)
	faultNames        = faultKindNames()
	scalarStepAllowed = []string{"wait_leader", "wait_election", "heal"}
)

func faultKindNames() []string {
	names := make([]string, len(FaultKinds))
	for i, k := range FaultKinds {
		names[i] = string(k)
	}
	return names
}

// Load parses the scenario file at path.
func Load(file string) (*Scenario, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	return Parse(file, data)
}

// Parse parses and validates a scenario file; name is the file name used in
// error messages and, when the file has no name field, for the scenario's
// name. Errors are *Error: one line naming the file, line and field.
func Parse(name string, data []byte) (sc *Scenario, err error) {
	defer func() {
		// The YAML parser is third-party code fed untrusted files; a panic
		// there must not take a whole bench down.
		if r := recover(); r != nil {
			sc, err = nil, &Error{File: name, Msg: fmt.Sprintf("cannot parse: %v", r)}
		}
	}()
	p := &parser{file: name}
	sc, err = p.parse(data)
	if err != nil {
		return nil, err
	}
	return sc, nil
}

type parser struct {
	file  string
	nodes int // YAML nodes visited, against maxNodes
}

func (p *parser) errAt(n *yaml.Node, field, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &Error{File: p.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) yamlErr(err error) error {
	if m := yamlLinePattern.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: p.file, Line: line, Msg: m[2]}
	}
	return &Error{File: p.file, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
}

func (p *parser) parse(data []byte) (*Scenario, error) {
	if len(data) > maxFileSize {
		return nil, p.errAt(nil, "", "file is larger than %d KiB", maxFileSize>>10)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, p.errAt(nil, "", "empty scenario (want at least steps:)")
		}
		return nil, p.yamlErr(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, p.yamlErr(err)
		}
		return nil, p.errAt(&extra, "", "more than one YAML document (one scenario per file)")
	}
	top := &doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		top = doc.Content[0]
	}
	if d := deref(top); d.Kind != yaml.MappingNode {
		if d.Kind == yaml.ScalarNode && d.ShortTag() == "!!null" {
			return nil, p.errAt(top, "", "empty scenario (want at least steps:)")
		}
		return nil, p.errAt(top, "", "want a mapping of scenario fields, got %s", kindName(d))
	}

	sc := &Scenario{Name: defaultName(p.file), Start: StartStable, Source: p.file}
	var stepsVal *yaml.Node
	err := p.mapping(top, "", topFields, func(key string, k, v *yaml.Node, fp string) error {
		var err error
		switch key {
		case "name":
			var s string
			if s, err = p.scalar(v, fp); err == nil {
				if !namePattern.MatchString(s) {
					return p.errAt(v, fp, "invalid name %q (want [A-Za-z0-9._-]{1,64})", s)
				}
				sc.Name = s
			}
		case "description":
			var s string
			if s, err = p.scalar(v, fp); err == nil {
				if strings.ContainsAny(s, "\r\n") {
					return p.errAt(v, fp, "must be one line")
				}
				sc.Description = s
			}
		case "start":
			var s string
			if s, err = p.scalar(v, fp); err == nil {
				switch Start(s) {
				case StartStable, StartCold:
					sc.Start = Start(s)
				default:
					return p.errAt(v, fp, "unknown start %q (want stable or cold)", s)
				}
			}
		case "labels":
			sc.Labels = map[string]string{}
			err = p.mapping(v, fp, nil, func(key string, k, v *yaml.Node, fp string) error {
				if !labelKeyPattern.MatchString(key) {
					return p.errAt(k, fp, "invalid label name (want [a-z][a-z0-9_-]{0,31})")
				}
				if slices.Contains(reservedLabels, key) {
					return p.errAt(k, fp, "%q is reserved for benchmark names", key)
				}
				s, err := p.scalar(v, fp)
				if err != nil {
					return err
				}
				if !labelValPattern.MatchString(s) {
					return p.errAt(v, fp, "invalid value %q (want [A-Za-z0-9._-]{1,64})", s)
				}
				sc.Labels[key] = s
				return nil
			})
		case "steps":
			stepsVal = v
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if stepsVal == nil {
		return nil, p.errAt(top, "steps", "missing")
	}
	items, err := p.sequence(stepsVal, "steps", "a list of steps")
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, p.errAt(stepsVal, "steps", "no steps")
	}
	if len(items) > MaxSteps {
		return nil, p.errAt(stepsVal, "steps", "%d steps, at most %d", len(items), MaxSteps)
	}
	for i, it := range items {
		st, err := p.step(it, fmt.Sprintf("steps[%d]", i))
		if err != nil {
			return nil, err
		}
		sc.Steps = append(sc.Steps, st)
	}
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	return sc, nil
}

// step parses one step: a mapping with one key naming its kind, or the bare
// name of a kind whose fields all have defaults.
func (p *parser) step(v *yaml.Node, f string) (Step, error) {
	d := deref(v)
	st := Step{Line: v.Line}
	var kind string
	var val *yaml.Node
	switch d.Kind {
	case yaml.ScalarNode:
		s, err := p.scalar(v, f)
		if err != nil {
			return st, err
		}
		if !slices.Contains(scalarStepAllowed, s) {
			if slices.Contains(stepKinds, s) {
				return st, p.errAt(v, f, "%s needs arguments, as in {%s: ...}", s, s)
			}
			return st, p.errAt(v, f, "unknown step %q (want %s)", s, strings.Join(stepKinds, ", "))
		}
		kind = s
	case yaml.MappingNode:
		if len(d.Content) != 2 {
			return st, p.errAt(v, f, "want one key naming the step (%s), got %d keys", strings.Join(stepKinds, ", "), len(d.Content)/2)
		}
		err := p.mapping(v, f, stepKinds, func(key string, _, v *yaml.Node, _ string) error {
			kind, val = key, v
			return nil
		})
		if err != nil {
			return st, err
		}
	default:
		return st, p.errAt(v, f, "want a step such as {inject: {crash: leader}}, got %s", kindName(d))
	}
	st.Kind = StepKind(kind)
	f += "." + kind
	switch st.Kind {
	case StepInject:
		ft, err := p.fault(val, f)
		if err != nil {
			return st, err
		}
		st.Fault = ft
	case StepWaitLeader:
		st.Timeout, st.Expect = DefaultTimeout, ExpectHighestLive
		if isEmpty(val) {
			break
		}
		err := p.mapping(val, f, waitLeaderFields, func(key string, _, v *yaml.Node, fp string) error {
			var err error
			switch key {
			case "timeout":
				st.Timeout, err = p.positiveDuration(v, fp)
			case "expect":
				var s string
				if s, err = p.scalar(v, fp); err == nil {
					st.Expect = Expect(s)
					if st.Expect != ExpectHighestLive && st.Expect != ExpectAny {
						err = p.errAt(v, fp, "unknown expectation %q (want highest-live or any)", s)
					}
				}
			case "among":
				st.Among, err = p.selectors(v, fp, false)
			case "measure":
				st.Measure, err = p.boolean(v, fp)
			}
			return err
		})
		if err != nil {
			return st, err
		}
	case StepWaitElection:
		st.Timeout = DefaultTimeout
		if isEmpty(val) {
			break
		}
		err := p.mapping(val, f, timeoutFields, func(_ string, _, v *yaml.Node, fp string) error {
			var err error
			st.Timeout, err = p.positiveDuration(v, fp)
			return err
		})
		if err != nil {
			return st, err
		}
	case StepWait:
		if deref(val).Kind == yaml.MappingNode {
			found := false
			err := p.mapping(val, f, durationFields, func(_ string, _, v *yaml.Node, fp string) error {
				var err error
				found = true
				st.Duration, err = p.positiveDuration(v, fp)
				return err
			})
			if err != nil {
				return st, err
			}
			if !found {
				return st, p.errAt(val, f+".duration", "missing")
			}
			break
		}
		var err error
		if st.Duration, err = p.positiveDuration(val, f); err != nil {
			return st, err
		}
	case StepHeal:
		if !isEmpty(val) {
			return st, p.errAt(val, f, "takes no arguments, got %s", kindName(deref(val)))
		}
	}
	return st, nil
}

// fault parses an inject's value: a mapping with one key naming the fault,
// or the bare name heal.
func (p *parser) fault(v *yaml.Node, f string) (*Fault, error) {
	d := deref(v)
	if d.Kind == yaml.ScalarNode && d.ShortTag() != "!!null" {
		if d.Value == string(Heal) {
			return &Fault{Kind: Heal}, nil
		}
		return nil, p.errAt(v, f, "want a fault such as {crash: leader}, got %s", describe(d))
	}
	if d.Kind != yaml.MappingNode || len(d.Content) != 2 {
		n := 0
		if d.Kind == yaml.MappingNode {
			n = len(d.Content) / 2
		}
		return nil, p.errAt(v, f, "want one fault (%s), got %d", strings.Join(faultNames, ", "), n)
	}
	ft := &Fault{}
	err := p.mapping(v, f, faultNames, func(key string, _, v *yaml.Node, fp string) error {
		ft.Kind = FaultKind(key)
		var err error
		switch ft.Kind {
		case Heal:
			if !isEmpty(v) {
				return p.errAt(v, fp, "takes no arguments, got %s", kindName(deref(v)))
			}
		case Partition:
			err = p.partition(ft, v, fp)
		case Delay:
			ft.Nodes = Selectors{{Kind: SelAll}}
			err = p.mapping(v, fp, delayFields, func(key string, _, v *yaml.Node, fp string) error {
				var err error
				switch key {
				case "nodes":
					ft.Nodes, err = p.selectors(v, fp, false)
				case "delay":
					ft.Delay, err = p.duration(v, fp)
				case "jitter":
					ft.Jitter, err = p.duration(v, fp)
				}
				return err
			})
		case Loss:
			ft.Nodes = Selectors{{Kind: SelAll}}
			err = p.mapping(v, fp, lossFields, func(key string, _, v *yaml.Node, fp string) error {
				var err error
				switch key {
				case "nodes":
					ft.Nodes, err = p.selectors(v, fp, false)
				case "percent":
					ft.Loss, err = p.percent(v, fp)
				}
				return err
			})
		default:
			ft.Nodes, err = p.selectors(v, fp, false)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return ft, nil
}

func (p *parser) partition(ft *Fault, v *yaml.Node, f string) error {
	var groupsVal *yaml.Node
	err := p.mapping(v, f, partitionFields, func(key string, _, v *yaml.Node, fp string) error {
		var err error
		switch key {
		case "groups":
			groupsVal = v
			var items []*yaml.Node
			if items, err = p.sequence(v, fp, "a list of groups"); err != nil {
				return err
			}
			if len(items) > MaxSelectors {
				return p.errAt(v, fp, "%d groups, at most %d", len(items), MaxSelectors)
			}
			for i, it := range items {
				g, err := p.selectors(it, fmt.Sprintf("%s[%d]", fp, i), true)
				if err != nil {
					return err
				}
				ft.Groups = append(ft.Groups, g)
			}
		case "one_way":
			ft.OneWay, err = p.boolean(v, fp)
		}
		return err
	})
	if err != nil {
		return err
	}
	if groupsVal == nil {
		return p.errAt(v, f+".groups", "missing")
	}
	if len(ft.Groups) < 2 {
		return p.errAt(groupsVal, f+".groups", "want at least two groups, got %d (use rest for everyone else)", len(ft.Groups))
	}
	return nil
}

// selectors reads one selector or a list of them.
func (p *parser) selectors(v *yaml.Node, f string, group bool) (Selectors, error) {
	d := deref(v)
	items := []*yaml.Node{v}
	if d.Kind == yaml.SequenceNode {
		items = d.Content
		if len(items) == 0 {
			return nil, p.errAt(v, f, "empty list")
		}
	}
	if len(items) > MaxSelectors {
		return nil, p.errAt(v, f, "%d selectors, at most %d", len(items), MaxSelectors)
	}
	var out Selectors
	for i, it := range items {
		ip := f
		if d.Kind == yaml.SequenceNode {
			ip = fmt.Sprintf("%s[%d]", f, i)
		}
		s, err := p.scalar(it, ip)
		if err != nil {
			return nil, err
		}
		sel, err := ParseSelector(strings.TrimSpace(s))
		if err != nil {
			return nil, p.errAt(it, ip, "%v", err)
		}
		if sel.Kind == SelRest && (!group || len(items) > 1) {
			return nil, p.errAt(it, ip, "rest stands alone, as a whole partition group")
		}
		out = append(out, sel)
	}
	return out, nil
}

// mapping walks a mapping's fields in file order, rejecting repeated keys and
// keys not in known (any key when known is nil).
func (p *parser) mapping(v *yaml.Node, path string, known []string, fn func(key string, k, v *yaml.Node, fp string) error) error {
	d := deref(v)
	if d.Kind != yaml.MappingNode {
		return p.errAt(v, path, "want a mapping, got %s", kindName(d))
	}
	seen := make(map[string]int, len(d.Content)/2)
	for i := 0; i+1 < len(d.Content); i += 2 {
		k, val := d.Content[i], d.Content[i+1]
		if p.nodes += 2; p.nodes > maxNodes {
			return p.errAt(k, path, "file too complex (more than %d YAML nodes after aliases)", maxNodes)
		}
		kd := deref(k)
		if kd.Kind != yaml.ScalarNode {
			return p.errAt(k, path, "keys must be plain names, got %s", kindName(kd))
		}
		fp := join(path, kd.Value)
		if known != nil && !slices.Contains(known, kd.Value) {
			return p.errAt(k, fp, "unknown field (want %s)", strings.Join(known, ", "))
		}
		if line, ok := seen[kd.Value]; ok {
			return p.errAt(k, fp, "repeated (first at line %d)", line)
		}
		seen[kd.Value] = k.Line
		if err := fn(kd.Value, k, val, fp); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) sequence(v *yaml.Node, path, want string) ([]*yaml.Node, error) {
	d := deref(v)
	if d.Kind != yaml.SequenceNode {
		return nil, p.errAt(v, path, "want %s, got %s", want, kindName(d))
	}
	if p.nodes += len(d.Content); p.nodes > maxNodes {
		return nil, p.errAt(v, path, "file too complex (more than %d YAML nodes after aliases)", maxNodes)
	}
	return d.Content, nil
}

func (p *parser) scalar(v *yaml.Node, path string) (string, error) {
	d := deref(v)
	if d.Kind != yaml.ScalarNode {
		return "", p.errAt(v, path, "want a single value, got %s", kindName(d))
	}
	if d.ShortTag() == "!!null" {
		return "", p.errAt(v, path, "missing value")
	}
	return d.Value, nil
}

func (p *parser) boolean(v *yaml.Node, path string) (bool, error) {
	d := deref(v)
	if d.Kind != yaml.ScalarNode || d.ShortTag() != "!!bool" {
		return false, p.errAt(v, path, "want true or false, got %s", describe(d))
	}
	var b bool
	if err := d.Decode(&b); err != nil {
		return false, p.errAt(v, path, "want true or false, got %q", d.Value)
	}
	return b, nil
}

func (p *parser) duration(v *yaml.Node, path string) (time.Duration, error) {
	s, err := p.scalar(v, path)
	if err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, p.errAt(v, path, "%q is not a duration (want e.g. 30ms or 1.5s)", s)
	}
	if d < 0 {
		return 0, p.errAt(v, path, "%s is negative", s)
	}
	return d, nil
}

func (p *parser) positiveDuration(v *yaml.Node, path string) (time.Duration, error) {
	d, err := p.duration(v, path)
	if err == nil && d == 0 {
		err = p.errAt(v, path, "must be positive")
	}
	return d, err
}

func (p *parser) percent(v *yaml.Node, path string) (float64, error) {
	s, err := p.scalar(v, path)
	if err != nil {
		return 0, err
	}
	num := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%"))
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || !(f > 0 && f <= 100) {
		return 0, p.errAt(v, path, "%q is not a percentage in (0, 100] (want e.g. 5%%)", s)
	}
	return f, nil
}

// defaultName derives a scenario name from its file name.
func defaultName(file string) string {
	base := path.Base(file)
	for _, ext := range []string{".yaml", ".yml"} {
		base = strings.TrimSuffix(base, ext)
	}
	if !namePattern.MatchString(base) {
		return "scenario"
	}
	return base
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// isEmpty reports whether a step's value is absent: null, or {}.
func isEmpty(v *yaml.Node) bool {
	d := deref(v)
	return v == nil || d.Kind == yaml.ScalarNode && d.ShortTag() == "!!null" ||
		d.Kind == yaml.MappingNode && len(d.Content) == 0
}

// deref follows YAML aliases (*anchor) to the node they name.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 64; i++ {
		n = n.Alias
	}
	if n == nil {
		return &yaml.Node{}
	}
	return n
}

func kindName(n *yaml.Node) string {
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

func describe(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null" {
		return strconv.Quote(n.Value)
	}
	return kindName(n)
}
