package history

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// noise is n values around 450 ms: normal with a 15 ms deviation, as the
// p50s of same-build star5 leader-crash benches of 10 runs, or, skewed,
// 420 ms plus an exponential of mean 30 ms.
func noise(rng *rand.Rand, n int, skewed bool) []float64 {
	out := make([]float64, n)
	for i := range out {
		if skewed {
			out[i] = 420e6 + rng.ExpFloat64()*30e6
		} else {
			out[i] = 450e6 + rng.NormFloat64()*15e6
		}
	}
	return out
}

func indexes(cps []ChangePoint) []int {
	var out []int
	for _, c := range cps {
		out = append(out, c.Index)
	}
	return out
}

// A step of 100 ms over noise of 15 ms is found where it is, at every
// index a segment may start.
func TestEDivisiveStepAtItsIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	const n = 30
	for k := DefaultDetectOptions.MinSegment; k <= n-DefaultDetectOptions.MinSegment; k++ {
		v := noise(rng, n, false)
		for i := k; i < n; i++ {
			v[i] += 100e6
		}
		if got := indexes(EDivisive(v, DefaultDetectOptions)); !slices.Equal(got, []int{k}) {
			t.Errorf("step at %d: change points at %v", k, got)
		}
	}
}

func TestEDivisiveTwoSteps(t *testing.T) {
	v := noise(rand.New(rand.NewPCG(3, 3)), 40, false)
	for i := 12; i < 40; i++ {
		v[i] += 100e6
	}
	for i := 27; i < 40; i++ {
		v[i] -= 60e6
	}
	if got := indexes(EDivisive(v, DefaultDetectOptions)); !slices.Equal(got, []int{12, 27}) {
		t.Errorf("steps at 12 and 27: change points at %v", got)
	}
}

func TestEDivisiveConstant(t *testing.T) {
	v := make([]float64, 25)
	for i := range v {
		v[i] = 9
	}
	v[7] = 11 // one election that took two messages more
	if cps := EDivisive(v, DefaultDetectOptions); len(cps) != 0 {
		t.Errorf("a constant series with one outlier: change points %v", cps)
	}
}

// One history gives one answer, whenever it is checked.
func TestEDivisiveDeterministic(t *testing.T) {
	v := noise(rand.New(rand.NewPCG(5, 5)), 30, true)
	for i := 20; i < 30; i++ {
		v[i] += 20e6
	}
	first := EDivisive(v, DefaultDetectOptions)
	for range 5 {
		if again := EDivisive(v, DefaultDetectOptions); !slices.Equal(again, first) {
			t.Fatalf("change points %v, then %v", first, again)
		}
	}
}

// seriesOf is a history of one series whose entries have values v, one a
// minute, commits c01, c02, ...
func seriesOf(v []float64) []Entry {
	start := time.Date(2026, 11, 27, 20, 0, 0, 0, time.UTC)
	out := make([]Entry, len(v))
	for i, x := range v {
		out[i] = Entry{Time: start.Add(time.Duration(i) * time.Minute), Commit: fmt.Sprintf("c%02d", i+1),
			Topology: "star5", Scenario: "leader-crash", Algorithm: "bully", Runs: 1, OK: 1,
			TTLP50NS: int64(x), TTLMeanNS: int64(x), TTLNS: []int64{int64(x)}, MessagesMean: 9, Messages: []int{9}}
	}
	return out
}

func defaultCheck() CheckOptions {
	return CheckOptions{Metrics: []string{"ttl", "messages"}, MinEffect: DefaultMinEffect, Detect: DefaultDetectOptions, Last: 10}
}

// The gate on noise: of 1000 seeded series of 20 to 40 same-build
// entries, normal and skewed, fewer than 5% end in a regression. The
// minimum effect is 2%, under the noise's spread, so that the permutation
// test, not the effect, holds the alerts back.
func TestFalseAlertRate(t *testing.T) {
	opts := defaultCheck()
	opts.MinEffect = 0.02
	for _, skewed := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(28, 28))
		const series = 1000
		alerts, anyChange := 0, 0
		for range series {
			v := noise(rng, 20+rng.IntN(21), skewed)
			rep := Analyze(seriesOf(v), opts)
			if rep.Regressed() {
				alerts++
			}
			if len(rep.Series[0].Shifts) > 0 {
				anyChange++
			}
		}
		rate := float64(alerts) / series
		t.Logf("skewed %v: %d of %d noise series alert (%.1f%%); %d (%.1f%%) have a change point anywhere",
			skewed, alerts, series, 100*rate, anyChange, 100*float64(anyChange)/series)
		if rate >= 0.05 {
			t.Errorf("skewed %v: false alert rate %.1f%%, want under 5%%", skewed, 100*rate)
		}
	}
}

// A step at entry k, checked as CI would after every entry, fails the
// gate once, naming k, as soon as the risen segment is MinSegment long.
func TestGateFiresOnceAtTheStep(t *testing.T) {
	const k, n = 11, 24 // c12 is the first risen entry
	v := noise(rand.New(rand.NewPCG(11, 11)), n, false)
	for i := k; i < n; i++ {
		v[i] += 100e6
	}
	all := seriesOf(v)
	var fired []int
	for size := 2; size <= n; size++ {
		rep := Analyze(all[:size], defaultCheck())
		s := rep.Series[0]
		if !rep.Regressed() {
			continue
		}
		fired = append(fired, size)
		if s.Cause.Commit != "c12" || math.Abs(s.Cause.Relative) < 0.1 {
			t.Errorf("prefix of %d: regression at %s (%+.1f%%), want at c12", size, s.Cause.Commit, 100*s.Cause.Relative)
		}
	}
	if want := []int{k + DefaultDetectOptions.MinSegment}; !slices.Equal(fired, want) {
		t.Errorf("the gate failed at prefixes %v, want %v only", fired, want)
	}
	rep := Analyze(all, defaultCheck())
	if s := rep.Series[0]; s.Verdict != VerdictRegressed || s.Cause.Commit != "c12" {
		t.Errorf("the whole history: %s", s.VerdictLine(DefaultMinEffect))
	}
}

func TestGateImprovementAndSmall(t *testing.T) {
	v := noise(rand.New(rand.NewPCG(2, 2)), 20, false)
	for i := 17; i < 20; i++ {
		v[i] -= 100e6
	}
	if s := Analyze(seriesOf(v), defaultCheck()).Series[0]; s.Verdict != VerdictImproved {
		t.Errorf("a fall: %s", s.VerdictLine(DefaultMinEffect))
	}
	opts := defaultCheck()
	opts.MinEffect = 0.5
	for i := 17; i < 20; i++ {
		v[i] += 200e6
	}
	if s := Analyze(seriesOf(v), opts).Series[0]; s.Verdict != VerdictSmall {
		t.Errorf("a rise of about 20%% against a minimum of 50%%: %s", s.VerdictLine(opts.MinEffect))
	}
}

func BenchmarkEDivisive(b *testing.B) {
	for _, n := range []int{40, 200} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			v := noise(rand.New(rand.NewPCG(1, 1)), n, false)
			for i := n / 2; i < n; i++ {
				v[i] += 50e6
			}
			for b.Loop() {
				EDivisive(v, DefaultDetectOptions)
			}
		})
	}
}
