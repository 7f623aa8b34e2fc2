// Package suggest finds the name a mistyped word was meant to be, for the
// "did you mean" of error messages: the rule keys and provider names of the
// policy language (package policy) and the subcommands, options and rules of
// the command line (package internal/cli) share this one matcher.
//
// Nearness is the optimal string alignment distance (insertions, deletions,
// substitutions and swaps of two neighbours), bounded by the word's length, and
// the work is bounded too: a candidate whose length is too far off is not
// compared, and a comparison costs len(word)*len(candidate) time and
// len(candidate) memory, so an arbitrarily long word costs nothing.
package suggest

import "strings"

// Closest returns the candidate nearest to word when it is near enough to be a
// typo of it: one edit for words of up to 4 bytes, two up to 11, three beyond.
// On a tie the first candidate wins. It reports false when none is near
// enough.
func Closest(word string, cands []string) (string, bool) { return closest(word, cands) }

// ClosestFold is Closest ignoring the case of word (the candidates are in lower
// case): "PY-SANDBOX" is a typo of "py-sandbox".
func ClosestFold(word string, cands []string) (string, bool) {
	return closest(strings.ToLower(word), cands)
}

// limit is the number of edits a typo of word may have.
func limit(word string) int {
	switch {
	case len(word) > 11:
		return 3
	case len(word) > 4:
		return 2
	}
	return 1
}

func closest(word string, cands []string) (string, bool) {
	lim := limit(word)
	best, bestD := "", lim+1
	var rows []int
	for _, c := range cands {
		if d := len(word) - len(c); d > lim || -d > lim {
			continue
		}
		if rows == nil {
			rows = make([]int, 3*(len(word)+lim+1))
		}
		if d := distanceIn(rows, word, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best, best != ""
}

// Distance is the optimal string alignment distance of a and b (insertions,
// deletions, substitutions and swaps of two neighbours), in
// O(len(a)*len(b)) time and O(len(b)) memory.
func Distance(a, b string) int { return distanceIn(make([]int, 3*(len(b)+1)), a, b) }

// distanceIn is Distance working in rows (at least 3*(len(b)+1)).
func distanceIn(rows []int, a, b string) int {
	n := len(b) + 1
	prev2, prev, cur := rows[:n], rows[n:2*n], rows[2*n:3*n]
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
