package results

import (
	"math"
	"slices"
)

// MannWhitney is the two-sided Mann-Whitney U test of whether samples a
// and b come from one distribution, as benchstat decides a change: U is
// a's statistic (how many of the pairs (x in a, y in b) have x > y, a tie
// counting half), P the probability of a U at least as far from its mean
// n_a*n_b/2 if they do. It makes no assumption about the shape of the
// distributions, which bench times (a floor, a long tail) do not meet for
// a t-test.
type MannWhitney struct {
	U, P float64
	// Exact says P was counted over every assignment of the ranks to the
	// two samples; otherwise it is the normal approximation with the
	// ties' correction and a continuity correction.
	Exact bool
}

// exactLimit bounds the assignments an exact test with ties enumerates,
// exactMaxN the sample sizes of the exact test without ties (its table
// has na*nb+1 counts per size), as benchstat's does.
const (
	exactLimit = 200_000
	exactMaxN  = 50
)

// MannWhitneyTest tests a against b; it needs a value on each side.
func MannWhitneyTest(a, b []float64) (MannWhitney, bool) {
	na, nb := len(a), len(b)
	if na == 0 || nb == 0 {
		return MannWhitney{}, false
	}
	ranks, ties := midRanks(a, b)
	var ra float64
	for _, r := range ranks[:na] {
		ra += r
	}
	u := ra - float64(na*(na+1))/2
	switch {
	case !ties && na <= exactMaxN && nb <= exactMaxN:
		return MannWhitney{U: u, P: exactNoTies(na, nb, u), Exact: true}, true
	case binomial(na+nb, na) <= exactLimit:
		return MannWhitney{U: u, P: exactWithTies(ranks, na, u), Exact: true}, true
	}
	return MannWhitney{U: u, P: normalP(ranks, na, nb, u)}, true
}

// MinP is the smallest two-sided P the test can give na and nb values
// without ties: 2 / C(na+nb, na). When it is above the significance
// level, no difference between such samples can ever be significant.
func MinP(na, nb int) float64 {
	if na == 0 || nb == 0 {
		return 1
	}
	return math.Min(1, 2/binomial(na+nb, na))
}

// midRanks ranks a's and b's values together, 1-based, ties sharing the
// mean of their ranks; a's ranks first. ties says some value repeats.
func midRanks(a, b []float64) ([]float64, bool) {
	n := len(a) + len(b)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	val := func(i int) float64 {
		if i < len(a) {
			return a[i]
		}
		return b[i-len(a)]
	}
	slices.SortFunc(idx, func(i, j int) int { return cmpFloat(val(i), val(j)) })
	ranks := make([]float64, n)
	ties := false
	for i := 0; i < n; {
		j := i + 1
		for j < n && val(idx[j]) == val(idx[i]) {
			j++
		}
		ties = ties || j-i > 1
		mid := float64(i+j+1) / 2 // ranks i+1..j
		for k := i; k < j; k++ {
			ranks[idx[k]] = mid
		}
		i = j
	}
	return ranks, ties
}

func cmpFloat(x, y float64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// exactNoTies counts, for every U, the assignments of ranks 1..na+nb
// giving it (f(i, j, u) = f(i-1, j, u-j) + f(i, j-1, u)), and returns
// the two-sided tail probability of u.
func exactNoTies(na, nb int, u float64) float64 {
	max := na * nb
	// prev[j][u] for i-1, cur[j][u] for i.
	prev := make([][]float64, nb+1)
	for j := range prev {
		prev[j] = make([]float64, max+1)
		prev[j][0] = 1 // no value of a: U is 0, one way
	}
	for i := 1; i <= na; i++ {
		cur := make([][]float64, nb+1)
		for j := range cur {
			cur[j] = make([]float64, max+1)
			if j == 0 {
				cur[0][0] = 1
				continue
			}
			for v := 0; v <= i*j; v++ {
				c := cur[j-1][v]
				if v >= j {
					c += prev[j][v-j]
				}
				cur[j][v] = c
			}
		}
		prev = cur
	}
	counts := prev[nb]
	var total, lo, hi float64
	for v, c := range counts {
		total += c
		if float64(v) <= u {
			lo += c
		}
		if float64(v) >= u {
			hi += c
		}
	}
	return math.Min(1, 2*math.Min(lo, hi)/total)
}

// exactWithTies enumerates every choice of na of the ranks for a and
// returns the two-sided probability of a U at least as far from the mean
// as u.
func exactWithTies(ranks []float64, na int, u float64) float64 {
	n := len(ranks)
	mean := float64(na*(n-na)) / 2
	far := math.Abs(u-mean) - 1e-9
	var total, extreme float64
	var walk func(start, left int, sum float64)
	walk = func(start, left int, sum float64) {
		if left == 0 {
			total++
			if math.Abs(sum-float64(na*(na+1))/2-mean) >= far {
				extreme++
			}
			return
		}
		for k := start; k <= n-left; k++ {
			walk(k+1, left-1, sum+ranks[k])
		}
	}
	walk(0, na, 0)
	return math.Min(1, extreme/total)
}

// normalP is the normal approximation of the two-sided P, its variance
// corrected for ties, with a continuity correction of one half.
func normalP(ranks []float64, na, nb int, u float64) float64 {
	n := float64(na + nb)
	mean := float64(na*nb) / 2
	sorted := slices.Clone(ranks)
	slices.Sort(sorted)
	var tieTerm float64
	for i := 0; i < len(sorted); {
		j := i + 1
		for j < len(sorted) && sorted[j] == sorted[i] {
			j++
		}
		t := float64(j - i)
		tieTerm += t*t*t - t
		i = j
	}
	variance := float64(na*nb) / 12 * ((n + 1) - tieTerm/(n*(n-1)))
	if variance <= 0 {
		return 1
	}
	z := math.Max(0, math.Abs(u-mean)-0.5) / math.Sqrt(variance)
	return math.Min(1, math.Erfc(z/math.Sqrt2))
}

func binomial(n, k int) float64 {
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return r
}
