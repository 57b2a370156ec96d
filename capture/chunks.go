package capture

import "math/bits"

// chunkBits sizes a chunkList's full chunks: 4096 items.
const chunkBits = 12

// firstChunkBits sizes a chunkList's first two chunks: 8 items each.
const firstChunkBits = 3

// growingChunks is how many chunks come before the first full one: sizes
// 8, 8, 16, ..., 2048, so that each ends where the items so far are a
// power of two.
const growingChunks = chunkBits - firstChunkBits + 1

// chunkList is a list in chunks, so that a million items grow it without
// ever copying those held (one growing slice of frame observations spent a
// fifth of the analysis copying them) and the pointers it hands out stay
// valid. The chunks double from 8 items up to 1<<chunkBits and are never
// copied either: the many short lists of a capture (one per pair of nodes)
// stay small, and the longer ones leave no garbage of outgrown chunks
// behind (a first chunk that doubled by copying up to its size spent a
// tenth of the analysis in the copies and their clearing).
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

// chunkOf returns the chunk holding item i and i's place in it.
func chunkOf(i int32) (chunk, off int32) {
	if i < 1<<firstChunkBits {
		return 0, i
	}
	if i < 1<<chunkBits {
		top := int32(bits.Len32(uint32(i))) - 1 // i is in [1<<top, 2<<top)
		return top - firstChunkBits + 1, i - 1<<top
	}
	i -= 1 << chunkBits
	return growingChunks + i>>chunkBits, i & (1<<chunkBits - 1)
}

// chunkSize is the capacity of chunk c.
func chunkSize(c int) int {
	switch {
	case c == 0:
		return 1 << firstChunkBits
	case c < growingChunks:
		return 1 << (c + firstChunkBits - 1)
	}
	return 1 << chunkBits
}

// add appends v and returns its index.
func (l *chunkList[T]) add(v T) int32 {
	i := l.n
	c, _ := chunkOf(i)
	if int(c) == len(l.chunks) {
		l.chunks = append(l.chunks, make([]T, 0, chunkSize(int(c))))
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
	c, off := chunkOf(i)
	return &l.chunks[c][off]
}
