package capture

// Internals for the external tests (package capture_test), which are
// external so that they may import packages that import capture.

// SynthNodes is synthNodes: n nodes whose IDs increase with their index.
var SynthNodes = synthNodes
