package suggest

import (
	"strings"
	"testing"
)

// TestClosest: a word one to three edits (by its length) from a candidate is
// taken for a typo of it; case counts; a word far from every candidate, or
// too short to tell, is none; a tie goes to the first candidate.
func TestClosest(t *testing.T) {
	cands := []string{"expose-ro", "expose-rw", "timeout", "json", "verbose", "eval-syntax"}
	for word, want := range map[string]string{
		"expose-r": "expose-ro", "expsoe-rw": "expose-rw", "timout": "timeout", "jsn": "json",
		"verbos": "verbose", "eval-sytnax": "eval-syntax", "EXPOSE-RO": "", "x": "", "completely-else": "",
		"expose-rx": "expose-ro", strings.Repeat("a", 1000): "",
	} {
		got, ok := Closest(word, cands)
		if ok != (want != "") || got != want {
			t.Errorf("Closest(%q) = %q, %v; want %q", word, got, ok, want)
		}
	}
}

// TestClosestFold: the case of the word is ignored, the candidate is returned
// as it is listed.
func TestClosestFold(t *testing.T) {
	cands := []string{"py-sandbox", "remote-result-guard", "ignore", "landlock", "unshare"}
	for word, want := range map[string]string{
		"PY-SANDBOX": "py-sandbox", "remote-result-guards": "remote-result-guard", "ignroe": "ignore",
		"Landlok": "landlock", "binds": "", "zzz": "", strings.Repeat("k", 100): "",
	} {
		got, ok := ClosestFold(word, cands)
		if ok != (want != "") || got != want {
			t.Errorf("ClosestFold(%q) = %q, %v; want %q", word, got, ok, want)
		}
	}
}

// TestDistance: the optimal string alignment distance (a swap of neighbours is
// one edit), also of long words.
func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"env", "env", 0}, {"expose-r", "expose-ro", 1},
		{"expsoe-rw", "expose-rw", 1}, {"ca", "abc", 3}, {"kitten", "sitting", 3}, {"ab", "ba", 1}, {"abcd", "badc", 2},
		{strings.Repeat("a", 1000), strings.Repeat("b", 1000), 1000},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// BenchmarkClosestLongWord: a long word against short candidates costs no
// comparison.
func BenchmarkClosestLongWord(b *testing.B) {
	word := strings.Repeat("x", 1<<16)
	cands := []string{"expose-ro", "expose-rw", "timeout", "json", "verbose", "eval-syntax"}
	for b.Loop() {
		Closest(word, cands)
	}
}
