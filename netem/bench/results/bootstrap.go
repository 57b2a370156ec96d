package results

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
)

// BootstrapResamples is how many resamples of each side compare draws
// for a row's interval.
const BootstrapResamples = 2000

// BootstrapMinRuns is the fewest values a side needs for an interval:
// with fewer, resamples repeat the few values so often that the interval
// claims a precision the runs do not have.
const BootstrapMinRuns = 5

// Interval is the bootstrap confidence interval of a row's difference,
// new minus base, in the row's unit.
type Interval struct {
	Low, High float64
	// Confidence is the interval's level: 1 - alpha.
	Confidence float64
}

// Excludes0 reports whether the interval lies wholly above or below zero.
func (iv Interval) Excludes0() bool { return iv.Low > 0 || iv.High < 0 }

// rowStat is the statistic a row shows: the nearest-rank percentile P
// (100 for the max), or with P 0 the mean.
type rowStat struct{ P float64 }

var meanStat = rowStat{}

func percentileStat(p float64) rowStat { return rowStat{P: p} }

// resampled is st of a resample of sorted, the values drawn counts[i]
// times each: found by walking the counts, with no resample to sort.
func (st rowStat) resampled(sorted []float64, counts []int) float64 {
	n := len(sorted)
	if st.P == 0 {
		var sum float64
		for i, c := range counts {
			sum += float64(c) * sorted[i]
		}
		return sum / float64(n)
	}
	r, seen := rank(n, st.P), 0
	for i, c := range counts {
		if seen += c; seen >= r {
			return sorted[i]
		}
	}
	return sorted[n-1]
}

// BootstrapInterval is the percentile-method interval, at confidence
// 1-alpha, of st(new) - st(base): each side resampled with replacement
// BootstrapResamples times, independently, by a generator seeded from
// seed, so that one comparison always gives one interval. ok is false
// when a side has fewer than BootstrapMinRuns values.
func BootstrapInterval(base, nw []float64, st rowStat, alpha float64, seed string) (Interval, bool) {
	if len(base) < BootstrapMinRuns || len(nw) < BootstrapMinRuns {
		return Interval{}, false
	}
	h := fnv.New64a()
	h.Write([]byte(seed))
	rng := rand.New(rand.NewPCG(h.Sum64(), 0x62756c6c796c6162))
	base, nw = slices.Sorted(slices.Values(base)), slices.Sorted(slices.Values(nw))
	bc, nc := make([]int, len(base)), make([]int, len(nw))
	resample := func(sorted []float64, counts []int) float64 {
		clear(counts)
		for range sorted {
			counts[rng.IntN(len(sorted))]++
		}
		return st.resampled(sorted, counts)
	}
	diffs := make([]float64, BootstrapResamples)
	for i := range diffs {
		diffs[i] = resample(nw, nc) - resample(base, bc)
	}
	slices.Sort(diffs)
	at := func(q float64) float64 {
		k := int(math.Round(q * float64(len(diffs)-1)))
		return diffs[min(max(k, 0), len(diffs)-1)]
	}
	return Interval{Low: at(alpha / 2), High: at(1 - alpha/2), Confidence: 1 - alpha}, true
}
