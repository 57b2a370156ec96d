package scenario

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/bullylab/bullylab/wire/bounded"
)

// SelectorKind says how a Selector picks nodes.
type SelectorKind uint8

// Selector kinds. "Pool" is the set of nodes a fault can apply to (see
// Resolve): keyword selectors pick from it, names need not.
const (
	SelName           SelectorKind = iota + 1 // Name: a node, else a topology group
	SelNode                                   // node:Name
	SelGroup                                  // group:Name
	SelLeader                                 // leader: the leader the live nodes follow
	SelHighest                                // highest: highest-ID node of the pool
	SelLowest                                 // lowest: lowest-ID node of the pool
	SelTop                                    // top:N: the N highest-ID nodes of the pool
	SelBottom                                 // bottom:N: the N lowest-ID nodes of the pool
	SelRandom                                 // random, random:N: N nodes of the pool at random
	SelAll                                    // all: the whole pool
	SelMinority                               // minority: the floor((n-1)/2) highest-ID live nodes
	SelMajority                               // majority: the floor(n/2)+1 highest-ID live nodes
	SelRandomMinority                         // minority:random: as many live nodes, at random
	SelRandomMajority                         // majority:random
	SelSide                                   // side:N: the nodes of group N (1-based) of the partition in force
	SelRest                                   // rest: every node no other partition group took
	SelRank                                   // rank:K: the K-th highest-ID node of the pool
)

// Selector picks nodes when a step runs, from the live view of the
// testbed. Its text form is what scenario files use.
type Selector struct {
	Kind SelectorKind
	N    int    // top, bottom, random, side, rank
	Name string // name, node, group
}

// Selectors is a list of selectors; a fault applies to their union.
type Selectors []Selector

var keywords = map[string]SelectorKind{
	"leader": SelLeader, "highest": SelHighest, "lowest": SelLowest,
	"all": SelAll, "rest": SelRest, "minority": SelMinority, "majority": SelMajority,
	"random": SelRandom,
}

// ParseSelector parses one selector:
//
//	leader  highest  lowest  all  rest  random
//	top:K  bottom:K  random:K  rank:K  side:N
//	minority  majority  minority:random  majority:random
//	NAME  node:NAME  group:NAME
//
// Keywords win over names; a node or group called "leader" is written
// node:leader or group:leader.
func ParseSelector(s string) (Selector, error) {
	if k, ok := keywords[s]; ok {
		sel := Selector{Kind: k}
		if k == SelRandom {
			sel.N = 1
		}
		return sel, nil
	}
	head, arg, hasArg := strings.Cut(s, ":")
	if !hasArg {
		switch s {
		case "top", "bottom", "rank", "side", "node", "group":
			return Selector{}, fmt.Errorf("%q needs an argument after a colon (a node called %s is written node:%s)", s, s, s)
		}
		if msg := checkNodeName(s); msg != "" {
			return Selector{}, fmt.Errorf("unknown selector %s (want leader, highest, lowest, top:K, bottom:K, rank:K, random[:K], all, minority, majority, side:N, rest, or a node or group name)", bounded.Quote(s))
		}
		return Selector{Kind: SelName, Name: s}, nil
	}
	switch head {
	case "node", "group":
		if msg := checkNodeName(arg); msg != "" {
			return Selector{}, fmt.Errorf("%s: %s", head, msg)
		}
		if head == "node" {
			return Selector{Kind: SelNode, Name: arg}, nil
		}
		return Selector{Kind: SelGroup, Name: arg}, nil
	case "minority", "majority":
		if arg != "random" {
			return Selector{}, fmt.Errorf("%s: want %s or %s:random", bounded.Quote(s), head, head)
		}
		if head == "minority" {
			return Selector{Kind: SelRandomMinority}, nil
		}
		return Selector{Kind: SelRandomMajority}, nil
	case "top", "bottom", "random", "side", "rank":
		n, err := strconv.Atoi(arg)
		if err != nil || n < 1 || n > MaxCount {
			return Selector{}, fmt.Errorf("%s: want %s:N with N in 1..%d", bounded.Quote(s), head, MaxCount)
		}
		kind := map[string]SelectorKind{"top": SelTop, "bottom": SelBottom, "random": SelRandom, "side": SelSide, "rank": SelRank}[head]
		return Selector{Kind: kind, N: n}, nil
	}
	return Selector{}, fmt.Errorf("unknown selector %s", bounded.Quote(s))
}

// String returns the selector as ParseSelector reads it.
func (s Selector) String() string {
	switch s.Kind {
	case SelName:
		return s.Name
	case SelNode:
		return "node:" + s.Name
	case SelGroup:
		return "group:" + s.Name
	case SelLeader:
		return "leader"
	case SelHighest:
		return "highest"
	case SelLowest:
		return "lowest"
	case SelTop:
		return "top:" + strconv.Itoa(s.N)
	case SelBottom:
		return "bottom:" + strconv.Itoa(s.N)
	case SelRandom:
		if s.N == 1 {
			return "random"
		}
		return "random:" + strconv.Itoa(s.N)
	case SelAll:
		return "all"
	case SelMinority:
		return "minority"
	case SelMajority:
		return "majority"
	case SelRandomMinority:
		return "minority:random"
	case SelRandomMajority:
		return "majority:random"
	case SelSide:
		return "side:" + strconv.Itoa(s.N)
	case SelRest:
		return "rest"
	case SelRank:
		return "rank:" + strconv.Itoa(s.N)
	}
	return fmt.Sprintf("selector(%d)", s.Kind)
}

func (ss Selectors) String() string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = s.String()
	}
	return strings.Join(parts, ",")
}

// check validates a selector built in code.
func (s Selector) check() error {
	switch s.Kind {
	case SelName, SelNode, SelGroup:
		if msg := checkNodeName(s.Name); msg != "" {
			return errors.New(msg)
		}
	case SelTop, SelBottom, SelRandom, SelSide, SelRank:
		if s.N < 1 || s.N > MaxCount {
			return fmt.Errorf("%s needs a count in 1..%d", s, MaxCount)
		}
	case SelLeader, SelHighest, SelLowest, SelAll, SelMinority, SelMajority,
		SelRandomMinority, SelRandomMajority, SelRest:
	default:
		return fmt.Errorf("unknown selector kind %d", s.Kind)
	}
	return nil
}

// checkNodeName mirrors the topology rule for node and group names, so a
// typo is caught when the file is read rather than when the step runs.
func checkNodeName(name string) string {
	ok := len(name) >= 1 && len(name) <= 16 && name[0] != '-'
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
	}
	if !ok {
		return fmt.Sprintf("invalid node or group name %s (want [a-z0-9-]{1,16}, not starting with '-')", bounded.Quote(name))
	}
	return ""
}
