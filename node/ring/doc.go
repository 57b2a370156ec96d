// Package ring is the classical ring leader election, with the
// multiple-initiator rule and failure handling, as a deterministic
// election.Machine (Elector, NewElector).
package ring
