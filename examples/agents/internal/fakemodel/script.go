package fakemodel

import (
	"encoding/json"
	"strings"
	"testing"
)

// The steps of SandboxScript, as source code.
const (
	// RejectedSource is outside the eval sub-language of the samples (open and
	// .read are not granted): eval_python rejects it before it runs.
	RejectedSource = "open('orders.csv').read()"
	// RefusedCode imports a module the samples' policy does not grant:
	// run_python runs it, and the Python layer refuses the import.
	RefusedCode = "import urllib.request\nprint(urllib.request.urlopen('https://example.com/orders.csv').read())"
	// CorrectedSource stays inside the sub-language.
	CorrectedSource = "sum(qty * price for _, qty, price in orders)"
	// FinalAnswer is the model's last message.
	FinalAnswer = "The orders total 136."
)

// SandboxScript is the script the samples' tests play: a source eval_python
// rejects, a program run_python runs and the sandbox refuses, the corrected
// source, whose value comes back, then the final answer. args writes a tool's
// arguments from its single field (source for eval_python, code for run_python).
func SandboxScript(args func(tool, field, code string) string) []Step {
	return []Step{
		{Tool: "eval_python", Args: args("eval_python", "source", RejectedSource)},
		{Tool: "run_python", Args: args("run_python", "code", RefusedCode)},
		{Tool: "eval_python", Args: args("eval_python", "source", CorrectedSource)},
		{Text: FinalAnswer},
	}
}

// ObjectArgs writes a tool's arguments as the object {field: code}.
func ObjectArgs(_, field, code string) string {
	b, _ := json.Marshal(map[string]string{field: code})
	return string(b)
}

// CheckSandboxScript checks what reached the model while SandboxScript played:
// the rejection with its fix lines, the refusal with the rule named, and the
// value; markedErrors says whether the wire carries an error mark.
func CheckSandboxScript(t testing.TB, s *Server, answer string, markedErrors bool) {
	t.Helper()
	s.Check(t)
	if answer != FinalAnswer {
		t.Errorf("answer %q, want %q", answer, FinalAnswer)
	}
	res := s.Results()
	if len(res) != 3 {
		t.Fatalf("%d tool results reached the model, want 3: %+v", len(res), res)
	}
	want := [][]string{
		{"rejected before it ran", "fix (a rule the operator may add): eval-call=open", "fix (a rule the operator may add): eval-attribute=read"},
		{"exit code: 1", "refused by the sandbox:", "- import ", "refused by rule: the implicit default policy", "RuleModuleNotFoundError", "Add `python-import="},
		{"value: 136"},
	}
	for i, w := range want {
		for _, s := range w {
			if !strings.Contains(res[i].Content, s) {
				t.Errorf("tool result %d lacks %q:\n%s", i+1, s, res[i].Content)
			}
		}
		if markedErrors && res[i].IsError != (i < 2) {
			t.Errorf("tool result %d: is_error = %v", i+1, res[i].IsError)
		}
	}
}
