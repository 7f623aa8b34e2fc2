package evalguard

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func checkSrc(t *testing.T, c *Checker, rules, src string, mode Mode) *Verdict {
	t.Helper()
	v, err := c.Check(context.Background(), profileOf(t, rules, ""), src, mode)
	if err != nil {
		t.Fatalf("Check(%q): %v", src, err)
	}
	return v
}

// pasteable is the rule line of a fix, without the narrower alternative.
func pasteable(fix string) string {
	line, _, _ := strings.Cut(fix, " (or, narrower: ")
	return line
}

// paste adds a rule line; a scalar key's line replaces the one already set.
func paste(rules, line string) string {
	key, _, _ := strings.Cut(line, "=")
	if strings.HasPrefix(key, "eval-max-") || key == "eval-timeout" || key == "eval-namespace" {
		var keep []string
		for _, l := range strings.Split(rules, "\n") {
			if !strings.HasPrefix(l, key+"=") {
				keep = append(keep, l)
			}
		}
		rules = strings.Join(keep, "\n")
	}
	return rules + "\n" + line
}

// TestFixLines: each kind of violation carries the rule line that allows it, and
// pasting that line into the policy makes the source pass; the kinds no rule can
// allow carry no fix.
func TestFixLines(t *testing.T) {
	needPython(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	c := NewChecker(realPython)
	for _, tc := range []struct {
		name, rules, src string
		mode             Mode
		kind, target     string
		fix              string
	}{
		{"syntax in a group", declared, "while x:\n pass", Exec, "syntax", "While", "eval-syntax=loop (or, narrower: eval-syntax=While)"},
		{"syntax in no group", declared, "match x:\n case _:\n  pass", Exec, "syntax", "Match", "eval-syntax=Match"},
		{"call", declared, "len([1])", Eval, "call", "len", "eval-call=len"},
		{"attribute", declared, "'a'.upper()", Eval, "attribute", "upper", "eval-attribute=upper"},
		{"format is granted by its exact name", "eval-attribute=*", "'{}'.format(1)", Eval, "attribute", "format", "eval-attribute=format"},
		{"magic", declared, "().__class__", Eval, "magic", "__class__", "eval-magic=__class__"},
		{"magic identifier", declared, "__name__", Eval, "magic", "__name__", "eval-magic=__name__"},
		{"format field", "eval-attribute=format", "'{0.__class__}'.format(1)", Eval, "format", "__class__", "eval-magic=__class__"},
		{"import", "eval-syntax=import", "import json", Exec, "import", "json", "eval-import=json"},
		{"depth", "eval-syntax=arith", strings.Repeat("-", 25) + "1", Eval, "depth", "eval-max-depth", "eval-max-depth=27"},
		{"nodes", declared, "[" + strings.Repeat("1,", 6000) + "]", Eval, "nodes", "eval-max-nodes", "eval-max-nodes=6003"},
		{"size", "eval-max-nodes=10", strings.Repeat("1", 321), Eval, "size", "eval-max-nodes", "eval-max-nodes=11"},
		{"frame", "eval-syntax=comprehension", "(i for i in ()).gi_frame", Eval, "frame", "gi_frame", ""},
		{"internals", "eval-syntax=func\neval-magic=*", "(lambda: 0).__globals__", Eval, "frame", "__globals__", ""},
		{"reserved", declared, "__sb_tick__", Eval, "reserved", "__sb_tick__", ""},
		{"attribute store", "eval-syntax=assign", "o.x = 1", Exec, "attribute", "x", ""},
		{"parse", declared, "1 +", Eval, "parse", "", ""},
		{"parser depth", "eval-syntax=arith", strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300), Eval, "depth", "eval-max-depth", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := checkSrc(t, c, tc.rules, tc.src, tc.mode)
			var hit *Violation
			for i, x := range v.Violations {
				if x.Kind == tc.kind && x.Name == tc.target && (tc.fix == "" || x.Fix == tc.fix) {
					hit = &v.Violations[i]
				}
			}
			if v.OK || hit == nil {
				t.Fatalf("want a %s violation of %q with fix %q, got %+v", tc.kind, tc.target, tc.fix, v)
			}
			if hit.Fix != tc.fix {
				t.Fatalf("fix %q, want %q", hit.Fix, tc.fix)
			}
			if tc.fix == "" {
				if !strings.Contains(hit.String(), "no eval- rule allows it") {
					t.Errorf("String() = %q", hit.String())
				}
				return
			}
			// Paste every fix of the report: the source then passes.
			rules := tc.rules
			for _, x := range v.Violations {
				rules = paste(rules, pasteable(x.Fix))
			}
			if again := checkSrc(t, c, rules, tc.src, tc.mode); !again.OK {
				t.Errorf("with the fixes applied (%q): %+v", rules, again.Violations)
			}
		})
	}
}

// TestDangerousFixLines: a fix line that grants a builtin which widens what
// evaluated code reaches carries a warning saying so; a harmless grant carries
// none; a builtin the guard refuses whatever the profile gets no fix at all.
func TestDangerousFixLines(t *testing.T) {
	needPython(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	c := NewChecker(realPython)
	for _, tc := range []struct {
		src, name, fix, warning string
	}{
		{"__import__('os')", "__import__", "eval-call=__import__", "dangerous grant: evaluated code imports modules"},
		{"open('x')", "open", "eval-call=open", "dangerous grant: evaluated code opens files"},
		{"eval('1')", "eval", "eval-call=eval", "dangerous grant"},
		{"exec('1')", "exec", "eval-call=exec", "dangerous grant"},
		{"compile('1', 's', 'eval')", "compile", "eval-call=compile", "dangerous grant"},
		{"locals()", "locals", "eval-call=locals", "dangerous grant"},
		{"getattr(1, 'real')", "getattr", "eval-call=getattr", "attribute gate still decides"},
		{"len([])", "len", "eval-call=len", ""},
		{"globals()", "globals", "", ""},
		{"breakpoint()", "breakpoint", "", ""},
		{"setattr(1, 'a', 2)", "setattr", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := checkSrc(t, c, declared, tc.src, Eval)
			var hit *Violation
			for i, x := range v.Violations {
				if x.Kind == "call" && x.Name == tc.name {
					hit = &v.Violations[i]
				}
			}
			if hit == nil {
				t.Fatalf("no call violation of %s: %+v", tc.name, v)
			}
			if hit.Fix != tc.fix {
				t.Errorf("fix %q, want %q", hit.Fix, tc.fix)
			}
			if tc.warning == "" && hit.Warning != "" || !strings.Contains(hit.Warning, tc.warning) {
				t.Errorf("warning %q, want %q", hit.Warning, tc.warning)
			}
			if tc.warning != "" && (!strings.Contains(hit.String(), "[warning: ") || !strings.Contains(hit.String(), tc.warning)) {
				t.Errorf("String() = %q does not carry the warning", hit.String())
			}
			if tc.fix == "" && !strings.Contains(hit.Message, "always refused") {
				t.Errorf("message %q does not say the call is always refused", hit.Message)
			}
			err := v.Err()
			if err == nil || tc.warning != "" && !strings.Contains(err.Error(), tc.warning) {
				t.Errorf("the rejection does not carry the warning: %v", err)
			}
		})
	}
}

// TestCheckReportsEverything: one report holds every violation, sorted by
// position, with 1-based character columns.
func TestCheckReportsEverything(t *testing.T) {
	needPython(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	v, err := Check(context.Background(), realPython, profileOf(t, declared, ""), "x = 'é'.upper()\nfor i in range(3):\n print(i.__class__)\n", Exec)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range v.Violations {
		got = append(got, x.Kind+":"+x.Name+"@"+itoa(x.Line)+":"+itoa(x.Col))
	}
	want := "syntax:Assign@1:1 attribute:upper@1:5 syntax:For@2:1 call:range@2:10 call:print@3:2 magic:__class__@3:8"
	if strings.Join(got, " ") != want {
		t.Errorf("violations\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	if err := v.Err(); err == nil || !strings.Contains(err.Error(), "6 rules violated") {
		t.Errorf("Err() = %v", err)
	}
	ok, err := Check(context.Background(), realPython, profileOf(t, "eval-syntax=arith", ""), "2 + 3 * 4", Eval)
	if err != nil || !ok.OK || len(ok.Violations) != 0 || ok.Err() != nil {
		t.Errorf("accepted source: %+v, %v", ok, err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestCheckBadInput: NUL bytes and invalid UTF-8 are typed errors; a 10 MB
// source is a size violation (never handed to Python); a source nesting thousands
// of levels deep is a depth violation, whether eval-max-depth or CPython's own
// parser stops it; a bad mode or profile is an error.
func TestCheckBadInput(t *testing.T) {
	needPython(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ctx := context.Background()
	c := NewChecker(realPython)
	p := profileOf(t, "eval-syntax=arith, subscript", "")
	var se *SourceError
	if _, err := c.Check(ctx, p, "1 +\x00 2", Eval); !errors.As(err, &se) || se.Offset != 3 || !strings.Contains(se.Reason, "NUL") {
		t.Errorf("NUL: %v", err)
	}
	if _, err := c.Check(ctx, p, "'a\xffb'", Eval); !errors.As(err, &se) || se.Offset != 2 || !strings.Contains(se.Reason, "UTF-8") {
		t.Errorf("invalid UTF-8: %v", err)
	}
	huge := strings.Repeat("1+", 5<<20) + "1"
	v, err := c.Check(ctx, p, huge, Eval)
	if err != nil || v.OK || len(v.Violations) != 1 || v.Violations[0].Kind != "size" {
		t.Errorf("10 MB: %+v, %v", v, err)
	}
	// With limits wide enough for the source to reach the parser: CPython's own
	// limit answers, as a depth violation.
	wide := profileOf(t, "eval-syntax=arith\neval-max-nodes=1_000_000_000\neval-max-alloc=1GB\neval-max-depth=1_000_000", "")
	for name, src := range map[string]string{
		"long chain":        strings.Repeat("1+", 100_000) + "1",
		"unary chain":       strings.Repeat("-", 100_000) + "1",
		"parentheses":       strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000),
		"conditional chain": strings.Repeat("1 if 1 else ", 50_000) + "1",
	} {
		v, err := c.Check(ctx, wide, src, Eval)
		if err != nil || v.OK || len(v.Violations) != 1 || v.Violations[0].Kind != "depth" {
			t.Errorf("%s: %+v, %v", name, v, err)
		}
	}
	deep := strings.Repeat("[", 150) + strings.Repeat("]", 150)
	v, err = c.Check(ctx, p, deep, Eval)
	if err != nil || len(v.Violations) != 1 || v.Violations[0].Kind != "depth" || v.Violations[0].Fix != "eval-max-depth=152" {
		t.Errorf("nested lists: %+v, %v", v, err)
	}
	if _, err := c.Check(ctx, p, "1", Mode("single")); err == nil {
		t.Error("mode single accepted")
	}
	bad := *p
	bad.Namespace = "open"
	if _, err := c.Check(ctx, &bad, "1", Eval); err == nil || !strings.Contains(err.Error(), `unknown namespace mode "open"`) {
		t.Errorf("bad namespace: %v", err)
	}
	if _, err := NewChecker("/nonexistent/python3").Check(ctx, p, "1", Eval); err == nil {
		t.Error("a missing interpreter gave no error")
	}
}

// BenchmarkCheck: the static verdict of a small expression, warm Checker (one
// interpreter started per check).
func BenchmarkCheck(b *testing.B) {
	needPython(b)
	b.Setenv("XDG_CACHE_HOME", b.TempDir())
	c := NewChecker(realPython)
	p := profileOf(b, "eval-syntax=arith, compare\neval-call=len", "")
	ctx := context.Background()
	if _, err := c.Check(ctx, p, "1", Eval); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		v, err := c.Check(ctx, p, "2 + 3 * len([4]) > 1", Eval)
		if err != nil || !v.OK {
			b.Fatal(v, err)
		}
	}
}

// benchDriver runs one source n times through run() and prints the time of one
// evaluation in nanoseconds (the interpreter's start is not counted).
const benchDriver = `import sys, marshal, time
d = marshal.loads(sys.stdin.buffer.read())
m = type(sys)('pysandboxes_evalguard')
sys.modules['pysandboxes_evalguard'] = m
exec(compile(d['module'], '<pysandboxes_evalguard>', 'exec', dont_inherit=True), m.__dict__)
m.run(d['src'], None, d['profile'], 'exec')
t = time.perf_counter_ns()
for _ in range(d['n']):
    m.run(d['src'], None, d['profile'], 'exec')
print((time.perf_counter_ns() - t) // max(1, d['n']))
`

// BenchmarkRun: one guarded evaluation of a data-processing snippet (calls,
// subscripts, attribute reads, loops, augmented assignment: the paths the value
// gate and the augmented-assignment helper add to), in ns/eval measured inside
// the interpreter.
func BenchmarkRun(b *testing.B) {
	needPython(b)
	src := `rows = [{'name': 'a%d' % i, 'v': i} for i in range(200)]
total = 0
for r in rows:
    if r['v'] % 3 == 0:
        total += len(r['name'].upper())
out = sorted(rows, key=lambda r: -r['v'])[:5]
`
	p := profileOf(b, "eval-syntax=arith, compare, conditional, loop, comprehension, assign, func, subscript\neval-call=len, sorted, range\neval-attribute=upper", "")
	data, err := marshal(map[string]any{"module": Source(), "src": src, "profile": p.Python(), "n": int64(b.N)})
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(realPython, "-I", "-S", "-c", benchDriver)
	cmd.Stdin = strings.NewReader(string(data))
	out, err := cmd.Output()
	if err != nil {
		b.Fatal(err)
	}
	ns, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		b.Fatalf("driver output %q: %v", out, err)
	}
	b.ReportMetric(ns, "ns/eval")
}
