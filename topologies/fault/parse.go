package fault

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// WordOptions are the options of a fault given as words, as the command
// line's flags --one-way, --jitter and --mode give them.
type WordOptions struct {
	OneWay bool   // partition, cut: cut only what the first group (node) sends to the second
	Jitter string // delay: the jitter, a duration such as 5ms
	Mode   string // partition, isolate, cut: drop or reset (CutModes); empty: drop
}

// ParseWords parses a fault given as words, its kind and then its
// arguments, as the command line takes it:
//
//	crash|restart|pause|resume|isolate|unisolate|campaign|leave|join NODE...
//	clear [NODE... | NODE:PEER]  no NODE: every node; NODE:PEER: that pair only
//	heal
//	partition GROUP GROUP...     a GROUP: NODE[,NODE...] or a topology group
//	cut NODE:NODE...             each pair cut both ways (WordOptions.OneWay: first -> second)
//	delay NODE[:PEER] DURATION   such as 50ms; WordOptions.Jitter adds jitter
//	loss NODE[:PEER] PERCENT     0 to 100, the "%" optional
//	clock NODE... OFFSET [RATEppm]  such as +90s 500ppm; 0 puts the nodes
//	                             back on their host's clock
//
// Names are not checked against a topology: the lab resolves them. An
// error is one line, "fault KIND: what is wrong", naming the argument.
func ParseWords(words []string, opts WordOptions) (Fault, error) {
	if len(words) == 0 {
		return Fault{}, fmt.Errorf("fault: no kind given (want %s)", KindList())
	}
	kind, args := Kind(words[0]), words[1:]
	f := Fault{Kind: kind}
	if opts.OneWay && kind.Args() != ArgsGroups && kind.Args() != ArgsLinks {
		return f, fmt.Errorf("fault %s: --one-way is for %s and %s", printable(kind), kindsTaking(ArgsGroups), kindsTaking(ArgsLinks))
	}
	if opts.Jitter != "" && kind.Args() != ArgsDelay {
		return f, fmt.Errorf("fault %s: --jitter is for %s", printable(kind), kindsTaking(ArgsDelay))
	}
	if opts.Mode != "" {
		if !kind.Severs() {
			return f, fmt.Errorf("fault %s: --mode is for %s, %s and %s", printable(kind), Partition, Isolate, Cut)
		}
		m := CutMode(opts.Mode)
		if !m.Valid() {
			return f, fmt.Errorf("fault %s: --mode %s: want %s or %s", kind, strconv.Quote(opts.Mode), ModeDrop, ModeReset)
		}
		f.Mode = m
	}
	switch kind.Args() {
	case ArgsNodes:
		if len(args) == 0 {
			return f, fmt.Errorf("fault %s: name the nodes (like n1 n2)", kind)
		}
		f.Nodes = args
	case ArgsNodesOrAll:
		f.Nodes = args
		if i := slices.IndexFunc(args, func(a string) bool { return strings.Contains(a, ":") }); i >= 0 {
			node, peer, _ := strings.Cut(args[i], ":")
			if len(args) > 1 || node == "" || peer == "" || strings.Contains(peer, ":") {
				return f, fmt.Errorf("fault %s: %s: want NODE... or one NODE:PEER, as delay and loss take", kind, strconv.Quote(args[i]))
			}
			f.Nodes, f.Peers = []string{node}, []string{peer}
		}
	case ArgsNone:
		if len(args) > 0 {
			return f, fmt.Errorf("fault %s: takes no arguments, got %q", kind, args[0])
		}
	case ArgsGroups:
		if len(args) < 2 {
			return f, fmt.Errorf("fault %s: want two or more groups (like n1,n2 n3,n4 or site-a site-b), got %d", kind, len(args))
		}
		for _, g := range args {
			group, err := parseGroup(g)
			if err != nil {
				return f, fmt.Errorf("fault %s: %w", kind, err)
			}
			f.Groups = append(f.Groups, group)
		}
		f.OneWay = opts.OneWay
	case ArgsLinks:
		if len(args) == 0 {
			return f, fmt.Errorf("fault %s: name the node pairs (like n1:n2 n3:n4)", kind)
		}
		for _, a := range args {
			from, to, ok := strings.Cut(a, ":")
			if !ok || from == "" || to == "" || strings.Contains(to, ":") {
				return f, fmt.Errorf("fault %s: %s: want NODE:NODE", kind, strconv.Quote(a))
			}
			if from == to {
				return f, fmt.Errorf("fault %s: %s: a node cannot be cut from itself", kind, strconv.Quote(a))
			}
			f.Links = append(f.Links, [2]string{from, to})
		}
		f.OneWay = opts.OneWay
	case ArgsDelay, ArgsLoss:
		return parseImpairWords(f, args, opts)
	case ArgsClock:
		return parseClockWords(f, args)
	default:
		return f, fmt.Errorf("fault: unknown fault %q (want %s)", kind, KindList())
	}
	return f, nil
}

// parseGroup parses a partition group, NODE[,NODE...].
func parseGroup(g string) ([]string, error) {
	var group []string
	for n := range strings.SplitSeq(g, ",") {
		if n = strings.TrimSpace(n); n == "" {
			return nil, fmt.Errorf("group %q has an empty name", g)
		}
		group = append(group, n)
	}
	return group, nil
}

// parseImpairWords parses the arguments of a delay or loss,
// NODE[:PEER] VALUE, into f.
func parseImpairWords(f Fault, args []string, opts WordOptions) (Fault, error) {
	kind := f.Kind
	if len(args) != 2 {
		what := "DURATION"
		if kind.Args() == ArgsLoss {
			what = "PERCENT"
		}
		return f, fmt.Errorf("fault %s: want NODE[:PEER] %s, got %d arguments", kind, what, len(args))
	}
	node, peer, hasPeer := strings.Cut(args[0], ":")
	if node == "" || hasPeer && peer == "" {
		return f, fmt.Errorf("fault %s: %q: want NODE or NODE:PEER", kind, args[0])
	}
	f.Nodes = []string{node}
	if hasPeer {
		f.Peers = []string{peer}
	}
	f.Impair = &Impairment{}
	if kind.Args() == ArgsLoss {
		p, err := strconv.ParseFloat(strings.TrimSuffix(args[1], "%"), 64)
		if err != nil || p < 0 || p > 100 {
			return f, fmt.Errorf("fault %s: %q: want a percentage from 0 to 100 (like 10%%)", kind, args[1])
		}
		f.Impair.Loss = p
		return f, nil
	}
	d, err := parseDelayWord(kind, "delay", args[1])
	if err != nil {
		return f, err
	}
	f.Impair.Delay = d
	if opts.Jitter != "" {
		if f.Impair.Jitter, err = parseDelayWord(kind, "--jitter", opts.Jitter); err != nil {
			return f, err
		}
	}
	return f, nil
}

// parseClockWords parses the arguments of a clock fault, NODE... OFFSET
// [RATEppm], into f.
func parseClockWords(f Fault, args []string) (Fault, error) {
	var skew ClockSkew
	if n := len(args); n > 0 && strings.HasSuffix(args[n-1], "ppm") {
		r, err := ParseClockRate(args[n-1])
		if err != nil {
			return f, fmt.Errorf("fault clock: %w", err)
		}
		skew.RatePPM, args = r, args[:n-1]
	}
	if len(args) < 2 {
		return f, errors.New("fault clock: want NODE... OFFSET [RATEppm] (like n3 +90s 500ppm)")
	}
	d, err := ParseClockOffset(args[len(args)-1])
	if err != nil {
		return f, fmt.Errorf("fault clock: %w", err)
	}
	skew.Offset = d
	if err := skew.Validate(); err != nil {
		return f, fmt.Errorf("fault clock: %w", err)
	}
	f.Nodes, f.Clock = args[:len(args)-1], &skew
	return f, nil
}

// ParseClockOffset parses a clock fault's offset, a signed duration such
// as +90s or -2m.
func ParseClockOffset(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("offset %q: want a signed duration like +90s or -2m", s)
	}
	return d, nil
}

// ParseClockRate parses a clock fault's rate in parts per million, such as
// 500ppm or -20 (the "ppm" optional).
func ParseClockRate(s string) (float64, error) {
	r, err := strconv.ParseFloat(strings.TrimSuffix(s, "ppm"), 64)
	if err != nil || math.IsNaN(r) || math.IsInf(r, 0) {
		return 0, fmt.Errorf("rate %q: want parts per million like 500ppm or -20ppm", s)
	}
	return r, nil
}

// parseDelayWord parses a duration of at least 0; what names it.
func parseDelayWord(kind Kind, what, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("fault %s: %s %q: want a duration like 50ms", kind, what, s)
	}
	return d, nil
}

// printable is k as typed, or quoted when it holds what would not print
// on one line.
func printable(k Kind) string {
	if strings.ContainsFunc(string(k), func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(string(k))
	}
	return string(k)
}

// Severs reports whether a fault of kind k cuts links, so that it takes a
// CutMode: partition, isolate and cut.
func (k Kind) Severs() bool { return k == Partition || k == Isolate || k == Cut }

// kindsTaking names the kinds whose faults name a, for messages.
func kindsTaking(a Args) string {
	var names []string
	for _, k := range kinds {
		if k.args == a {
			names = append(names, string(k.kind))
		}
	}
	return strings.Join(names, " and ")
}
