// Package report renders what a bench measured as report.html, one
// self-contained page of tables, notes, charts and space-time diagrams of
// elections, and writes a bench's outputs (WriteOutputs: results.json,
// bench.txt and report.html); WriteBenchesReport makes one page of several
// benches, of star5, star16 and star64 say, and WriteCaptures one of
// captures, a bench's or any other. It builds on any system, as package
// results does.
//
// # Map
//
//	outputs.go      WriteOutputs
//	report.go       Write: report.html from report.html.tmpl
//	benches.go      WriteBenches: one page of several benches from
//	                benches.html.tmpl, which shares report.html.tmpl's
//	                style, definitions and messages cells
//	capture.go      WriteCaptures: one page of captures from
//	                capture.html.tmpl (report.html.tmpl's style), their
//	                checks, elections, faults and diagrams
//	explain.go      the report's notes, computed from the data
//	faults.go       the runs table's fault checks
//	svg.go          the report's SVG: DistributionSVG from
//	                distribution.svg.tmpl, shared helpers
//	sweep.go        a sweep's scenarios drawn against its parameter, from
//	                sweep.svg.tmpl
//	seqdiagram.go   SequenceSVG: an election as a space-time diagram,
//	                its time scale and arrows; seqfaults.go its fault
//	                marks and spans, seqlabels.go its texts placed so that
//	                none covers another, seqlegend.go its legend,
//	                seqscale.go its time scale (DiagramScale: true,
//	                compressed or auto), seqleader.go where the leader
//	                settled and later changed
//	leaderlanes.go  LeaderLanesSVG: each node's leader over a run, drawn
//	                under its diagram (LeaderLanes)
//	diagramruns.go  DiagramRuns: the runs whose election is drawn, and
//	                Sequences, those elections titled for the report
package report
