package results

import (
	"cmp"
	"math"
	"slices"
	"strings"
)

// Percentile returns the p-th percentile (0 < p <= 100) of values by the
// nearest-rank method: the value of rank ceil(p/100 × n) in ascending
// order, that is the smallest value that at least p% of the values do not
// exceed. It is always a value some run measured, never an interpolation
// between two runs, which is what a regression gate over 30 runs should
// compare; the price is coarseness: with 30 runs p99 is the maximum and
// p95 the second largest. It returns the zero value for no values.
func Percentile[T cmp.Ordered](values []T, p float64) T {
	var zero T
	if len(values) == 0 || !(p > 0 && p <= 100) {
		return zero
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	return sorted[rank(len(sorted), p)-1]
}

// rank is the 1-based nearest rank of percentile p among n values.
// p*n is exact for integer p and any realistic n, so dividing by 100
// last keeps ceil from rounding 19.000000000000004 up to 20.
func rank(n int, p float64) int {
	r := int(math.Ceil(p * float64(n) / 100))
	return min(max(r, 1), n)
}

// Mean returns the arithmetic mean of values, 0 for none.
func Mean[T int | int64 | float64](values []T) float64 {
	if len(values) == 0 {
		return 0
	}
	var sum float64
	for _, v := range values {
		sum += float64(v)
	}
	return sum / float64(len(values))
}

// Distribution summarises durations in nanoseconds.
func Distribution(ns []int64) Dist {
	if len(ns) == 0 {
		return Dist{}
	}
	sorted := slices.Clone(ns)
	slices.Sort(sorted)
	at := func(p float64) int64 { return sorted[rank(len(sorted), p)-1] }
	return Dist{
		N:      len(sorted),
		MinNS:  sorted[0],
		MeanNS: int64(math.Round(Mean(sorted))),
		P50NS:  at(50),
		P95NS:  at(95),
		P99NS:  at(99),
		MaxNS:  sorted[len(sorted)-1],
	}
}

// pctMinRuns is, per percentile, the fewest values that support it:
// n >= 100/(100-p), below which its nearest rank is the largest value and
// it would only repeat max under another name (doc.go, Percentiles).
var pctMinRuns = map[string]int{"p50": 1, "p95": 20, "p99": 100}

// PercentileShown reports whether n values support percentile name (p50,
// p95, p99 or max): the one rule by which the summary table, report.html's
// texts and figures and compare leave a percentile out.
func PercentileShown(name string, n int) bool {
	min, ok := pctMinRuns[name]
	return n > 0 && (!ok || n >= min)
}

// PercentilesOf are those of pcts that n values support, in order.
func PercentilesOf(pcts []TimePercentile, n int) []TimePercentile {
	var out []TimePercentile
	for _, p := range pcts {
		if PercentileShown(p.Name, n) {
			out = append(out, p)
		}
	}
	return out
}

// PercentileNames are the names of pcts.
func PercentileNames(pcts []TimePercentile) []string {
	names := make([]string, len(pcts))
	for i, p := range pcts {
		names[i] = p.Name
	}
	return names
}

// PercentilesText is d's percentiles among pcts that its values support,
// "p50 496ms, max 512ms", each once.
func PercentilesText(d Dist, pcts []TimePercentile) string {
	var parts []string
	for _, p := range PercentilesOf(pcts, d.N) {
		parts = append(parts, p.Name+" "+FormatNS(p.Of(&d)))
	}
	return strings.Join(parts, ", ")
}
