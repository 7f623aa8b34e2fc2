package mountinfo

import "testing"

// TestUnescape: escapes anywhere in the path (the last four bytes too),
// and what is not an escape kept as it is.
func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`a\040b`: "a b", `\134x`: `\x`, `plain`: "plain", `end\040`: "end ", `end\04`: `end\04`,
		`\777`: `\777`, `tab\011nl\012`: "tab\tnl\n", `\`: `\`,
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
