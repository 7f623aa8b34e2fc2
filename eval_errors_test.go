package pysandboxes_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/evalguard"
	"github.com/pysandboxes/pysandboxes/transport"
)

// TestEvalRejected: a source outside the profile's sub-language is refused
// before it runs, with every violation and the rule line that allows it.
func TestEvalRejected(t *testing.T) {
	sb := evalSandbox(t, calcRules)
	_, err := sb.Eval(context.Background(), "[c for c in ().__class__.__base__.__subclasses__()]", nil)
	var re *evalguard.RejectedError
	if !errors.As(err, &re) || len(re.Violations) < 2 {
		t.Fatalf("err = %v", err)
	}
	var fixes []string
	for _, v := range re.Violations {
		fixes = append(fixes, v.Fix)
	}
	all := strings.Join(fixes, "\n")
	for _, want := range []string{"eval-syntax=comprehension", "eval-magic=__class__"} {
		if !strings.Contains(all, want) {
			t.Errorf("no fix %q among:\n%s", want, all)
		}
	}
}

// TestEvalInterruptedByTheGuard: the guard's own budgets interrupt, naming the
// rule key.
func TestEvalInterruptedByTheGuard(t *testing.T) {
	sb := evalSandbox(t, "eval-syntax=comprehension, arith\neval-call=range\neval-max-iterations=1000\neval-max-alloc=1000\n")
	ctx := context.Background()
	_, err := sb.Eval(ctx, "[0 for _ in range(10**9)]", nil)
	if ie := interrupted(t, err, "eval-max-iterations"); ie.Limit != int64(1000) {
		t.Errorf("limit %v", ie.Limit)
	}
	_, err = sb.Eval(ctx, "2 ** 80000", nil)
	var re *pysandboxes.RemoteError
	var ie *evalguard.InterruptedError
	if !errors.As(err, &ie) && !errors.As(err, &re) {
		t.Errorf("2 ** 80000 under max-alloc=1000: %v", err)
	}
}

// TestEvalDenied: refusals inside the evaluation are denials
// (errors.Is(err, ErrDenied)): the Python layer's (a file the policy does not
// expose), and the eval guard's own at run time (a dunder through getattr).
func TestEvalDenied(t *testing.T) {
	sb := evalSandbox(t, "eval-call=open, getattr\n")
	ctx := context.Background()
	_, err := sb.Eval(ctx, "open('/etc/shadow')", nil)
	var re *pysandboxes.RemoteError
	if !errors.Is(err, pysandboxes.ErrDenied) || !errors.As(err, &re) {
		t.Fatalf("open: %v", err)
	}
	if re.Qualname != "RuleFileNotFoundError" || re.Denials[0].Kind != "file" || re.Denials[0].Target != "/etc/shadow" {
		t.Errorf("open: %+v", re)
	}
	_, err = sb.Eval(ctx, "getattr((), '__class__')", nil)
	if !errors.Is(err, pysandboxes.ErrDenied) || !errors.As(err, &re) || re.Denials[0].Kind != "eval" || !strings.Contains(re.Message, "__class__") {
		t.Errorf("getattr: %v", err)
	}
	var de *evalguard.DeniedError
	if !errors.As(err, &de) || de.Target != "__class__" || de.Fix != "eval-magic=__class__" {
		t.Errorf("getattr: %#v", de)
	}
}

// TestEvalFailed: an ordinary exception comes back with its class, message and
// the traceback of the evaluated source.
func TestEvalFailed(t *testing.T) {
	sb := evalSandbox(t, "eval-syntax=arith\n")
	_, err := sb.Eval(context.Background(), "(1 +\n  1 // 0)", nil)
	var re *pysandboxes.RemoteError
	if !errors.As(err, &re) || re.Qualname != "ZeroDivisionError" || errors.Is(err, pysandboxes.ErrDenied) {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(re.Traceback, `File "<eval:default>", line 2`) || strings.Contains(re.Traceback, "zygote") {
		t.Errorf("traceback:\n%s", re.Traceback)
	}
}

// TestEvalRefusedWithoutProfile: a policy without eval-* rules refuses Eval,
// naming what to add; an undeclared profile is refused too (no fallback).
func TestEvalRefusedWithoutProfile(t *testing.T) {
	sb := evalSandbox(t, "env=A=1\n")
	_, err := sb.Eval(context.Background(), "1", nil)
	var ue *evalguard.UnknownProfileError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "eval-syntax=") {
		t.Errorf("no eval rule: %v", err)
	}
	sb = evalSandbox(t, calcRules)
	_, err = sb.Eval(context.Background(), "1", nil, pysandboxes.EvalProfile("nope"))
	if !errors.As(err, &ue) || ue.Name != "nope" {
		t.Errorf("unknown profile: %v", err)
	}
}

// TestEvalBadInput: input Go refuses, or the guard refuses, with typed errors;
// the host never crashes and the next evaluation works.
func TestEvalBadInput(t *testing.T) {
	sb := evalSandbox(t, calcRules)
	ctx := context.Background()
	var se *evalguard.SourceError
	for name, src := range map[string]string{
		"10 MB":         strings.Repeat("1+", 5<<20) + "1",
		"invalid UTF-8": "1 + '\xff'",
		"NUL byte":      "1 +\x00 1",
	} {
		if _, err := sb.Eval(ctx, src, nil); !errors.As(err, &se) {
			t.Errorf("%s: %v, want a SourceError", name, err)
		}
	}
	var rej *evalguard.RejectedError
	for name, src := range map[string]string{
		"nested parentheses": strings.Repeat("(", 10000) + "1" + strings.Repeat(")", 10000),
		"nested unary":       strings.Repeat("-", 100000) + "1",
		"nested lists":       strings.Repeat("[", 3000) + strings.Repeat("]", 3000),
		"syntax error":       "1 +",
	} {
		if _, err := sb.Eval(ctx, src, nil); !errors.As(err, &rej) {
			t.Errorf("%s: %v, want a RejectedError", name, err)
		}
	}
	var pe *transport.PickleError
	for name, names := range map[string]map[string]any{
		"a channel":      {"c": make(chan int)},
		"not identifier": {"not a name": 1},
		"a func":         {"f": func() {}},
	} {
		if _, err := sb.Eval(ctx, "1", names); !errors.As(err, &pe) {
			t.Errorf("%s: %v, want a PickleError", name, err)
		}
	}
	if v, err := sb.Eval(ctx, "1+1", nil); err != nil || v != int64(2) {
		t.Errorf("after bad input: %v, %v", v, err)
	}
}

// TestEvalForkRefusedToEvaluatedCode: the zygote forks the evaluations'
// processes, but evaluated code that reaches os.fork (here a profile that
// grants it the os module) is refused by the Python layer, naming the rule.
func TestEvalForkRefusedToEvaluatedCode(t *testing.T) {
	sb := evalSandbox(t, "python-import=os\neval-syntax=import, assign\neval-import=os\neval-attribute=fork, getpid\n")
	_, err := sb.Exec(context.Background(), "import os\npid = os.getpid()\nos.fork()\n", nil)
	var re *pysandboxes.RemoteError
	if !errors.Is(err, pysandboxes.ErrDenied) || !errors.As(err, &re) {
		t.Fatalf("os.fork: %v", err)
	}
	if re.Qualname != "RuleApiPermissionError" || re.Denials[0].Kind != "api" || re.Denials[0].Target != "os.fork" ||
		!strings.Contains(re.Message, "python-api=ALLOW:os.fork") {
		t.Errorf("os.fork: %+v", re)
	}
}
