//go:build linux

package netem

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// lateBuckets covers lateness up to 2^33 µs (about 2.4 h) with four
// buckets per power of two, so a percentile read from it is within 25% of
// the true value; later releases land in the last bucket.
const lateBuckets = 128

// lateness is a histogram of how late the delayer issued verdicts: verdict
// time minus release time. The capture's fault check allows a delay 2 ms
// (or 10%) of error, so a release that late shows up as a failed check;
// this says whether the delayer or the network caused it. One goroutine
// records, any reads; recording allocates nothing. An nfqBackend keeps one
// across the delayers it starts and stops, so a run's stats cover them all.
type lateness struct {
	buckets      [lateBuckets]atomic.Uint64
	over1, over2 atomic.Uint64
	maxNS        atomic.Int64
}

// lateBucket is the bucket of a lateness of us microseconds: 0-3 exactly,
// then four per power of two.
func lateBucket(us uint64) int {
	if us < 4 {
		return int(us)
	}
	e := bits.Len64(us) - 1
	return min(4*(e-1)+int(us>>(e-2)&3), lateBuckets-1)
}

// lateBucketEnd is the lowest lateness, in microseconds, of the bucket
// after bucket i.
func lateBucketEnd(i int) uint64 {
	i++
	if i < 4 {
		return uint64(i)
	}
	e := i/4 + 1
	return uint64(4+i%4) << (e - 2)
}

// record notes one release late by d; a release before its time (packets
// let go as the delayer closes) is not lateness and is not counted.
func (l *lateness) record(d time.Duration) {
	if d < 0 {
		return
	}
	l.buckets[lateBucket(uint64(d/time.Microsecond))].Add(1)
	if d > time.Millisecond {
		l.over1.Add(1)
		if d > 2*time.Millisecond {
			l.over2.Add(1)
		}
	}
	for cur := l.maxNS.Load(); int64(d) > cur && !l.maxNS.CompareAndSwap(cur, int64(d)); cur = l.maxNS.Load() {
	}
}

// fill sets s's lateness fields. Percentiles are their bucket's upper end
// (at most the maximum), so they never understate.
func (l *lateness) fill(s *DelayerStats) {
	var counts [lateBuckets]uint64
	var n uint64
	for i := range counts {
		counts[i] = l.buckets[i].Load()
		n += counts[i]
	}
	mx := time.Duration(l.maxNS.Load())
	s.LateCount, s.LateMax = n, mx
	s.LateOver1ms, s.LateOver2ms = l.over1.Load(), l.over2.Load()
	s.LateP50 = latePercentile(&counts, n, 50, mx)
	s.LateP99 = latePercentile(&counts, n, 99, mx)
}

// latePercentile is the nearest-rank p-th percentile of the n releases in
// counts, at most mx.
func latePercentile(counts *[lateBuckets]uint64, n, p uint64, mx time.Duration) time.Duration {
	if n == 0 {
		return 0
	}
	rank := (n*p + 99) / 100
	var seen uint64
	for i, c := range counts {
		if seen += c; seen >= rank {
			return min(time.Duration(lateBucketEnd(i))*time.Microsecond, mx)
		}
	}
	return mx
}
