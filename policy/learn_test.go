package policy

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/learn")

// learnEnv is a small world for one learning test: a project directory (the current
// directory), a home directory, a temporary directory, a virtual environment, a
// hosts file and a host environment.
type learnEnv struct {
	t                          testing.TB
	root, dir, home, tmp, venv string
	hosts                      string
	env                        []string
	now                        time.Time
	since                      time.Time // LearnOptions.Since
}

func newLearnEnv(t testing.TB) *learnEnv {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &learnEnv{
		t:    t,
		root: root,
		dir:  filepath.Join(root, "proj"),
		home: filepath.Join(root, "home"),
		tmp:  filepath.Join(root, "tmp"),
		venv: filepath.Join(root, "venv"),
		now:  time.Date(2026, 10, 7, 16, 48, 0, 0, time.UTC),
	}
	for _, d := range []string{e.dir, e.home, e.tmp, e.venv} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.hosts = filepath.Join(root, "hosts")
	e.writeAbs(e.hosts, "127.0.0.1 localhost\n::1 ip6-localhost ip6-loopback\n192.0.2.50 api.example.test\n192.0.2.60 db.example.test\n", 0o644)
	e.env = []string{
		"HOME=" + e.home,
		"TMPDIR=" + e.tmp,
		"VIRTUAL_ENV=" + e.venv,
		"PORT=8080",
		"API_TOKEN=secret",
		"LANG=C.UTF-8",
		"DB_HOST=db.example.test",
	}
	return e
}

func (e *learnEnv) opts() LearnOptions {
	return LearnOptions{
		Now:       e.now,
		Since:     e.since,
		Dir:       e.dir,
		Home:      e.home,
		Env:       e.env,
		HostsFile: e.hosts,
		Resolver:  offlineResolver(),
		Logger:    slog.New(slog.DiscardHandler),
	}
}

func (e *learnEnv) loadOpts() *Options {
	return &Options{
		Env:       e.env,
		Dir:       e.dir,
		Home:      e.home,
		HostsFile: e.hosts,
		Resolver:  offlineResolver(),
		Logger:    slog.New(slog.DiscardHandler),
	}
}

// mkdir creates directories relative to the root.
func (e *learnEnv) mkdir(rels ...string) {
	e.t.Helper()
	for _, r := range rels {
		if err := os.MkdirAll(filepath.Join(e.root, r), 0o755); err != nil {
			e.t.Fatal(err)
		}
	}
}

// abs returns the absolute path of a path relative to the root.
func (e *learnEnv) abs(rel string) string { return filepath.Join(e.root, rel) }

func (e *learnEnv) writeAbs(path, content string, perm os.FileMode) {
	e.t.Helper()
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		e.t.Fatal(err)
	}
}

func (e *learnEnv) read(path string) string {
	e.t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// learn runs Learn on the rule file proj/.py-sandboxes.
func (e *learnEnv) learn(obs Observations) (*LearnResult, error) {
	return Learn(filepath.Join(e.dir, DefaultName), obs, e.opts())
}

// mustLoad loads the rule file strictly (no learning request) and fails on error.
func (e *learnEnv) mustLoad(path string) *Policy {
	e.t.Helper()
	p, err := Load(context.Background(), path, e.loadOpts())
	if err != nil {
		e.t.Fatalf("Load %s: %v", path, err)
	}
	return p
}

// ls lists the names in a directory, sorted.
func (e *learnEnv) ls(dir string) []string {
	e.t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, d := range ents {
		out = append(out, d.Name())
	}
	return out
}

// appObservations are what a small app is seen doing: env reads, files in ./data
// read and ./out written, under ~, $TMPDIR and $VIRTUAL_ENV, a TCP connect to a name
// resolved through DNS, a connect to a bare address, a port held in PORT, a bind on
// 0.0.0.0, imports of json/os/subprocess/requests/asyncore, and API calls covering
// all of threads and part of process-exec.
func (e *learnEnv) appObservations() Observations {
	e.mkdir("proj/data/sub", "proj/out", "home/.cache/app", "tmp/work",
		"venv/lib/python3.11/site-packages/requests", "python/lib/python3.11")
	return Observations{
		Env: []string{"PORT", "LANG", "API_TOKEN", "HOME", "PORT", "DB_HOST"},
		Files: []FileAccess{
			{Path: "data/a.csv"},
			{Path: e.abs("proj/data/sub/b.csv")},
			{Path: e.abs("proj/out/report.txt"), Write: true},
			{Path: e.abs("proj/out/previous.txt")},
			{Path: e.abs("home/.cache/app/cache.json")},
			{Path: e.abs("tmp/work/scratch"), Write: true},
			{Path: e.abs("venv/lib/python3.11/site-packages/requests/__init__.py")},
			{Path: e.abs("python/lib/python3.11/os.py")},
			{Path: "/proc/self/status"},
			{Path: "/dev/null", Write: true},
		},
		Net: []NetAccess{
			{Proto: TCP, Dir: Out, IP: netip.MustParseAddr("192.0.2.50"), Port: 443},
			{Proto: TCP, Dir: Out, IP: netip.MustParseAddr("198.51.100.7"), Port: 5432},
			{Proto: TCP, Dir: In, IP: netip.IPv4Unspecified(), Port: 8080},
			{Proto: TCP, Dir: Out, Host: "db.example.test", IP: netip.MustParseAddr("192.0.2.60"), Port: 5432},
		},
		DNS:     []DNSAnswer{{Name: "api.example.test", Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.50")}}},
		Imports: []string{"json", "os", "subprocess", "requests", "asyncore", "os.path"},
		API:     append(APIFunctions(CatThreads), "subprocess.run", "subprocess.Popen", "_posixsubprocess.fork_exec"),
	}
}

// golden compares got with testdata/learn/<name>, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "learn", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s mismatch (-want +got), run with -update to accept:\n%s", path, diff)
	}
}

func TestLearnApp(t *testing.T) {
	e := newLearnEnv(t)
	obs := e.appObservations()
	opts := e.opts()
	opts.Skip = []string{e.abs("python")}
	path := filepath.Join(e.dir, DefaultName)

	res, err := Learn(path, obs, opts)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "app.py-sandboxes", e.read(path))

	wantAdded := []string{
		"env=API_TOKEN=${API_TOKEN}",
		"env=DB_HOST=${DB_HOST}",
		"env=HOME=${HOME}",
		"env=LANG=${LANG}",
		"env=PORT=${PORT}",
		"expose-ro=${VIRTUAL_ENV}/lib/python3.11/site-packages/requests",
		"expose-ro=./data",
		"expose-ro=~/.cache/app",
		"expose-rw=${TMPDIR:-/tmp}/work",
		"expose-rw=./out",
		"net=ALLOW|TCP|${DB_HOST}|5432|OUT",
		"net=ALLOW|TCP|0.0.0.0|${PORT}|IN",
		"net=ALLOW|TCP|198.51.100.7|5432|OUT",
		"net=ALLOW|TCP|::|${PORT}|IN",
		"net=ALLOW|TCP|api.example.test|443|OUT",
		"python-import=subprocess",
		"python-import=json, os",
		"python-import=asyncore",
		"python-import=requests",
		"python-api=ALLOW:subprocess.Popen",
		"python-api=ALLOW:subprocess.run",
		"python-api=ALLOW:_posixsubprocess.fork_exec",
		"python-api=ALLOW:threads",
	}
	if diff := cmp.Diff(wantAdded, res.Added); diff != "" {
		t.Errorf("Added (-want +got):\n%s", diff)
	}
	wantRes := &LearnResult{
		Path:    path,
		Added:   wantAdded,
		Message: "Write all learning rules in '.py-sandboxes'. Check and update this file to validate the rules.",
	}
	if diff := cmp.Diff(wantRes, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}

	// The learned file loads strictly and allows what was seen.
	p := e.mustLoad(path)
	if ok, _ := p.ImportAllowed("requests"); !ok {
		t.Error("requests not allowed after learning")
	}
	if ok, _, _ := p.APIAllowed("threading.Thread.start"); !ok {
		t.Error("threading.Thread.start not allowed after learning")
	}
	if ok, _ := p.Network().AllowedHost(TCP, "api.example.test", 443, Out); !ok {
		t.Error("api.example.test:443 not allowed after learning")
	}
	if ok, _ := p.Network().Allowed(TCP, netip.IPv6Unspecified(), 8080, In); !ok {
		t.Error("bind [::]:8080 not allowed after learning")
	}
	if x, ok := p.Exposed(e.abs("proj/out")); !ok || x.Mode != ReadWrite {
		t.Errorf("./out exposed as %v, %v; want rw", x.Mode, ok)
	}

	// A second run with the same observations adds nothing and backs nothing up.
	before := e.read(path)
	res2, err := Learn(path, obs, opts)
	if err != nil {
		t.Fatal(err)
	}
	want2 := &LearnResult{Path: path, Message: "No new rule learned: '.py-sandboxes' is unchanged."}
	if diff := cmp.Diff(want2, res2); diff != "" {
		t.Errorf("second run (-want +got):\n%s", diff)
	}
	if got := e.read(path); got != before {
		t.Errorf("second run changed the file:\n%s", cmp.Diff(before, got))
	}
	if diff := cmp.Diff([]string{".py-sandboxes", "data", "out"}, e.ls(e.dir)); diff != "" {
		t.Errorf("second run left files (-want +got):\n%s", diff)
	}
}

func TestLearnTemplateLoads(t *testing.T) {
	e := newLearnEnv(t)
	path := filepath.Join(e.dir, DefaultName)
	e.writeAbs(path, Template(), 0o644)
	p := e.mustLoad(path)
	if got, _ := p.OSSandbox(); got != "auto" {
		t.Errorf("template os-sandbox = %q, want auto", got)
	}
	if n := len(p.Rules()); n != 1 {
		t.Errorf("template has %d rules, want 1 (os-sandbox): %v", n, p.Rules())
	}
	tmpl := Template()
	for _, m := range learnMarkers {
		open, closing := "# <"+m+">\n", "# </"+m+">\n"
		i, j := strings.Index(tmpl, open), strings.Index(tmpl, closing)
		if i < 0 || j < 0 || j < i {
			t.Errorf("template lacks the paired markers of %s", m)
		}
	}
	for _, want := range []string{
		"#include \"./.local.py-sandboxes\"\n",
		"\ninclude \"~/.config/py-sandboxes/user-py-sandboxes.profile\"\n",
		"\ninclude \"/etc/py-sandboxes/global-py-sandboxes.profile\"\n",
		"\nos-sandbox=${OS_SANDBOX:-auto}\n",
		"#   ⚠ process-exec: runs code outside the patched interpreter\n",
		"#   threads: concurrency primitives\n",
	} {
		if !strings.Contains(tmpl, want) {
			t.Errorf("template lacks %q", want)
		}
	}
	// The includes of the template take effect (here the per-user profile).
	e.mkdir("home/.config/py-sandboxes")
	e.writeAbs(e.abs("home/.config/py-sandboxes/user-py-sandboxes.profile"), "python-import=json\n", 0o644)
	p = e.mustLoad(path)
	if ok, _ := p.ImportAllowed("json"); !ok {
		t.Error("the per-user profile included by the template is not loaded")
	}
}

func TestLearnNewFileEmpty(t *testing.T) {
	// A missing file is created from the template even when nothing was observed:
	// the next run is then strict.
	e := newLearnEnv(t)
	path := filepath.Join(e.dir, DefaultName)
	res, err := e.learn(Observations{})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.read(path); got != Template() {
		t.Errorf("new file is not the template:\n%s", cmp.Diff(Template(), got))
	}
	want := &LearnResult{Path: path, Message: "Write all learning rules in '.py-sandboxes'. Check and update this file to validate the rules."}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestLearnMessage(t *testing.T) {
	for _, tc := range []struct {
		name     string
		path     string // relative to the root
		existing string // "" for a new file
		want     string
	}{
		{
			name: "new file",
			path: "proj/.py-sandboxes",
			want: "Write all learning rules in '.py-sandboxes'. Check and update this file to validate the rules.",
		},
		{
			name:     "backup and learn line",
			path:     "proj/.py-sandboxes",
			existing: "learn=.py-sandboxes\n",
			want: "Write all learning rules in '.py-sandboxes'. Remove the 'learn' parameter to use the sandboxes." +
				" The old version is here '.py-sandboxes.old'. Check and update this file to validate the rules.",
		},
		{
			name:     "under home",
			path:     "home/rules",
			existing: "# nothing\n",
			want:     "Write all learning rules in '~/rules'. The old version is here '~/rules.old'. Check and update this file to validate the rules.",
		},
		{
			name:     "elsewhere",
			path:     "other/rules",
			existing: "# nothing\n",
			want:     "Write all learning rules in '{root}/other/rules'. The old version is here '{root}/other/rules.old'. Check and update this file to validate the rules.",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newLearnEnv(t)
			e.mkdir("other")
			path := e.abs(tc.path)
			if tc.existing != "" {
				e.writeAbs(path, tc.existing, 0o644)
			}
			res, err := Learn(path, Observations{Env: []string{"LANG"}}, e.opts())
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.ReplaceAll(tc.want, "{root}", e.root); res.Message != want {
				t.Errorf("message\n got %q\nwant %q", res.Message, want)
			}
		})
	}
}

func TestLearnLogsMessage(t *testing.T) {
	e := newLearnEnv(t)
	var buf bytes.Buffer
	opts := e.opts()
	opts.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	res, err := Learn(filepath.Join(e.dir, DefaultName), Observations{Env: []string{"LANG"}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); !strings.Contains(got, "level=INFO") || !strings.Contains(got, strconv.Quote(res.Message)) {
		t.Errorf("log %q lacks the message %q at INFO", got, res.Message)
	}
}

func TestLearnLocked(t *testing.T) {
	for _, tc := range []struct {
		name  string
		main  string
		local string // content of proj/.local-profile, included by main when set
	}{
		{name: "in the file", main: "python-import=json\nlearn=false\n"},
		{name: "in an included file", main: "include \"local-profile\"\n", local: "learn=false\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newLearnEnv(t)
			path := filepath.Join(e.dir, DefaultName)
			e.writeAbs(path, tc.main, 0o644)
			if tc.local != "" {
				e.writeAbs(filepath.Join(e.dir, "local-profile"), tc.local, 0o644)
			}
			_, err := e.learn(Observations{Imports: []string{"csv"}})
			if !errors.Is(err, ErrLocked) {
				t.Fatalf("Learn on a locked file: err = %v, want ErrLocked", err)
			}
			if got := e.read(path); got != tc.main {
				t.Errorf("locked file changed: %q", got)
			}
			if diff := cmp.Diff([]string{".py-sandboxes"}, filterNames(e.ls(e.dir), ".py-sandboxes")); diff != "" {
				t.Errorf("files written next to a locked file (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("missing file locked by the global profile chain", func(t *testing.T) {
		e := newLearnEnv(t)
		e.mkdir("home/.config/py-sandboxes")
		e.writeAbs(e.abs("home/.config/py-sandboxes/user-py-sandboxes.profile"), "learn=false\n", 0o644)
		_, err := e.learn(Observations{})
		if !errors.Is(err, ErrLocked) {
			t.Fatalf("err = %v, want ErrLocked", err)
		}
		if _, err := os.Lstat(filepath.Join(e.dir, DefaultName)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a rule file was created: %v", err)
		}
	})
	t.Run("lockedLine", func(t *testing.T) {
		for text, want := range map[string]string{
			"a=b\nlearn=false\n":       "learn=false",
			"learn = false\n":          "",
			"learn=FALSE  # locked\n":  "learn=FALSE",
			"# learn=false\nlearn=x\n": "",
		} {
			if got := lockedLine(text); got != want {
				t.Errorf("lockedLine(%q) = %q, want %q", text, got, want)
			}
		}
	})
}

// filterNames keeps the names starting with prefix.
func filterNames(names []string, prefix string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

func TestLearnFailsClosed(t *testing.T) {
	// A merged file that does not load is not written.
	e := newLearnEnv(t)
	path := filepath.Join(e.dir, DefaultName)
	orig := "eval-timeout=2s\n"
	e.writeAbs(path, orig, 0o644)
	// An invalid eval line proposed by the guard makes the merged file invalid.
	_, err := e.learn(Observations{Eval: []string{"eval-syntax=lop"}})
	var ce ConfigErrors
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want the load errors", err)
	}
	if got := e.read(path); got != orig {
		t.Errorf("file changed: %q", got)
	}
	if diff := cmp.Diff([]string{".py-sandboxes"}, filterNames(e.ls(e.dir), ".py-sandboxes")); diff != "" {
		t.Errorf("files written (-want +got):\n%s", diff)
	}

	// An existing file that does not load is not merged into.
	e.writeAbs(path, "bogus line\n", 0o644)
	if _, err := e.learn(Observations{Env: []string{"LANG"}}); err == nil {
		t.Fatal("Learn merged into a broken file")
	}
}
