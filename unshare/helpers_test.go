package unshare_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
	_ "github.com/pysandboxes/pysandboxes/unshare"
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

// requireUnshare skips the test when the provider cannot run here, saying why.
func requireUnshare(t testing.TB) pysandboxes.Provider {
	t.Helper()
	p, ok := pysandboxes.Lookup("unshare")
	if !ok {
		t.Fatal("unshare is not registered")
	}
	if err := p.Probe(context.Background()); err != nil {
		t.Skipf("unshare unavailable: %v", err)
	}
	return p
}

// build makes a policy from rule lines.
func build(t testing.TB, lines ...string) *policy.Policy {
	t.Helper()
	b := policy.NewBuilder()
	for _, l := range lines {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("bad rule %q", l)
		}
		b.Rule(k, v)
	}
	pol, err := b.Build(context.Background(), &policy.Options{Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// sandbox makes an unshare sandbox for the rule lines.
func sandbox(t testing.TB, lines []string, opts ...pysandboxes.Option) *pysandboxes.Sandbox {
	t.Helper()
	requireUnshare(t)
	opts = append([]pysandboxes.Option{pysandboxes.WithProvider("unshare"), pysandboxes.WithLogger(quietLogger())}, opts...)
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

// sh runs a shell script in the sandbox, failing on a non-zero exit.
func sh(t testing.TB, sb *pysandboxes.Sandbox, script string, args ...string) string {
	t.Helper()
	out, err := run(t, sb, "/bin/sh", append([]string{"-c", script, "sh"}, args...)...)
	if err != nil {
		t.Fatalf("sh failed: %v\n%s", err, out)
	}
	return out
}

// py runs Python code in the sandbox (isolated mode, so the host's environment
// and user site do not matter) and returns its output, failing on a non-zero exit.
func py(t testing.TB, sb *pysandboxes.Sandbox, code string, args ...string) string {
	t.Helper()
	out, err := run(t, sb, python(t), append([]string{"-I", "-c", code}, args...)...)
	if err != nil {
		t.Fatalf("python failed: %v\n%s", err, out)
	}
	return out
}

// tryPrelude is Python code whose attempt prints "label OK <result>" or the errno
// name of the failure of a function call.
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

// tempDir makes a temporary directory that every user can reach (the sandbox's
// root may stand for another user than the test's).
func tempDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	return dir
}

func itoa(i int) string { return strconv.Itoa(i) }
