package scenario

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/topologies/yamlfile"
	"github.com/bullylab/bullylab/wire/bounded"
	"go.yaml.in/yaml/v3"
)

// MaxFileSize bounds a scenario file; a scenario is a page of steps.
const MaxFileSize = 1 << 20

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
	partitionFields   = []string{"groups", "one_way", "mode"}
	isolateFields     = []string{"nodes", "mode"}
	cutFields         = []string{"links", "one_way", "mode"}
	clockFields       = []string{"nodes", "offset", "rate"}
	delayFields       = []string{"nodes", "delay", "jitter"}
	lossFields        = []string{"nodes", "percent"}
	faultNames        = fault.KindNames()
	scalarStepAllowed = []string{"wait_leader", "wait_election", "heal"}
)

// Load parses the scenario file at path, which may hold at most
// MaxFileSize bytes.
func Load(file string) (*Scenario, error) {
	data, err := bounded.ReadFile("scenario", file, MaxFileSize)
	if err != nil {
		return nil, err
	}
	return Parse(file, data)
}

// Parse parses and validates a scenario file; name is the file name used in
// error messages and, when the file has no name field, for the scenario's
// name. Errors are *Error: one line naming the file, line and field.
func Parse(name string, data []byte) (sc *Scenario, err error) {
	p := &parser{yamlfile.Parser{File: name, MaxNodes: maxNodes}}
	defer p.Recover(&err)
	sc, err = p.parse(data)
	if err != nil {
		return nil, err
	}
	return sc, nil
}

type parser struct{ yamlfile.Parser }

func (p *parser) parse(data []byte) (*Scenario, error) {
	if len(data) > MaxFileSize {
		return nil, p.ErrAt(nil, "", "file is larger than %s", bounded.Size(MaxFileSize))
	}
	top, err := p.Document(data, yamlfile.DocErrors{
		Kind:  "scenario",
		Empty: "empty scenario (want at least steps:)",
		Extra: "more than one YAML document (one scenario per file)",
	})
	if err != nil {
		return nil, err
	}
	sc := &Scenario{Name: yamlfile.DefaultName(p.File, "scenario"), Start: StartStable, Source: p.File}
	stepsVal, err := p.header(top, sc)
	if err != nil {
		return nil, err
	}
	if sc.Steps, err = p.steps(top, stepsVal); err != nil {
		return nil, err
	}
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	return sc, nil
}

// header reads the top-level fields but steps into sc and returns the
// steps' node, nil when absent. The steps are read after the whole header,
// so that a header error is reported before any step's.
func (p *parser) header(top *yaml.Node, sc *Scenario) (*yaml.Node, error) {
	var stepsVal *yaml.Node
	err := p.Mapping(top, "", topFields, func(key string, _, v *yaml.Node, fp string) error {
		var err error
		switch key {
		case "name":
			sc.Name, err = p.Name(v, fp)
		case "description":
			sc.Description, err = p.description(v, fp)
		case "start":
			sc.Start, err = p.start(v, fp)
		case "labels":
			sc.Labels, err = p.labels(v, fp)
		case "steps":
			stepsVal = v
		}
		return err
	})
	return stepsVal, err
}

// description must be one line: it ends up in one-line progress output
// and tables.
func (p *parser) description(v *yaml.Node, f string) (string, error) {
	s, err := p.Scalar(v, f)
	if err != nil {
		return "", err
	}
	if strings.ContainsAny(s, "\r\n") {
		return "", p.ErrAt(v, f, "must be one line")
	}
	return s, nil
}

func (p *parser) start(v *yaml.Node, f string) (Start, error) {
	s, err := p.Scalar(v, f)
	if err != nil {
		return "", err
	}
	switch Start(s) {
	case StartStable, StartCold:
		return Start(s), nil
	}
	return "", p.ErrAt(v, f, "unknown start %s (want stable or cold)", bounded.Quote(s))
}

// labels reads the labels mapping. The result stays nil until a label is
// set: `labels: {}` is no labels, which Format writes as nothing.
func (p *parser) labels(v *yaml.Node, f string) (map[string]string, error) {
	var labels map[string]string
	err := p.Mapping(v, f, nil, func(key string, k, v *yaml.Node, fp string) error {
		if !labelKeyPattern().MatchString(key) {
			return p.ErrAt(k, fp, "invalid label name (want [a-z][a-z0-9_-]{0,31})")
		}
		if slices.Contains(reservedLabels, key) {
			return p.ErrAt(k, fp, "%q is reserved for benchmark names", key)
		}
		s, err := p.Scalar(v, fp)
		if err != nil {
			return err
		}
		if !labelValPattern().MatchString(s) {
			return p.ErrAt(v, fp, "invalid value %s (want [A-Za-z0-9._-]{1,64})", bounded.Quote(s))
		}
		if labels == nil {
			labels = map[string]string{}
		}
		labels[key] = s
		return nil
	})
	return labels, err
}

// steps reads the steps list, stepsVal, which top must have had.
func (p *parser) steps(top, stepsVal *yaml.Node) ([]Step, error) {
	if stepsVal == nil {
		return nil, p.ErrAt(top, "steps", "missing")
	}
	items, err := p.Sequence(stepsVal, "steps", "a list of steps")
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, p.ErrAt(stepsVal, "steps", "no steps")
	}
	if len(items) > MaxSteps {
		return nil, p.ErrAt(stepsVal, "steps", "%d steps, at most %d", len(items), MaxSteps)
	}
	var steps []Step
	for i, it := range items {
		st, err := p.step(it, fmt.Sprintf("steps[%d]", i))
		if err != nil {
			return nil, err
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// step parses one step: a mapping with one key naming its kind, or the bare
// name of a kind whose fields all have defaults.
func (p *parser) step(v *yaml.Node, f string) (Step, error) {
	st := Step{Line: v.Line}
	kind, val, err := p.stepKind(v, f)
	if err != nil {
		return st, err
	}
	st.Kind = StepKind(kind)
	f += "." + kind
	switch st.Kind {
	case StepInject:
		st.Fault, err = p.fault(val, f)
	case StepWaitLeader:
		err = p.waitLeader(&st, val, f)
	case StepWaitElection:
		st.Timeout, err = p.waitElection(val, f)
	case StepWait:
		st.Duration, err = p.wait(val, f)
	case StepHeal:
		if !isEmpty(val) {
			err = p.ErrAt(val, f, "takes no arguments, got %s", yamlfile.KindName(yamlfile.Deref(val)))
		}
	}
	return st, err
}

// stepKind returns the kind a step names and the node of its arguments,
// nil for a bare name.
func (p *parser) stepKind(v *yaml.Node, f string) (string, *yaml.Node, error) {
	d := yamlfile.Deref(v)
	switch d.Kind {
	case yaml.ScalarNode:
		s, err := p.Scalar(v, f)
		if err != nil {
			return "", nil, err
		}
		if !slices.Contains(scalarStepAllowed, s) {
			if slices.Contains(stepKinds, s) {
				return "", nil, p.ErrAt(v, f, "%s needs arguments, as in {%s: ...}", s, s)
			}
			return "", nil, p.ErrAt(v, f, "unknown step %s (want %s)", bounded.Quote(s), strings.Join(stepKinds, ", "))
		}
		return s, nil, nil
	case yaml.MappingNode:
		if len(d.Content) != 2 {
			return "", nil, p.ErrAt(v, f, "want one key naming the step (%s), got %d keys", strings.Join(stepKinds, ", "), len(d.Content)/2)
		}
		var kind string
		var val *yaml.Node
		err := p.Mapping(v, f, stepKinds, func(key string, _, v *yaml.Node, _ string) error {
			kind, val = key, v
			return nil
		})
		return kind, val, err
	}
	return "", nil, p.ErrAt(v, f, "want a step such as {inject: {crash: leader}}, got %s", yamlfile.KindName(d))
}

func (p *parser) waitLeader(st *Step, val *yaml.Node, f string) error {
	st.Timeout, st.Expect = DefaultTimeout, ExpectHighestLive
	if isEmpty(val) {
		return nil
	}
	return p.Mapping(val, f, waitLeaderFields, func(key string, _, v *yaml.Node, fp string) error {
		var err error
		switch key {
		case "timeout":
			st.Timeout, err = p.PositiveDuration(v, fp)
		case "expect":
			var s string
			if s, err = p.Scalar(v, fp); err == nil {
				st.Expect = Expect(s)
				if st.Expect != ExpectHighestLive && st.Expect != ExpectAny {
					err = p.ErrAt(v, fp, "unknown expectation %s (want highest-live or any)", bounded.Quote(s))
				}
			}
		case "among":
			st.Among, err = p.selectors(v, fp, false)
		case "measure":
			st.Measure, err = p.Boolean(v, fp)
		}
		return err
	})
}

func (p *parser) waitElection(val *yaml.Node, f string) (time.Duration, error) {
	timeout := DefaultTimeout
	if isEmpty(val) {
		return timeout, nil
	}
	err := p.Mapping(val, f, timeoutFields, func(_ string, _, v *yaml.Node, fp string) error {
		var err error
		timeout, err = p.PositiveDuration(v, fp)
		return err
	})
	return timeout, err
}

// wait reads a wait's duration, given bare or as {duration: ...}.
func (p *parser) wait(val *yaml.Node, f string) (time.Duration, error) {
	if yamlfile.Deref(val).Kind != yaml.MappingNode {
		return p.PositiveDuration(val, f)
	}
	var d time.Duration
	found := false
	err := p.Mapping(val, f, durationFields, func(_ string, _, v *yaml.Node, fp string) error {
		var err error
		found = true
		d, err = p.PositiveDuration(v, fp)
		return err
	})
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, p.ErrAt(val, f+".duration", "missing")
	}
	return d, nil
}

// fault parses an inject's value: a mapping with one key naming the fault,
// or the bare name of a fault that takes no arguments (heal). The value a
// fault takes follows its kind's fault.Args.
func (p *parser) fault(v *yaml.Node, f string) (*Injection, error) {
	d := yamlfile.Deref(v)
	if d.Kind == yaml.ScalarNode && d.ShortTag() != "!!null" {
		if k := fault.Kind(d.Value); k.Args() == fault.ArgsNone {
			return &Injection{Kind: k}, nil
		}
		return nil, p.ErrAt(v, f, "want a fault such as {crash: leader}, got %s", yamlfile.Describe(d))
	}
	if d.Kind != yaml.MappingNode || len(d.Content) != 2 {
		n := 0
		if d.Kind == yaml.MappingNode {
			n = len(d.Content) / 2
		}
		return nil, p.ErrAt(v, f, "want one fault (%s), got %d", strings.Join(faultNames, ", "), n)
	}
	ft := &Injection{}
	err := p.Mapping(v, f, faultNames, func(key string, _, v *yaml.Node, fp string) error {
		ft.Kind = fault.Kind(key)
		var err error
		switch ft.Kind.Args() {
		case fault.ArgsNone:
			if !isEmpty(v) {
				return p.ErrAt(v, fp, "takes no arguments, got %s", yamlfile.KindName(yamlfile.Deref(v)))
			}
		case fault.ArgsGroups:
			err = p.partition(ft, v, fp)
		case fault.ArgsLinks:
			err = p.cut(ft, v, fp)
		case fault.ArgsClock:
			err = p.clock(ft, v, fp)
		case fault.ArgsDelay:
			ft.Nodes = Selectors{{Kind: SelAll}}
			err = p.Mapping(v, fp, delayFields, func(key string, _, v *yaml.Node, fp string) error {
				var err error
				switch key {
				case "nodes":
					ft.Nodes, err = p.selectors(v, fp, false)
				case "delay":
					ft.Delay, err = p.Duration(v, fp)
				case "jitter":
					ft.Jitter, err = p.Duration(v, fp)
				}
				return err
			})
		case fault.ArgsLoss:
			ft.Nodes = Selectors{{Kind: SelAll}}
			err = p.Mapping(v, fp, lossFields, func(key string, _, v *yaml.Node, fp string) error {
				var err error
				switch key {
				case "nodes":
					ft.Nodes, err = p.selectors(v, fp, false)
				case "percent":
					ft.Loss, err = p.PositivePercent(v, fp)
				}
				return err
			})
		default:
			if ft.Kind == fault.Isolate && yamlfile.Deref(v).Kind == yaml.MappingNode {
				err = p.isolate(ft, v, fp)
				break
			}
			ft.Nodes, err = p.selectors(v, fp, false)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return ft, nil
}

// mode reads how a partition, isolation or cut severs links.
func (p *parser) mode(v *yaml.Node, f string) (fault.CutMode, error) {
	s, err := p.Scalar(v, f)
	if err != nil {
		return "", err
	}
	m := fault.CutMode(strings.TrimSpace(s))
	if m == "" || !m.Valid() {
		return "", p.ErrAt(v, f, "unknown mode %s (want drop or reset)", bounded.Quote(s))
	}
	return m, nil
}

// isolate reads the long form of isolate, {nodes: SEL, mode: MODE}.
func (p *parser) isolate(ft *Injection, v *yaml.Node, f string) error {
	err := p.Mapping(v, f, isolateFields, func(key string, _, v *yaml.Node, fp string) error {
		var err error
		switch key {
		case "nodes":
			ft.Nodes, err = p.selectors(v, fp, false)
		case "mode":
			ft.Mode, err = p.mode(v, fp)
		}
		return err
	})
	if err == nil && len(ft.Nodes) == 0 {
		err = p.ErrAt(v, f+".nodes", "missing")
	}
	return err
}

// cut reads {links: [[SEL, SEL], ...], one_way: BOOL, mode: MODE}.
func (p *parser) cut(ft *Injection, v *yaml.Node, f string) error {
	var linksVal *yaml.Node
	err := p.Mapping(v, f, cutFields, func(key string, _, v *yaml.Node, fp string) error {
		var err error
		switch key {
		case "links":
			linksVal = v
			ft.Links, err = p.links(v, fp)
		case "one_way":
			ft.OneWay, err = p.Boolean(v, fp)
		case "mode":
			ft.Mode, err = p.mode(v, fp)
		}
		return err
	})
	if err != nil {
		return err
	}
	if linksVal == nil {
		return p.ErrAt(v, f+".links", "missing")
	}
	return nil
}

// links reads a cut's links, each a pair of selectors or lists of them.
func (p *parser) links(v *yaml.Node, f string) ([]Link, error) {
	items, err := p.Sequence(v, f, "a list of links [SEL, SEL]")
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, p.ErrAt(v, f, "no links (want [[SEL, SEL], ...])")
	}
	if len(items) > MaxSelectors {
		return nil, p.ErrAt(v, f, "%d links, at most %d", len(items), MaxSelectors)
	}
	out := make([]Link, 0, len(items))
	for i, it := range items {
		lf := fmt.Sprintf("%s[%d]", f, i)
		ends, err := p.Sequence(it, lf, "a link [SEL, SEL]")
		if err != nil {
			return nil, err
		}
		if len(ends) != 2 {
			return nil, p.ErrAt(it, lf, "want a link [SEL, SEL], got %d entries", len(ends))
		}
		var l Link
		if l.From, err = p.selectors(ends[0], lf+"[0]", false); err != nil {
			return nil, err
		}
		if l.To, err = p.selectors(ends[1], lf+"[1]", false); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// clock reads {nodes: SEL, offset: DURATION, rate: PPM}; offset and rate
// may be negative, and both default to zero, which puts the nodes back on
// their hosts' clocks.
func (p *parser) clock(ft *Injection, v *yaml.Node, f string) error {
	err := p.Mapping(v, f, clockFields, func(key string, _, v *yaml.Node, fp string) error {
		var err error
		switch key {
		case "nodes":
			ft.Nodes, err = p.selectors(v, fp, false)
		case "offset":
			ft.Clock.Offset, err = p.offset(v, fp)
		case "rate":
			ft.Clock.RatePPM, err = p.rate(v, fp)
		}
		return err
	})
	if err != nil {
		return err
	}
	if len(ft.Nodes) == 0 {
		return p.ErrAt(v, f+".nodes", "missing")
	}
	return nil
}

// offset reads a signed duration within fault.MaxClockOffset.
func (p *parser) offset(v *yaml.Node, f string) (time.Duration, error) {
	s, err := p.Scalar(v, f)
	if err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, p.ErrAt(v, f, "%s is not a duration (want e.g. 90s or -1.5s)", bounded.Quote(s))
	}
	if err := (fault.ClockSkew{Offset: d}).Validate(); err != nil {
		return 0, p.ErrAt(v, f, "%v", err)
	}
	return d, nil
}

// rate reads a drift in parts per million, such as 500ppm or -20 (the
// "ppm" is optional), within fault.MaxClockRatePPM.
func (p *parser) rate(v *yaml.Node, f string) (float64, error) {
	s, err := p.Scalar(v, f)
	if err != nil {
		return 0, err
	}
	num := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "ppm"))
	r, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsInf(r, 0) {
		return 0, p.ErrAt(v, f, "%s is not a rate in ppm (want e.g. 500ppm or -20ppm)", bounded.Quote(s))
	}
	if err := (fault.ClockSkew{RatePPM: r}).Validate(); err != nil {
		return 0, p.ErrAt(v, f, "%v", err)
	}
	return r, nil
}

func (p *parser) partition(ft *Injection, v *yaml.Node, f string) error {
	var groupsVal *yaml.Node
	err := p.Mapping(v, f, partitionFields, func(key string, _, v *yaml.Node, fp string) error {
		var err error
		switch key {
		case "groups":
			groupsVal = v
			var items []*yaml.Node
			if items, err = p.Sequence(v, fp, "a list of groups"); err != nil {
				return err
			}
			if len(items) > MaxSelectors {
				return p.ErrAt(v, fp, "%d groups, at most %d", len(items), MaxSelectors)
			}
			for i, it := range items {
				g, err := p.selectors(it, fmt.Sprintf("%s[%d]", fp, i), true)
				if err != nil {
					return err
				}
				ft.Groups = append(ft.Groups, g)
			}
		case "one_way":
			ft.OneWay, err = p.Boolean(v, fp)
		case "mode":
			ft.Mode, err = p.mode(v, fp)
		}
		return err
	})
	if err != nil {
		return err
	}
	if groupsVal == nil {
		return p.ErrAt(v, f+".groups", "missing")
	}
	if len(ft.Groups) < 2 {
		return p.ErrAt(groupsVal, f+".groups", "want at least two groups, got %d (use rest for everyone else)", len(ft.Groups))
	}
	return nil
}

// selectors reads one selector or a list of them.
func (p *parser) selectors(v *yaml.Node, f string, group bool) (Selectors, error) {
	d := yamlfile.Deref(v)
	items := []*yaml.Node{v}
	if d.Kind == yaml.SequenceNode {
		items = d.Content
		if len(items) == 0 {
			return nil, p.ErrAt(v, f, "empty list")
		}
	}
	if len(items) > MaxSelectors {
		return nil, p.ErrAt(v, f, "%d selectors, at most %d", len(items), MaxSelectors)
	}
	var out Selectors
	for i, it := range items {
		ip := f
		if d.Kind == yaml.SequenceNode {
			ip = fmt.Sprintf("%s[%d]", f, i)
		}
		s, err := p.Scalar(it, ip)
		if err != nil {
			return nil, err
		}
		sel, err := ParseSelector(strings.TrimSpace(s))
		if err != nil {
			return nil, p.ErrAt(it, ip, "%v", err)
		}
		if sel.Kind == SelRest && (!group || len(items) > 1) {
			return nil, p.ErrAt(it, ip, "rest stands alone, as a whole partition group")
		}
		out = append(out, sel)
	}
	return out, nil
}

// isEmpty reports whether a step's value is absent: null, or {}.
func isEmpty(v *yaml.Node) bool {
	d := yamlfile.Deref(v)
	return v == nil || d.Kind == yaml.ScalarNode && d.ShortTag() == "!!null" ||
		d.Kind == yaml.MappingNode && len(d.Content) == 0
}
