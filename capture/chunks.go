package capture

// chunkBits sizes a chunkList's chunks: 4096 items.
const chunkBits = 12

// chunkList is a list in chunks of 1<<chunkBits items, so that a million
// items grow it without ever copying those held (one growing slice of
// frame observations spent a fifth of the analysis copying them) and the
// pointers it hands out stay valid. The first chunk doubles from 8 items
// up to its size (append's own growth, 1.25x for long slices, allocated
// four times what it kept), so that the many short lists of a capture (one
// per pair of nodes) stay small.
type chunkList[T any] struct {
	chunks [][]T
	n      int32
}

func (l *chunkList[T]) len() int32 {
	if l == nil {
		return 0
	}
	return l.n
}

// add appends v and returns its index.
func (l *chunkList[T]) add(v T) int32 {
	i := l.n
	c := int(i >> chunkBits)
	if c == len(l.chunks) {
		n := 1 << chunkBits
		if c == 0 {
			n = 8
		}
		l.chunks = append(l.chunks, make([]T, 0, n))
	} else if k := l.chunks[c]; len(k) == cap(k) {
		grown := make([]T, len(k), 2*len(k))
		copy(grown, k)
		l.chunks[c] = grown
	}
	l.chunks[c] = append(l.chunks[c], v)
	l.n++
	return i
}

// slice returns the items in one slice of their length, nil for none.
func (l *chunkList[T]) slice() []T {
	if l.n == 0 {
		return nil
	}
	out := make([]T, 0, l.n)
	for _, c := range l.chunks {
		out = append(out, c...)
	}
	return out
}

// at returns item i, which must be below len.
func (l *chunkList[T]) at(i int32) *T {
	return &l.chunks[i>>chunkBits][i&(1<<chunkBits-1)]
}
