package capture

import (
	"math/bits"
	"unsafe"
)

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
	// prefault, when set, has the full-size chunks come from a
	// chunkSupply, started once the list is long enough to need it (a
	// small capture's lists never are), until prefault is closed.
	prefault <-chan struct{}
	supply   *chunkSupply[T]
}

// chunkSupply makes full-size chunks ahead of need on a goroutine of its
// own and touches every page of each: the first write to a page of new
// memory is a page fault, and the analysis goroutine, the one the others
// wait for, spent a fifth of its time in them, appending to its lists.
type chunkSupply[T any] struct {
	ready chan []T
}

// newChunkSupply starts a chunkSupply, which stops once done is closed.
func newChunkSupply[T any](done <-chan struct{}) *chunkSupply[T] {
	s := &chunkSupply[T]{ready: make(chan []T, 4)}
	var zero T
	perPage := max(1, 4096/int(unsafe.Sizeof(zero)))
	go func() {
		for {
			c := make([]T, 1<<chunkBits)
			for i := 0; i < len(c); i += perPage {
				c[i] = zero
			}
			select {
			case s.ready <- c[:0]:
			case <-done:
				return
			}
		}
	}()
	return s
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
		l.chunks = append(l.chunks, l.newChunk(int(c)))
	}
	l.chunks[c] = append(l.chunks[c], v)
	l.n++
	return i
}

// newChunk returns an empty chunk c: the supply's, when it has one ready;
// the list never waits for it.
func (l *chunkList[T]) newChunk(c int) []T {
	if c == growingChunks-1 && l.prefault != nil && l.supply == nil {
		l.supply = newChunkSupply[T](l.prefault)
	}
	if c >= growingChunks && l.supply != nil {
		select {
		case ch := <-l.supply.ready:
			return ch
		default:
		}
	}
	return make([]T, 0, chunkSize(c))
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
