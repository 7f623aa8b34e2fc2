package evalguard_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/pysandboxes/pysandboxes/evalguard"
	"github.com/pysandboxes/pysandboxes/policy"
)

func loadRules(text string) *policy.Policy {
	p, err := policy.Parse(context.Background(), "/project/.py-sandboxes", []byte(text),
		&policy.Options{Dir: "/project", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	return p
}

// The default profile and a named one, as the guard applies them.
func ExampleFromPolicy() {
	pol := loadRules(`eval-syntax=arith, compare
eval-call=len
eval-timeout=2s
eval-syntax:calc=arith
eval-namespace:calc=closed
`)
	def, _ := evalguard.FromPolicy(pol, "")
	calc, _ := evalguard.FromPolicy(pol, "calc")
	fmt.Println(evalguard.StateOf(pol), def.SourceRef(), def.Call.Allow, def.Timeout)
	fmt.Println(calc.SourceRef(), calc.Namespace, calc.Call.Allow, calc.Rule("eval-call", "len"))
	_, err := evalguard.FromPolicy(pol, "rows")
	fmt.Println(err)
	// Output:
	// guarded <eval:default> [len] 2s
	// <eval:calc> closed [] eval-call:calc=len
	// evalguard: unknown eval profile "rows"; declared profiles: default, calc
}

// A static verdict: every violation at once, each with the rule line that allows it.
func ExampleCheck() {
	p, _ := evalguard.FromPolicy(loadRules("eval-syntax=arith\n"), "")
	v, err := evalguard.Check(context.Background(), "/usr/bin/python3", p, "[x.upper() for x in names]", evalguard.Eval)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, x := range v.Violations {
		fmt.Println(x.Kind, x.Name, "->", x.Fix)
	}
	// Output:
	// syntax ListComp -> eval-syntax=comprehension (or, narrower: eval-syntax=ListComp)
	// syntax comprehension -> eval-syntax=comprehension
	// attribute upper -> eval-attribute=upper
}

// An exception raised by the guard in a sandboxed interpreter, back in Go.
func ExampleFromRemote() {
	err := evalguard.FromRemote(evalguard.Module, "Interrupted", "evaluation interrupted: eval-max-iterations=1000 exhausted",
		[]any{"eval-max-iterations", int64(1000), "evaluation interrupted: eval-max-iterations=1000 exhausted"})
	var ie *evalguard.InterruptedError
	if errors.As(err, &ie) {
		fmt.Println(ie.Budget, ie.Limit)
	}
	fmt.Println(evalguard.FromRemote("builtins", "ValueError", "x", nil) == nil)
	// Output:
	// eval-max-iterations 1000
	// true
}
