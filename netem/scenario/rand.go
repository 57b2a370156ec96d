package scenario

import "math/rand/v2"

// Streams of one seed. Each use of a seed draws from a stream of its own,
// so that adding a draw to one (a step more) never shifts another.
const (
	streamSchedule = iota + 1
	streamChaos
)

// NewRand returns the generator Execute and Resolve take for seed. Seeds
// are hashed first: PCG seeded with 1 and with 2 starts out alike.
func NewRand(seed int64) *rand.Rand {
	return newStream(seed, streamSchedule)
}

func newStream(seed int64, stream uint64) *rand.Rand {
	s := uint64(seed)
	return rand.New(rand.NewPCG(splitmix64(s), splitmix64(s^stream<<56^0x6a09e667f3bcc909)))
}

// splitmix64 is the SplitMix64 finaliser (Steele, Lea and Flood): a
// bijection that spreads neighbouring seeds over the whole 64-bit space.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// RunSeed is the seed of run i (from 0) of a bench started with seed base:
// base+i, so that `--seed S+i --runs 1` replays run i alone.
func RunSeed(base int64, i int) int64 { return base + int64(i) }
