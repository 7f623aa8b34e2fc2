package policy

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzDiff diffs two parsed profiles: no panic, no hang, every grant graded
// low to high with a family, a name and a reason, riskiest first, a profile
// diffed with itself grants nothing, and a profile grants nothing over one that
// holds all its rules and more.
func FuzzDiff(f *testing.F) {
	seeds := [][2]string{
		{"", "expose-rw=/\nnet=ALLOW|*|*|*|OUT\npython-import=ctypes\npython-api=ALLOW:process-exec\neval-call=__import__\n"},
		{"expose-ro=./data\nignore=*.key\n", "expose-rw=.\n"},
		{"net=DENY|tcp|10.0.0.0/8|*|OUT\nnet=ALLOW|tcp|*|*|OUT\n", "net=ALLOW|tcp|*|443|OUT\nnet=ALLOW|udp|example.com|53|OUT\n"},
		{"env=A=${A}\nunenv=SECRET_*\nenv=*=${*}\n", "env=*=${*}\nenv=LD_PRELOAD=x\n"},
		{"python-api=ALLOW:process-exec\npython-api=DENY:os.system\n", "python-api=ALLOW:*\n"},
		{"eval-call:calc=len\neval-timeout=1s\n", "eval-call:calc=len,open\neval-magic=__class__\neval-namespace=caller\neval-timeout=1h\n"},
		{"os-sandbox=landlock\nlearn=false\nfirejail.rlimit-as=600m\n", "os-sandbox=none\npy-sandbox=false\nremote-result-mode=objects\n"},
		{"include \"sub/inc\"\n", "include \"common\"\npython-import=*\n"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	for _, s := range fuzzSeeds {
		f.Add("", s)
	}
	opts := fuzzOptions(f)
	f.Fuzz(func(t *testing.T, before, after string) {
		if len(before)+len(after) > 64<<10 {
			t.Skip("larger than 64 KiB")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		b, err := Parse(ctx, filepath.Join(opts.Dir, "before"), []byte(before), opts)
		if err != nil {
			return
		}
		a, err := Parse(ctx, filepath.Join(opts.Dir, "after"), []byte(after), opts)
		if err != nil {
			return
		}
		do := &DiffOptions{Home: opts.Home}
		start := time.Now()
		c := Diff(b, a, do)
		if el := time.Since(start); el > 10*time.Second {
			t.Fatalf("Diff took %v", el)
		}
		for i, g := range c.Grants {
			if g.Risk < RiskLow || g.Risk > RiskHigh || g.Family == "" || g.Grant == "" || g.Reason == "" {
				t.Fatalf("grant %#v", g)
			}
			if strings.ContainsAny(g.Grant, "\n") {
				t.Fatalf("grant name on several lines: %q", g.Grant)
			}
			if i > 0 && g.Risk > c.Grants[i-1].Risk {
				t.Fatalf("grants not riskiest first")
			}
		}
		if self := Diff(a, a, do); len(self.Grants) != 0 {
			t.Fatalf("a profile diffed with itself grants %s (%s)\n%s", self.Grants[0].Grant, self.Grants[0].Reason, after)
		}
		// A profile adds nothing over the profile holding its rules and the old
		// ones: the union allows at least what each allows... unless a rule of one
		// narrows the other (a DENY, an unenv=, an ignore=, a single-valued key):
		// only a file free of those is checked.
		if !narrowingFree(before) || !narrowingFree(after) {
			return
		}
		u, err := Parse(ctx, filepath.Join(opts.Dir, "union"), []byte(before+"\n"+after), opts)
		if err != nil {
			return
		}
		if d := Diff(u, a, do); len(d.Grants) != 0 {
			t.Fatalf("the union grants less than after: %s (%s)", d.Grants[0].Grant, d.Grants[0].Reason)
		}
	})
}

// narrowingFree reports whether text holds only lines that can only widen a
// profile (no DENY, expose (a deeper one narrows a shallower), unenv=, ignore=,
// include, control or provider key, budget,
// env= of any kind (the first of two env= rules wins), nor eval-namespace).
func narrowingFree(text string) bool {
	for l := range strings.SplitSeq(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		key, v, ok := strings.Cut(l, "=")
		if !ok || strings.Contains(v, "DENY") || strings.Contains(l, "#") || strings.Contains(l, "${") {
			return false
		}
		switch key {
		case "net", "python-import", "python-api":
			continue
		}
		k, _, _ := strings.Cut(key, ":")
		switch k {
		case "eval-syntax", "eval-call", "eval-attribute", "eval-import", "eval-magic":
			continue
		}
		return false
	}
	return true
}
