package pysandboxes_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
)

// evalSandbox makes a landlock sandbox whose policy is rules (a .py-sandboxes
// text), for Eval.
func evalSandbox(t testing.TB, rules string, opts ...pysandboxes.Option) *pysandboxes.Sandbox {
	t.Helper()
	return evalSandboxWith(t, rules, true, opts...)
}

// evalSandboxWith is evalSandbox; stream false leaves the evaluations' output
// to its default (captured) instead of streaming it to buffers.
func evalSandboxWith(t testing.TB, rules string, stream bool, opts ...pysandboxes.Option) *pysandboxes.Sandbox {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	file := filepath.Join(t.TempDir(), ".py-sandboxes")
	if err := os.WriteFile(file, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pol, err := policy.Load(ctx, file, &policy.Options{Dir: filepath.Dir(file), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	base := []pysandboxes.Option{pysandboxes.WithProvider("landlock"), pysandboxes.WithLogger(quietLogger()), landlockMeta,
		pysandboxes.WithPython("/usr/bin/python3")}
	if stream {
		base = append(base, pysandboxes.WithCall(pysandboxes.CallConfig{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}))
	}
	sb, err := pysandboxes.New(ctx, pol, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

// calcRules is a calculator profile, plus a named profile for rows of data.
const calcRules = `eval-syntax=arith, compare
eval-timeout=2s
eval-syntax:rows=arith, compare, comprehension, subscript
eval-call:rows=len, sum, range, sorted
`

func evalProfile(name string) pysandboxes.EvalOption { return pysandboxes.EvalProfile(name) }

// limitedBuffer is a bytes.Buffer safe for the output goroutine.
type limitedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *limitedBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}
