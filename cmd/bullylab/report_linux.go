package main

import (
	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/bench"
	"github.com/bullylab/bullylab/netem/bench/report"
)

func analyzeCaptureReport(path string, opts capture.AnalyzeOptions) (*report.CaptureReport, error) {
	return bench.AnalyzeCaptureReport(path, opts)
}
