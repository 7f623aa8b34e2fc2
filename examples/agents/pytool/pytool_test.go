package pytool

import (
	"context"
	"os"
	"strings"
	"testing"
)

// newTools starts the tools on /usr/bin/python3, or skips.
func newTools(t *testing.T, o Options) *Tools {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	o.Python = "/usr/bin/python3"
	tl, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tl.Close(); err != nil {
			t.Error(err)
		}
	})
	return tl
}

// TestCall calls each tool as a model would, and checks what the model reads:
// values, rejections with their fix lines, a budget, a Python failure, and the
// sandbox's refusals with the rule named.
func TestCall(t *testing.T) {
	tl := newTools(t, Options{})
	cases := []struct {
		name, tool, args string
		isError          bool
		want             []string
	}{
		{"value", EvalName, `{"source": "sum(q * p for _, q, p in orders)"}`, false,
			[]string{"value: 136"}},
		{"exec rejected", EvalName, `{"source": "def total(rows):\n    return 0", "mode": "exec"}`, true,
			[]string{"rejected before it ran", "fix (a rule the operator may add): eval-syntax="}},
		{"exec value", EvalName, `{"source": "n = len(orders)\nbig = [o[0] for o in orders if o[2] > 10]", "mode": "exec"}`, false,
			[]string{`value: {"big":["apples","plums"],"n":3}`}},
		{"rejected", EvalName, `{"source": "open('orders.csv').read()"}`, true,
			[]string{"rejected before it ran", "(2 violations)", "fix (a rule the operator may add): eval-call=open", "fix (a rule the operator may add): eval-attribute=read"}},
		{"frame escape", EvalName, `{"source": "[g.gi_frame for g in [(x for x in orders)]]"}`, true,
			[]string{"rejected before it ran", "no rule allows it"}},
		{"interrupted", EvalName, `{"source": "len([i for i in range(10**9)])"}`, true,
			[]string{"interrupted: the budget eval-max-iterations=100000 ran out"}},
		{"python failure", EvalName, `{"source": "orders[10]"}`, true,
			[]string{"failed: IndexError: list index out of range"}},
		{"bad mode", EvalName, `{"source": "1", "mode": "single"}`, true,
			[]string{`mode "single": expected eval or exec`}},
		{"bad arguments", EvalName, `{"src": "1"}`, true,
			[]string{`bad arguments for eval_python: json: unknown field "src"`}},
		{"unknown tool", "shell", `{}`, true,
			[]string{`unknown tool "shell"`}},
		{"run", RunName, `{"code": "import csv\nrows = list(csv.DictReader(open('orders.csv')))\nprint(sum(int(r['quantity']) * int(r['unit_price']) for r in rows))"}`, false,
			[]string{"exit code: 0\nstdout:\n136\nstderr:"}},
		{"run import refused", RunName, `{"code": "import urllib.request\nprint(urllib.request.urlopen('http://example.com').read())"}`, true,
			[]string{"exit code: 1", "refused by the sandbox:", "- import ", "refused by rule: the implicit default policy (deny by default)", "RuleModuleNotFoundError", "Add `python-import="}},
		{"run file refused", RunName, `{"code": "print(open('/etc/passwd').read())"}`, true,
			[]string{"exit code: 1", "- file /etc/passwd refused by rule: the implicit default policy (deny by default)", "RuleFileNotFoundError"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := tl.Call(context.Background(), c.tool, []byte(c.args))
			if err != nil {
				t.Fatal(err)
			}
			if r.IsError != c.isError {
				t.Errorf("IsError = %v, want %v", r.IsError, c.isError)
			}
			for _, w := range c.want {
				if !strings.Contains(r.Text, w) {
					t.Errorf("result lacks %q:\n%s", w, r.Text)
				}
			}
		})
	}
}

// TestRunOutputCapped: a program that prints more than MaxOutput returns the
// first MaxOutput bytes and says how much was cut.
func TestRunOutputCapped(t *testing.T) {
	tl := newTools(t, Options{MaxOutput: 100})
	r, err := tl.Run(context.Background(), RunArgs{Code: "print('x' * 10000)"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Text, "\n"+strings.Repeat("x", 100)+"\n[9901 more bytes cut]\n") {
		t.Errorf("output not capped:\n%s", r.Text)
	}
}
