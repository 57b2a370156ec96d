//go:build !linux

package main

import (
	"fmt"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/bench/report"
)

// analyzeCaptureReport needs the bench's election diagrams, which are
// built with its Linux testbed code.
func analyzeCaptureReport(path string, _ capture.AnalyzeOptions) (*report.CaptureReport, error) {
	return nil, fmt.Errorf("%s: a capture's report needs Linux for now; `bullylab analyze` reads it on any system", path)
}
