package results

import (
	"math"
	"math/rand/v2"
	"testing"
)

// bruteMannWhitney counts U over every assignment of the pooled values to
// two samples of a's and b's sizes: the definition, without ranks.
func bruteMannWhitney(a, b []float64) (u, p float64) {
	pool := append(append([]float64(nil), a...), b...)
	n, na := len(pool), len(a)
	uOf := func(in []bool) float64 {
		var u float64
		for i := range pool {
			for j := range pool {
				if in[i] && !in[j] {
					switch {
					case pool[i] > pool[j]:
						u++
					case pool[i] == pool[j]:
						u += 0.5
					}
				}
			}
		}
		return u
	}
	in := make([]bool, n)
	for i := range na {
		in[i] = true
	}
	u = uOf(in)
	mean := float64(na*(n-na)) / 2
	var total, extreme float64
	var walk func(k, left int)
	walk = func(k, left int) {
		if left == 0 {
			total++
			if math.Abs(uOf(in)-mean) >= math.Abs(u-mean)-1e-9 {
				extreme++
			}
			return
		}
		for i := k; i <= n-left; i++ {
			in[i] = true
			walk(i+1, left-1)
			in[i] = false
		}
	}
	clear(in)
	walk(0, na)
	return u, extreme / total
}

func TestMannWhitneyKnown(t *testing.T) {
	for _, c := range []struct {
		a, b []float64
		u, p float64
	}{
		// Completely separated samples: the smallest P their sizes allow.
		{[]float64{1, 2, 3}, []float64{4, 5, 6}, 0, 0.1},
		{[]float64{1, 2, 3, 4, 5}, []float64{6, 7, 8, 9, 10}, 0, 2.0 / 252},
		{[]float64{6, 7, 8, 9, 10}, []float64{1, 2, 3, 4, 5}, 25, 2.0 / 252},
		// Interleaved: no evidence at all.
		{[]float64{1, 4}, []float64{2, 3}, 2, 1},
	} {
		got, ok := MannWhitneyTest(c.a, c.b)
		if !ok || got.U != c.u || math.Abs(got.P-c.p) > 1e-12 || !got.Exact {
			t.Errorf("%v vs %v: %+v, want U %g P %g exact", c.a, c.b, got, c.u, c.p)
		}
	}
	if _, ok := MannWhitneyTest(nil, []float64{1}); ok {
		t.Error("a test with an empty side")
	}
	if p := MinP(3, 3); p != 0.1 {
		t.Errorf("MinP(3, 3) = %g, want 0.1: three runs a side can never reach 0.05", p)
	}
	if p := MinP(5, 5); p > 0.05 {
		t.Errorf("MinP(5, 5) = %g", p)
	}
}

// TestMannWhitneyAgainstDefinition: on random samples, with and without
// ties, U and the exact P equal the brute force's.
func TestMannWhitneyAgainstDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		na, nb := 1+rng.IntN(6), 1+rng.IntN(6)
		levels := 3 + rng.IntN(40) // few levels: ties
		draw := func(n int, shift int) []float64 {
			out := make([]float64, n)
			for k := range out {
				out[k] = float64(rng.IntN(levels) + shift)
			}
			return out
		}
		a, b := draw(na, rng.IntN(3)), draw(nb, 0)
		got, _ := MannWhitneyTest(a, b)
		u, p := bruteMannWhitney(a, b)
		if got.U != u || math.Abs(got.P-p) > 1e-9 {
			t.Fatalf("case %d: %v vs %v: U %g P %g, brute force U %g P %g", i, a, b, got.U, got.P, u, p)
		}
	}
}

// TestMannWhitneyNormal: past the exact test's limit the normal
// approximation tells a shift from none.
func TestMannWhitneyNormal(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	same := func(shift float64) float64 {
		a, b := make([]float64, 30), make([]float64, 30)
		for i := range a {
			a[i] = math.Round(rng.NormFloat64()*4) + shift // rounded: ties
			b[i] = math.Round(rng.NormFloat64() * 4)
		}
		r, _ := MannWhitneyTest(a, b)
		if r.Exact {
			t.Fatal("30 against 30 with ties was counted exactly")
		}
		return r.P
	}
	if p := same(0); p < 0.01 {
		t.Errorf("no shift: P %g", p)
	}
	if p := same(6); p > 0.001 {
		t.Errorf("a shift of 1.5 standard deviations over 30 runs: P %g", p)
	}
}
