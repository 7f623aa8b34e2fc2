package firejail_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	_ "github.com/pysandboxes/pysandboxes/firejail"
	"github.com/pysandboxes/pysandboxes/policy"
)

// python is the real interpreter (never the python3 found on PATH, which may be a
// slow shell shim).
func python(t testing.TB) string {
	t.Helper()
	p, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		t.Skip("no /usr/bin/python3")
	}
	return p
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// requireFirejail skips the test when bwrap cannot run here.
func requireFirejail(t testing.TB) pysandboxes.Provider {
	t.Helper()
	p, ok := pysandboxes.Lookup("firejail")
	if !ok {
		t.Fatal("firejail is not registered")
	}
	if err := p.Probe(context.Background()); err != nil {
		t.Skipf("firejail unavailable: %v", err)
	}
	return p
}

// build makes a policy from rule lines.
func build(t testing.TB, lines ...string) *policy.Policy {
	t.Helper()
	pol, err := buildErr(lines...)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

func buildErr(lines ...string) (*policy.Policy, error) {
	b := policy.NewBuilder()
	for _, l := range lines {
		k, v, _ := strings.Cut(l, "=")
		b.Rule(k, v)
	}
	return b.Build(context.Background(), &policy.Options{Env: []string{"PATH=/usr/bin:/bin"}})
}

// sandbox makes a firejail sandbox for the rule lines.
func sandbox(t testing.TB, lines []string, opts ...pysandboxes.Option) *pysandboxes.Sandbox {
	t.Helper()
	requireFirejail(t)
	opts = append([]pysandboxes.Option{pysandboxes.WithProvider("firejail"), pysandboxes.WithLogger(quietLogger())}, opts...)
	sb, err := pysandboxes.New(context.Background(), build(t, lines...), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// run runs a command in the sandbox and returns its combined output and error.
func run(t testing.TB, sb *pysandboxes.Sandbox, name string, args ...string) (string, error) {
	t.Helper()
	cmd := sb.Command(context.Background(), name, args...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// py runs Python code in the sandbox (isolated mode) and returns its output,
// failing on a non-zero exit.
func py(t testing.TB, sb *pysandboxes.Sandbox, code string, args ...string) string {
	t.Helper()
	out, err := run(t, sb, python(t), append([]string{"-I", "-c", code}, args...)...)
	if err != nil {
		t.Fatalf("python failed: %v\n%s", err, out)
	}
	return out
}

// tryPrelude is Python code whose attempt() prints "label OK result" or the errno
// name of the failure.
const tryPrelude = `import errno, os, socket, sys
def attempt(label, f):
    try:
        r = f()
        print(label, "OK", r)
    except OSError as e:
        print(label, errno.errorcode.get(e.errno, e.errno))
`

// expectLine asserts that the output holds the line want.
func expectLine(t testing.TB, out, want string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == want {
			return
		}
	}
	t.Errorf("output lacks %q:\n%s", want, out)
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// providerName is the provider these tests run.
const providerName = "firejail"

func requireProvider(t testing.TB) pysandboxes.Provider { return requireFirejail(t) }
