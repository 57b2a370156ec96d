package report

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// DiagramScale is how a space-time diagram maps time to height.
type DiagramScale string

// The diagram's scales. ScaleTrue draws every instant at its time on one
// linear scale, so that an arrow's slant is its delay; ScaleCompressed
// draws gaps longer than a few milliseconds shorter, on a log scale
// marked by grey bands, so that an election after a 500 ms timeout stays
// on the page; ScaleAuto, the default, draws true scale when the
// diagram's span is short enough to stay legible (autoTrueSpan) and
// compressed otherwise.
const (
	ScaleAuto       DiagramScale = "auto"
	ScaleTrue       DiagramScale = "true"
	ScaleCompressed DiagramScale = "compressed"
)

// DiagramScales lists the scales as ParseDiagramScale reads them.
var DiagramScales = []DiagramScale{ScaleAuto, ScaleTrue, ScaleCompressed}

// ParseDiagramScale reads --diagram-scale; "" is ScaleAuto.
func ParseDiagramScale(s string) (DiagramScale, error) {
	if s == "" {
		return ScaleAuto, nil
	}
	for _, sc := range DiagramScales {
		if DiagramScale(s) == sc {
			return sc, nil
		}
	}
	names := make([]string, len(DiagramScales))
	for i, sc := range DiagramScales {
		names[i] = string(sc)
	}
	return "", fmt.Errorf("%q is not a diagram scale (%s)", s, strings.Join(names, ", "))
}

// True scale's pixels per millisecond: seqPxPerMs, what the compressed
// scale draws short gaps at, unless the diagram would then be taller than
// seqTrueMaxHeight; then fewer, down to seqTrueMinPxPerMs (a 100 ms delay
// still slants 100 px), and a longer span grows taller.
//
// Auto draws true scale when the diagram stays legible in it: its span
// fits seqTrueMaxHeight at seqTrueMinPxPerMs (2.4 s), and its typical
// arrow, the median delay of those whose send and receipt are known,
// still slants seqMinSlant pixels at the scale the span allows. A
// latency sweep's runs (10 ms and more a hop) and a partition healed
// within a second draw true; an election a millisecond long after a
// 500 ms failure timeout on an unimpaired network, whose 0.1 ms arrows
// would be level at 4 px per ms, draws compressed.
const (
	seqTrueMaxHeight  = 2400.0
	seqTrueMinPxPerMs = 1.0
	seqMinSlant       = 6.0
)

// resolve is the scale a diagram of span whose median arrow delay is
// typical (0: none known) draws with: sc, or for auto the legible one.
func (sc DiagramScale) resolve(span, typical time.Duration) DiagramScale {
	switch sc {
	case ScaleTrue, ScaleCompressed:
		return sc
	}
	px := truePxPerMs(span)
	if float64(span)/1e6*seqTrueMinPxPerMs > seqTrueMaxHeight || typical > 0 && float64(typical)/1e6*px < seqMinSlant {
		return ScaleCompressed
	}
	return ScaleTrue
}

// truePxPerMs is true scale's pixels per millisecond for span.
func truePxPerMs(span time.Duration) float64 {
	ms := float64(span) / 1e6
	if ms <= 0 {
		return seqPxPerMs
	}
	return max(min(seqPxPerMs, seqTrueMaxHeight/ms), seqTrueMinPxPerMs)
}

// typicalDelay is the median delay of msgs from send to receipt, of
// those whose both are known; 0 when none.
func typicalDelay(msgs []SequenceMessage) time.Duration {
	var ds []time.Duration
	for _, m := range msgs {
		if !m.SendUnknown && !m.Dropped && !m.RecvTime.IsZero() && m.RecvTime.After(m.Time) {
			ds = append(ds, m.RecvTime.Sub(m.Time))
		}
	}
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[(len(ds)-1)/2]
}

// scaleText says in the diagram's header which scale it is drawn with.
func (d *seqDiagram) scaleText() string {
	auto := ""
	if d.askedScale == ScaleAuto || d.askedScale == "" {
		auto = " (auto)"
	}
	if d.scale == ScaleTrue {
		return fmt.Sprintf("Time scale: true%s, %s px per ms: an arrow's slant is its delay.", auto, trimFloat(d.pxPerMs))
	}
	return fmt.Sprintf("Time scale: compressed%s: gaps over %s ms drawn shorter on a log scale (grey bands).", auto, trimFloat(seqLinear/seqPxPerMs))
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
