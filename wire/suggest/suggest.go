// Package suggest finds the names a mistyped one was probably meant to be,
// for "did you mean" in errors about unknown topologies, scenarios and
// commands.
//
// It lives under wire, which every other package may import, and imports
// nothing of bullylab, so that all of them can use it.
package suggest

import (
	"strings"
	"unicode/utf8"
)

// MaxDistance is the most edits (insertions, deletions, substitutions and
// swaps of neighbours) a suggestion may be from the name typed.
const MaxDistance = 2

// maxLen bounds the names compared: longer input is no typo of a name.
const maxLen = 64

// Similar returns the candidates closest to name: those the fewest edits
// away, at most MaxDistance (1 for names of up to 3 characters); if none
// is, the one candidate name is a prefix of. Case is ignored; candidates keep their order. Nil when nothing is
// close, or name is a candidate.
func Similar(name string, candidates []string) []string {
	n := strings.ToLower(name)
	if n == "" || len(n) > maxLen || !utf8.ValidString(n) {
		return nil
	}
	limit := MaxDistance
	if utf8.RuneCountInString(n) <= 3 {
		limit = 1
	}
	best, out := limit+1, []string(nil)
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if lc == n {
			return nil
		}
		if len(lc) > maxLen {
			continue
		}
		d := Distance(n, lc)
		switch {
		case d > limit:
		case d < best:
			best, out = d, []string{c}
		case d == best:
			out = append(out, c)
		}
	}
	if out != nil {
		return out
	}
	var prefixed []string
	for _, c := range candidates {
		if strings.HasPrefix(strings.ToLower(c), n) {
			prefixed = append(prefixed, c)
		}
	}
	if len(prefixed) == 1 {
		return prefixed
	}
	return nil
}

// Hint is "; did you mean X?" (or "X or Y", "X, Y or Z") for the names
// Similar finds, to append to an error, or "" when it finds none.
func Hint(name string, candidates []string) string {
	return DidYouMean(Similar(name, candidates))
}

// DidYouMean is "; did you mean X?" (or "X or Y", "X, Y or Z") for names
// Similar found and the caller may have spelled otherwise (a flag with its
// dashes), or "" for none.
func DidYouMean(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return "; did you mean " + s[0] + "?"
	}
	return "; did you mean " + strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1] + "?"
}

// Distance is the optimal-string-alignment distance of a and b: the fewest
// insertions, deletions, substitutions of one rune and swaps of two
// neighbouring runes that turn a into b, no rune edited twice.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Three rows of the dynamic programme: i-2, i-1 and i.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
