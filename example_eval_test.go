package pysandboxes_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/evalguard"
	"github.com/pysandboxes/pysandboxes/policy"
	// The providers auto chooses among register themselves when imported.
)

// Model-written code is evaluated under the policy's eval profile, in a process
// of its own; a source outside the profile is refused with the rule lines that
// would allow it.
func ExampleSandbox_Eval() {
	ctx := context.Background()
	rules := "eval-syntax=arith, comprehension\neval-call=sum, range\n"
	pol, err := policy.Parse(ctx, "", []byte(rules), &policy.Options{Logger: quietLogger()})
	if err != nil {
		fmt.Println(err)
		return
	}
	sb, err := pysandboxes.New(ctx, pol, pysandboxes.WithPython("/usr/bin/python3"), pysandboxes.WithLogger(quietLogger()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Close()

	v, err := sb.Eval(ctx, "sum(x * x for x in range(n))", map[string]any{"n": 10})
	fmt.Println(v, err)

	_, err = sb.Eval(ctx, "[c for c in ().__class__.__subclasses__()]", nil)
	var rej *evalguard.RejectedError
	if errors.As(err, &rej) {
		for _, v := range rej.Violations {
			fmt.Println(v.Fix)
		}
	}
	// Output:
	// 285 <nil>
	// eval-magic=__subclasses__
	// eval-magic=__class__
}

// Statements run with Exec, which returns the names they bound. Budgets and hard
// limits interrupt an evaluation, naming the budget: here the wall clock kills a
// C call that no budget of the guard sees into.
func ExampleSandbox_Exec() {
	ctx := context.Background()
	rules := "eval-syntax=assign, arith, loop\neval-call=range, sum\neval-timeout=500ms\n"
	pol, err := policy.Parse(ctx, "", []byte(rules), &policy.Options{Logger: quietLogger()})
	if err != nil {
		fmt.Println(err)
		return
	}
	sb, err := pysandboxes.New(ctx, pol, pysandboxes.WithPython("/usr/bin/python3"), pysandboxes.WithLogger(quietLogger()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Close()

	ns, err := sb.Exec(ctx, "total = 0\nfor i in range(5):\n    total += i * i\n", nil)
	fmt.Println(ns["total"], err)

	_, err = sb.Eval(ctx, "sum(range(10**12))", nil)
	var ie *evalguard.InterruptedError
	if errors.As(err, &ie) {
		fmt.Println("interrupted:", ie.Budget)
	}
	// Output:
	// 30 <nil>
	// interrupted: eval-timeout
}
