package landlock_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
	_ "github.com/pysandboxes/pysandboxes/landlock"
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

// requireLandlock skips the test when the kernel has no Landlock.
func requireLandlock(t testing.TB) pysandboxes.Provider {
	t.Helper()
	p, ok := pysandboxes.Lookup("landlock")
	if !ok {
		t.Fatal("landlock is not registered")
	}
	if err := p.Probe(context.Background()); err != nil {
		t.Skipf("landlock unavailable: %v", err)
	}
	return p
}

// requireSeccomp skips a test that asserts a denial made by the seccomp filter.
func requireSeccomp(t testing.TB) {
	t.Helper()
	if err := seccomp.Available(); err != nil {
		t.Skipf("seccomp unavailable: %v", err)
	}
}

// netCaps are the capabilities the landlock provider needs seccomp for: accepted
// as unenforced when seccomp is unavailable (CGO_ENABLED=0), so the file tests
// still run.
const netCaps = pysandboxes.CapTCPPorts | pysandboxes.CapUDPDeny | pysandboxes.CapRawSockets | pysandboxes.CapUnixSockets | pysandboxes.CapSeccomp

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

// sandbox makes a landlock sandbox for the rule lines.
func sandbox(t testing.TB, lines []string, opts ...pysandboxes.Option) *pysandboxes.Sandbox {
	t.Helper()
	requireLandlock(t)
	opts = append([]pysandboxes.Option{pysandboxes.WithProvider("landlock"), pysandboxes.WithLogger(quietLogger())}, opts...)
	if seccomp.Available() != nil {
		opts = append(opts, pysandboxes.AcceptUnenforced(netCaps))
	}
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

// tryOpen is Python code that prints "OK <first bytes>" or the errno name of the
// failure of a function call.
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

// netCapsIfNoSeccomp is netCaps when seccomp is unavailable, else nothing.
func netCapsIfNoSeccomp() pysandboxes.Capability {
	if seccomp.Available() != nil {
		return netCaps
	}
	return 0
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newSubprocess makes a subprocess sandbox (the supervisor without confinement).
func newSubprocess(t testing.TB) (*pysandboxes.Sandbox, error) {
	return pysandboxes.New(context.Background(), build(t), pysandboxes.WithProvider("subprocess"),
		pysandboxes.WithLogger(quietLogger()), pysandboxes.AcceptUnenforced(pysandboxes.AllCapabilities))
}
