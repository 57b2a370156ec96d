package bench

// WriteOutputs is writeOutputs, for the tests of package bench_test.
var WriteOutputs = writeOutputs
