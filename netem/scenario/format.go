package scenario

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/bullylab/bullylab/topologies/fault"
	"go.yaml.in/yaml/v3"
)

// Format writes sc as a scenario file that Parse reads back to the same
// scenario: how a built-in is shown to someone who wants to copy and edit
// it, and how results record the scenario they ran.
func Format(sc *Scenario) ([]byte, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	top := mapping(false)
	add(top, "name", str(sc.Name))
	if sc.Description != "" {
		add(top, "description", str(sc.Description))
	}
	add(top, "start", str(string(sc.Start)))
	if len(sc.Labels) > 0 {
		labels := mapping(true)
		for _, k := range sortedKeys(sc.Labels) {
			add(labels, k, str(sc.Labels[k]))
		}
		add(top, "labels", labels)
	}
	steps := &yaml.Node{Kind: yaml.SequenceNode}
	for _, st := range sc.Steps {
		steps.Content = append(steps.Content, formatStep(st))
	}
	add(top, "steps", steps)

	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(top); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	return buf.Bytes(), nil
}

func formatStep(st Step) *yaml.Node {
	step := mapping(false)
	switch st.Kind {
	case StepInject:
		ft := st.Fault
		if ft.Kind.Args() == fault.ArgsNone {
			add(step, "inject", str(string(ft.Kind)))
			return step
		}
		var arg *yaml.Node
		switch ft.Kind.Args() {
		case fault.ArgsGroups:
			arg = mapping(true)
			groups := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
			for _, g := range ft.Groups {
				groups.Content = append(groups.Content, selectors(g))
			}
			add(arg, "groups", groups)
			if ft.OneWay {
				add(arg, "one_way", boolean(true))
			}
			addMode(arg, ft.Mode)
		case fault.ArgsLinks:
			arg = mapping(true)
			links := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
			for _, l := range ft.Links {
				links.Content = append(links.Content, &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle,
					Content: []*yaml.Node{selectors(l.From), selectors(l.To)}})
			}
			add(arg, "links", links)
			if ft.OneWay {
				add(arg, "one_way", boolean(true))
			}
			addMode(arg, ft.Mode)
		case fault.ArgsClock:
			arg = mapping(true)
			add(arg, "nodes", selectors(ft.Nodes))
			if ft.Clock.Offset != 0 {
				add(arg, "offset", str(ft.Clock.Offset.String()))
			}
			if ft.Clock.RatePPM != 0 {
				add(arg, "rate", str(strconv.FormatFloat(ft.Clock.RatePPM, 'g', -1, 64)+"ppm"))
			}
		case fault.ArgsDelay:
			arg = mapping(true)
			add(arg, "nodes", selectors(ft.Nodes))
			add(arg, "delay", str(ft.Delay.String()))
			if ft.Jitter > 0 {
				add(arg, "jitter", str(ft.Jitter.String()))
			}
		case fault.ArgsLoss:
			arg = mapping(true)
			add(arg, "nodes", selectors(ft.Nodes))
			add(arg, "percent", str(strconv.FormatFloat(ft.Loss, 'g', -1, 64)+"%"))
		default:
			arg = selectors(ft.Nodes)
			if ft.Mode != "" {
				arg = mapping(true)
				add(arg, "nodes", selectors(ft.Nodes))
				addMode(arg, ft.Mode)
			}
		}
		fault := mapping(true)
		add(fault, string(ft.Kind), arg)
		add(step, "inject", fault)
	case StepWaitLeader:
		arg := mapping(true)
		add(arg, "timeout", str(st.Timeout.String()))
		add(arg, "expect", str(string(st.Expect)))
		if len(st.Among) > 0 {
			add(arg, "among", selectors(st.Among))
		}
		if st.Measure {
			add(arg, "measure", boolean(true))
		}
		add(step, "wait_leader", arg)
	case StepWaitElection:
		arg := mapping(true)
		add(arg, "timeout", str(st.Timeout.String()))
		add(step, "wait_election", arg)
	case StepWait:
		add(step, "wait", str(st.Duration.String()))
	case StepHeal:
		return str(string(StepHeal))
	}
	return step
}

// addMode adds a mode the file gave; none means the default, drop.
func addMode(m *yaml.Node, mode fault.CutMode) {
	if mode != "" {
		add(m, "mode", str(string(mode)))
	}
}

func mapping(flow bool) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	if flow {
		n.Style = yaml.FlowStyle
	}
	return n
}

func add(m *yaml.Node, key string, v *yaml.Node) {
	m.Content = append(m.Content, str(key), v)
}

// str is a string scalar; the encoder quotes it when it would otherwise
// read back as something else (true, 3, null).
func str(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

func boolean(b bool) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(b)}
}

func selectors(ss Selectors) *yaml.Node {
	if len(ss) == 1 {
		return str(ss[0].String())
	}
	seq := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, s := range ss {
		seq.Content = append(seq.Content, str(s.String()))
	}
	return seq
}
