package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestExample runs the example: the sources inside the profile give their
// values; the one outside it is rejected with the rule lines that allow it; the
// loop is interrupted by eval-max-iterations; the bad index fails as an
// IndexError; __import__ and the frame escape are rejected, the frame capture
// with no rule that allows it.
func TestExample(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	var out bytes.Buffer
	if err := run(context.Background(), &out, "auto", "/usr/bin/python3"); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	// Each model output, then what came of it; a violation's message is left
	// free (.*), its fix line is not.
	want := []string{
		`provider: \S+`,
		`\[1\] sum\(r\[1\] \* r\[2\] for r in orders\)`,
		`  value: 136`,
		`\[2\] sorted\(.*`,
		`  value: \["plums","apples"\]`,
		`\[3\] total = 0; .*`,
		`  value: \{"average":45.33,"name":"plums","price":30,"qty":2,"total":136\}`,
		`\[4\] orders.__class__.__name__ \+ open\('/etc/passwd'\).read\(\)`,
		`  rejected:`,
		`    line 1, col 1: .*__name__.*`, `      fix: eval-magic=__name__`,
		`    line 1, col 1: .*__class__.*`, `      fix: eval-magic=__class__`,
		`    line 1, col 29: .*read.*`, `      fix: eval-attribute=read`,
		`    line 1, col 29: .*open.*`, `      fix: eval-call=open`,
		`\[5\] len\(\[i for i in range\(10\*\*9\)\]\)`,
		`  interrupted: eval-max-iterations=100000`,
		`\[6\] orders\[10\]\[0\]`,
		`  failed: IndexError: list index out of range`,
		`\[7\] __import__\('os'\).system\('id'\)`,
		`  rejected:`,
		`    line 1, col 1: .*system.*`, `      fix: eval-attribute=system`,
		`    line 1, col 1: .*__import__.*`, `      fix: eval-call=__import__`,
		`\[8\] \[g.gi_frame.f_back.f_globals .*`,
		`  rejected:`,
		`    line 1, col 2: .*f_globals.*`, `      fix: \(no eval- rule allows it\)`,
		`    line 1, col 2: .*f_back.*`, `      fix: \(no eval- rule allows it\)`,
		`    line 1, col 2: .*gi_frame.*`, `      fix: \(no eval- rule allows it\)`,
	}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), out.String())
	}
	for i, w := range want {
		if !regexp.MustCompile(`^` + w + `$`).MatchString(got[i]) {
			t.Errorf("line %d: %q, want %q", i+1, got[i], w)
		}
	}
}
