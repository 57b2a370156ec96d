package capture

import "testing"

// TestChunkList checks that items keep their index and place however long
// the list grows: a pointer taken early still reaches the item.
func TestChunkList(t *testing.T) {
	var l chunkList[int32]
	if l.len() != 0 || l.slice() != nil {
		t.Fatal("empty list not empty")
	}
	const n = 3<<chunkBits + 77
	var early *int32
	for i := range int32(n) {
		if got := l.add(i); got != i {
			t.Fatalf("add returned %d, want %d", got, i)
		}
		if i == 5 {
			early = l.at(5)
		}
	}
	*early = -5
	if *l.at(5) != -5 {
		t.Fatal("a pointer taken early no longer reaches its item")
	}
	*early = 5
	s := l.slice()
	if l.len() != n || len(s) != n {
		t.Fatalf("len %d, slice %d, want %d", l.len(), len(s), n)
	}
	for i := range int32(n) {
		if *l.at(i) != i || s[i] != i {
			t.Fatalf("item %d: at %d, slice %d", i, *l.at(i), s[i])
		}
	}
	for c, k := range l.chunks {
		if cap(k) != chunkSize(c) {
			t.Fatalf("chunk %d grew to %d, want %d", c, cap(k), chunkSize(c))
		}
	}
}
