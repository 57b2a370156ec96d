// Package election is the seam between a node's runtime and its election
// algorithm: the Machine interface every algorithm implements, and what the
// runtime hands a Machine and gets back from it (Config, State, Output).
package election
