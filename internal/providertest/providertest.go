// Package providertest is test support for the OS providers' own tests (landlock,
// unshare, bwrap, firejail): it makes policies and sandboxes for a provider named
// by the caller, runs commands and Python code in them, and builds the test
// network the network tests send their traffic to. Only tests import it.
package providertest

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
	"github.com/pysandboxes/pysandboxes/policy"
)

// Python returns the real interpreter (never the python3 found on PATH, which
// may be a slow shell shim), skipping the test without one.
func Python(t testing.TB) string {
	t.Helper()
	p, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		t.Skip("no /usr/bin/python3")
	}
	return p
}

// SkipExamplesUnavailable is for a provider package's TestMain, before m.Run:
// when the provider name cannot run here, its examples (which cannot skip
// themselves, and whose output would be the refusal) are left out through
// -test.skip, saying why on stderr. An explicit -test.skip is kept as it is.
func SkipExamplesUnavailable(name string) {
	if !flag.Parsed() {
		flag.Parse()
	}
	p, ok := pysandboxes.Lookup(name)
	if !ok {
		return // the tests fail, naming it
	}
	err := p.Probe(context.Background())
	if f := flag.Lookup("test.skip"); err == nil || f == nil || f.Value.String() != "" {
		return
	}
	fmt.Fprintf(os.Stderr, "%s: the examples are skipped: %s unavailable: %v\n", name, name, err)
	flag.Set("test.skip", "^Example")
}

// QuietLogger is a logger that drops everything.
func QuietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Require returns the registered provider name, skipping the test when it cannot
// run here (saying why) and failing it when no such provider is registered.
func Require(t testing.TB, name string) pysandboxes.Provider {
	t.Helper()
	p, ok := pysandboxes.Lookup(name)
	if !ok {
		t.Fatal(name + " is not registered")
	}
	if err := p.Probe(context.Background()); err != nil {
		t.Skipf("%s unavailable: %v", name, err)
	}
	return p
}

// RequireSeccomp skips a test that asserts a denial made by the seccomp filter.
func RequireSeccomp(t testing.TB) {
	t.Helper()
	if err := seccomp.Available(); err != nil {
		t.Skipf("seccomp unavailable: %v", err)
	}
}

// Build makes a policy from rule lines ("key=value"), with PATH=/usr/bin:/bin as
// the environment it is built in.
func Build(t testing.TB, lines ...string) *policy.Policy {
	t.Helper()
	pol, err := BuildErr(lines...)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// BuildErr is Build returning the error.
func BuildErr(lines ...string) (*policy.Policy, error) {
	b := policy.NewBuilder()
	for _, l := range lines {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return nil, fmt.Errorf("bad rule %q", l)
		}
		b.Rule(k, v)
	}
	return b.Build(context.Background(), &policy.Options{Env: []string{"PATH=/usr/bin:/bin"}})
}

// Sandbox makes a sandbox of the provider name for the rule lines (skipping the
// test when the provider cannot run here), with a quiet logger and then opts.
func Sandbox(t testing.TB, name string, lines []string, opts ...pysandboxes.Option) *pysandboxes.Sandbox {
	t.Helper()
	Require(t, name)
	opts = append([]pysandboxes.Option{pysandboxes.WithProvider(name), pysandboxes.WithLogger(QuietLogger()),
		pysandboxes.AcceptUnenforced(Accepted(name))}, opts...)
	sb, err := pysandboxes.New(context.Background(), Build(t, lines...), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// New makes a sandbox of the provider name for the rule lines, with a quiet
// logger, accepting what the shared tests accept (Accepted), and returns New's
// error: for the tests of policies a provider must refuse.
func New(t testing.TB, name string, lines ...string) (*pysandboxes.Sandbox, error) {
	t.Helper()
	return pysandboxes.New(context.Background(), Build(t, lines...), pysandboxes.WithProvider(name),
		pysandboxes.WithLogger(QuietLogger()), pysandboxes.AcceptUnenforced(Accepted(name)))
}

// Logs collects what a logger writes, for the tests that read a sandbox's log
// while its goroutines may still write.
type Logs struct {
	mu   sync.Mutex
	text []byte
}

// Write appends p.
func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.text = append(l.text, p...)
	l.mu.Unlock()
	return len(p), nil
}

// String returns what was written so far.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.text)
}

// DebugLogger returns a logger writing every record (debug ones too) as text
// to l.
func (l *Logs) DebugLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Unclaimed are the capabilities a provider never enforces that its shared
// tests accept (they test something else): Landlock does not hide names and
// metadata of unexposed paths, nor (therefore) ignored ones; firejail shows the
// names of the host's top directories.
var Unclaimed = map[string]pysandboxes.Capability{
	"landlock": pysandboxes.CapFilesMeta | pysandboxes.CapHide,
	"firejail": pysandboxes.CapFilesMeta,
}

// LandlockNetCaps are the capabilities the landlock provider needs seccomp for.
const LandlockNetCaps = pysandboxes.CapTCPPorts | pysandboxes.CapUDPDeny | pysandboxes.CapRawSockets |
	pysandboxes.CapUnixSockets | pysandboxes.CapSeccomp

// Accepted is what the shared tests of the provider name accept as not
// enforced: Unclaimed, and for landlock LandlockNetCaps when seccomp is
// unavailable (CGO_ENABLED=0), so that its file tests still run.
func Accepted(name string) pysandboxes.Capability {
	c := Unclaimed[name]
	if name == "landlock" && seccomp.Available() != nil {
		c |= LandlockNetCaps
	}
	return c
}

// Run runs a command in the sandbox and returns its combined output and error.
func Run(t testing.TB, sb *pysandboxes.Sandbox, name string, args ...string) (string, error) {
	t.Helper()
	cmd := sb.Command(context.Background(), name, args...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Sh runs a shell script in the sandbox, failing on a non-zero exit.
func Sh(t testing.TB, sb *pysandboxes.Sandbox, script string, args ...string) string {
	t.Helper()
	out, err := Run(t, sb, "/bin/sh", append([]string{"-c", script, "sh"}, args...)...)
	if err != nil {
		t.Fatalf("sh failed: %v\n%s", err, out)
	}
	return out
}

// Py runs Python code in the sandbox (isolated mode, so the host's environment
// and user site do not matter) and returns its output, failing on a non-zero
// exit.
func Py(t testing.TB, sb *pysandboxes.Sandbox, code string, args ...string) string {
	t.Helper()
	out, err := Run(t, sb, Python(t), append([]string{"-I", "-c", code}, args...)...)
	if err != nil {
		t.Fatalf("python failed: %v\n%s", err, out)
	}
	return out
}

// TryPrelude is Python code whose attempt(label, f) prints "label OK <result>" or
// the errno name of the failure of f().
const TryPrelude = `import errno, os, socket, sys
def attempt(label, f):
    try:
        r = f()
        print(label, "OK", r)
    except OSError as e:
        print(label, errno.errorcode.get(e.errno, e.errno))
`

// ExpectLine asserts that the output holds the line want.
func ExpectLine(t testing.TB, out, want string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == want {
			return
		}
	}
	t.Errorf("output lacks %q:\n%s", want, out)
}

// ExpectWriteDenied checks that the output has the line "name EACCES" or "name
// EROFS": a write refused by a ruleset, or by a read-only mount of the program's
// view of the host.
func ExpectWriteDenied(t testing.TB, out, name string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l == name+" EACCES" || l == name+" EROFS" {
			return
		}
	}
	t.Errorf("output lacks %q or %q:\n%s", name+" EACCES", name+" EROFS", out)
}

// ExpectOneOf checks that the output has one of the lines name+" "+outcome.
func ExpectOneOf(t testing.TB, out, name string, outcomes ...string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		for _, o := range outcomes {
			if l == name+" "+o {
				return
			}
		}
	}
	t.Errorf("output lacks %q with one of %q:\n%s", name, outcomes, out)
}

// WriteFile writes content to path, making its directories.
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TempDir makes a temporary directory that every user can reach (the sandbox's
// root may stand for another user than the test's).
func TempDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	return dir
}

// Settled calls f until it returns want, for up to 10 seconds, and returns its
// last answer. Host-wide counts (the host's mounts, the egress stacks running)
// also move with the tests of other packages that `go test ./...` runs at the
// same time, for as long as those tests run; what a sandbox leaked stays.
func Settled[T comparable](want T, f func() T) T {
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := f()
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// HostMounts returns the mounts of this process's mount namespace (the host's)
// that a provider could leave behind: named network namespaces of the network
// filter (/run/netns/pysandboxes-*) and anything under the temporary directory,
// one mount point per line, sorted. (The tests of other packages running at the
// same time make mounts of their own elsewhere.)
func HostMounts(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (strings.Contains(f[4], "/pysandboxes-") || Within(f[4], os.TempDir())) {
			points = append(points, f[4])
		}
	}
	slices.Sort(points)
	return strings.Join(points, "\n")
}

// NewMounts returns the mounts of HostMounts that were not in before (an
// earlier HostMounts), one per line: what was left behind since. (A mount that
// went away belongs to a test of another package that ended meanwhile.)
func NewMounts(t testing.TB, before string) string {
	t.Helper()
	had := strings.Split(before, "\n")
	var left []string
	for _, m := range strings.Split(HostMounts(t), "\n") {
		if m != "" && !slices.Contains(had, m) {
			left = append(left, m)
		}
	}
	return strings.Join(left, "\n")
}

// Within reports whether path is dir or lies beneath it.
func Within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}
