// Package election is the seam between a node's runtime and its election
// algorithm: the Machine interface every algorithm implements, what the
// runtime hands a Machine and gets back from it (Config, State, Output), and
// what the algorithms share (Core for the state and accessors every Machine
// keeps alike, Roster for membership and the epoch window, Outbox,
// StaggerDelay for the failure detector).
package election
