package history

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// DetectOptions tune EDivisive.
type DetectOptions struct {
	// Significance is the largest permutation p-value of a change point,
	// such as 0.05.
	Significance float64
	// Permutations is how many permutations test each candidate; the
	// smallest p-value possible is 1/(Permutations+1).
	Permutations int
	// MinSegment is the fewest values between two change points, and
	// before the first and after the last.
	MinSegment int
	// Seed seeds the permutations, so that one series gives one answer.
	Seed uint64
}

// DefaultDetectOptions are check's defaults: 199 permutations, p <= 0.05,
// segments of 3 or more entries.
var DefaultDetectOptions = DetectOptions{Significance: 0.05, Permutations: 199, MinSegment: 3, Seed: 1}

// Validate checks that a change point is possible with o.
func (o *DetectOptions) Validate() error {
	switch {
	case !(o.Significance > 0 && o.Significance < 1):
		return fmt.Errorf("significance %g: want a level in (0, 1), such as 0.05", o.Significance)
	case o.MinSegment < 2:
		return fmt.Errorf("minimum segment %d: want 2 or more entries", o.MinSegment)
	case float64(o.Permutations) < 1/o.Significance-1:
		return fmt.Errorf("%d permutations cannot reach p <= %g: want %d or more", o.Permutations, o.Significance, int(math.Ceil(1/o.Significance-1)))
	case o.Permutations > 100000:
		return errors.New("permutations: want 100000 or fewer")
	}
	return nil
}

// ChangePoint is where a series' distribution changed: Index is the first
// value of the new segment.
type ChangePoint struct {
	Index int
	// Q is the divergence statistic of the split that found it, PValue its
	// permutation test's.
	Q      float64
	PValue float64
}

// EDivisive finds the change points of values by E-Divisive with means
// (Matteson and James 2014) and the exponent alpha = 1: the split that
// maximises the divergence statistic q over every segment found so far is
// a change point when a permutation test within those segments finds it
// significant; splitting stops at the first that is not. Change points
// come back by index.
func EDivisive(values []float64, opts DetectOptions) []ChangePoint {
	rng := rand.New(rand.NewPCG(opts.Seed, uint64(len(values))))
	bounds := []int{0, len(values)} // segment i is values[bounds[i]:bounds[i+1]]
	var cps []ChangePoint
	perm := make([]float64, len(values))
	for {
		q, at := bestSplit(values, bounds, opts.MinSegment)
		if at < 0 {
			break
		}
		// The p-value is at most Significance when at most this many
		// permutations reach q; one more and testing further is moot.
		allowed := int(math.Floor(opts.Significance*float64(opts.Permutations+1)+1e-9)) - 1
		reached := 0
		for range opts.Permutations {
			copy(perm, values)
			for i := 0; i+1 < len(bounds); i++ {
				seg := perm[bounds[i]:bounds[i+1]]
				rng.Shuffle(len(seg), func(a, b int) { seg[a], seg[b] = seg[b], seg[a] })
			}
			if pq, _ := bestSplit(perm, bounds, opts.MinSegment); pq >= q {
				reached++
				if reached > allowed {
					break
				}
			}
		}
		if reached > allowed {
			break
		}
		cps = append(cps, ChangePoint{Index: at, Q: q, PValue: float64(reached+1) / float64(opts.Permutations+1)})
		bounds = append(bounds, at)
		slices.Sort(bounds)
	}
	slices.SortFunc(cps, func(a, b ChangePoint) int { return a.Index - b.Index })
	return cps
}

// bestSplit is the largest q over the segments bounds delimit and where
// it splits values, -1 when no segment holds two of minSegment.
func bestSplit(values []float64, bounds []int, minSegment int) (float64, int) {
	best, at := math.Inf(-1), -1
	for i := 0; i+1 < len(bounds); i++ {
		if q, tau := splitSegment(values[bounds[i]:bounds[i+1]], minSegment); tau >= 0 && q > best {
			best, at = q, bounds[i]+tau
		}
	}
	return best, at
}

// splitSegment maximises Matteson and James' q(X, Y) over X = z[:tau] and
// Y = z[tau:kappa], kappa up to len(z), each at least minSegment values
// long, in O(len(z)²) time and O(len(z)) space:
//
//	q = nm/(n+m) (2/(nm) Σ|x-y| - 1/C(n,2) Σ|x-x'| - 1/C(m,2) Σ|y-y'|)
//
// Letting kappa end before the segment finds a change followed by another
// one not yet split off.
func splitSegment(z []float64, minSegment int) (float64, int) {
	L := len(z)
	if L < 2*minSegment {
		return 0, -1
	}
	// within(a, b) is the sum of |z_i - z_k| over a <= i < k < b.
	// head[b] = within(0, b).
	head := make([]float64, L+1)
	for b := 2; b <= L; b++ {
		s := 0.0
		for i := range b - 1 {
			s += math.Abs(z[i] - z[b-1])
		}
		head[b] = head[b-1] + s
	}
	// Going down from the end, col[k] = Σ_{tau <= i < k} |z_i - z_k|, so
	// that within(tau, kappa) = Σ_{tau < k < kappa} col[k].
	col := make([]float64, L)
	best, at := math.Inf(-1), -1
	for tau := L - 1; tau >= minSegment; tau-- {
		for k := tau + 1; k < L; k++ {
			col[k] += math.Abs(z[tau] - z[k])
		}
		if tau > L-minSegment {
			continue
		}
		n := float64(tau)
		withinX := head[tau]
		withinY := 0.0
		for kappa := tau + 1; kappa <= L; kappa++ {
			if kappa-1 > tau {
				withinY += col[kappa-1]
			}
			if kappa-tau < minSegment {
				continue
			}
			m := float64(kappa - tau)
			cross := head[kappa] - withinX - withinY
			e := 2*cross/(n*m) - withinX/(n*(n-1)/2) - withinY/(m*(m-1)/2)
			if q := n * m / (n + m) * e; q > best {
				best, at = q, tau
			}
		}
	}
	return best, at
}
