// Package fault forwards to topologies/fault, where the fault vocabulary
// moved, for the callers that still import it here.
//
// Deprecated: import github.com/bullylab/bullylab/topologies/fault.
package fault

import vocab "github.com/bullylab/bullylab/topologies/fault"

type (
	Kind       = vocab.Kind
	Fault      = vocab.Fault
	Impairment = vocab.Impairment
)

const (
	Crash     = vocab.Crash
	Restart   = vocab.Restart
	Pause     = vocab.Pause
	Resume    = vocab.Resume
	Isolate   = vocab.Isolate
	Unisolate = vocab.Unisolate
	Partition = vocab.Partition
	Heal      = vocab.Heal
	Delay     = vocab.Delay
	Loss      = vocab.Loss
	Clear     = vocab.Clear
	Campaign  = vocab.Campaign
	Leave     = vocab.Leave
	Join      = vocab.Join
)

// Kinds is vocab.Kinds, the same slice.
var Kinds = vocab.Kinds

// KindList is vocab.KindList.
func KindList() string { return vocab.KindList() }
