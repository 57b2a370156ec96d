package capture

// frameChunkBits sizes frameStore's chunks: 4096 frames, 288 KB.
const frameChunkBits = 12

// frameStore holds a capture's frame observations in fixed-size chunks,
// so that a million frames grow it without ever copying the ones held
// (one growing slice spent a fifth of the analysis copying them) and the
// pointers it hands out stay valid.
type frameStore struct {
	chunks [][]frameObs
	n      int32
}

func (s *frameStore) len() int32 { return s.n }

// add appends fo and returns its index.
func (s *frameStore) add(fo frameObs) int32 {
	i := s.n
	c := int(i >> frameChunkBits)
	if c == len(s.chunks) {
		s.chunks = append(s.chunks, make([]frameObs, 0, 1<<frameChunkBits))
	}
	s.chunks[c] = append(s.chunks[c], fo)
	s.n++
	return i
}

// at returns frame i, which must be below len.
func (s *frameStore) at(i int32) *frameObs {
	return &s.chunks[i>>frameChunkBits][i&(1<<frameChunkBits-1)]
}
