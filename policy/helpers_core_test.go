package policy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// offlineResolver is a resolver that cannot reach any network: every lookup fails at
// once.
func offlineResolver() *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			return nil, errors.New("no network in tests")
		},
	}
}

// coreEnv is a sandbox for one core test: a current directory, a home directory, a
// hosts file, a host environment, and no network.
type coreEnv struct {
	t    testing.TB
	dir  string // current directory (Options.Dir)
	home string // Options.Home
	env  []string
	args []string
	// learn is Options.Learn.
	learn bool
}

func newCoreEnv(t testing.TB, env ...string) *coreEnv {
	t.Helper()
	root := t.TempDir()
	// Resolve the temporary directory itself, so canonical paths compare equal.
	root, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	e := &coreEnv{t: t, dir: filepath.Join(root, "work"), home: filepath.Join(root, "home"), env: env}
	for _, d := range []string{e.dir, e.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "hosts"), []byte("192.0.2.10 pinned.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if e.env == nil {
		e.env = []string{}
	}
	return e
}

func (e *coreEnv) opts() *Options {
	return &Options{
		Rules:     e.args,
		Learn:     e.learn,
		Env:       e.env,
		Dir:       e.dir,
		Home:      e.home,
		HostsFile: filepath.Join(filepath.Dir(e.dir), "hosts"),
		Resolver:  offlineResolver(),
		Logger:    slog.New(slog.DiscardHandler),
	}
}

// path returns the absolute path of rel under the current directory ("~/x" under
// the home directory).
func (e *coreEnv) path(rel string) string {
	if rest, ok := strings.CutPrefix(rel, "~/"); ok {
		return filepath.Join(e.home, rest)
	}
	if filepath.IsAbs(rel) {
		return rel
	}
	return filepath.Join(e.dir, rel)
}

// write creates a file (and its parent directories) and returns its absolute path.
func (e *coreEnv) write(rel, content string) string {
	e.t.Helper()
	p := e.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// mkdir creates directories and returns the absolute path of the first one.
func (e *coreEnv) mkdir(rels ...string) string {
	e.t.Helper()
	for _, rel := range rels {
		if err := os.MkdirAll(e.path(rel), 0o755); err != nil {
			e.t.Fatal(err)
		}
	}
	if len(rels) == 0 {
		return ""
	}
	return e.path(rels[0])
}

// parse parses text as the file .py-sandboxes of the current directory.
func (e *coreEnv) parse(text string) (*Policy, error) {
	return Parse(context.Background(), filepath.Join(e.dir, DefaultName), []byte(text), e.opts())
}

func (e *coreEnv) mustParse(text string) *Policy {
	e.t.Helper()
	p, err := e.parse(text)
	if err != nil {
		e.t.Fatalf("Parse(%q): %v", text, err)
	}
	return p
}

// load loads the file rel.
func (e *coreEnv) load(rel string) (*Policy, error) {
	return Load(context.Background(), e.path(rel), e.opts())
}

func (e *coreEnv) mustLoad(rel string) *Policy {
	e.t.Helper()
	p, err := e.load(rel)
	if err != nil {
		e.t.Fatalf("Load(%s): %v", rel, err)
	}
	return p
}

// errLines returns the problems of a failed load, one "file(line): message" each. It
// fails the test when err is not ConfigErrors.
func errLines(t testing.TB, err error) []string {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want a ConfigErrors")
	}
	var ce ConfigErrors
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not ConfigErrors", err, err)
	}
	out := make([]string, len(ce))
	for i, c := range ce {
		out[i] = c.Error()
	}
	return out
}

// wantErrs checks that text fails to parse with exactly the errors want.
func (e *coreEnv) wantErrs(text string, want ...string) {
	e.t.Helper()
	_, err := e.parse(text)
	if diff := cmp.Diff(want, errLines(e.t, err)); diff != "" {
		e.t.Errorf("Parse(%q) errors (-want +got):\n%s", text, diff)
	}
}

// refs renders the provenance of rules.
func refs(rules []Rule) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.Ref.String() + " " + r.Raw
	}
	return out
}

// withTimeout runs f and fails the test if it does not return within d (a hang).
func withTimeout(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("did not return within %v", d)
	}
}

func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithCancel(t.Context())
}
