package policy

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// learnCase runs Learn on a rule file holding before (and the files of extra,
// relative to the project directory), then checks that the result loads and
// returns the lines appended after before: the generated comments and rules,
// without the "# Add rules" header and blank lines. Paths under the test's root
// are shown as {root}.
func (e *learnEnv) learnCase(t *testing.T, before string, extra map[string]string, obs Observations) []string {
	t.Helper()
	path := filepath.Join(e.dir, DefaultName)
	e.writeAbs(path, before, 0o644)
	for name, content := range extra {
		e.writeAbs(filepath.Join(e.dir, name), content, 0o644)
	}
	if _, err := e.learn(obs); err != nil {
		t.Fatalf("Learn: %v", err)
	}
	after := e.read(path)
	e.mustLoad(path)
	tail, ok := strings.CutPrefix(after, before)
	if !ok {
		// Something in before was edited (commented out): return every line.
		tail = after
	}
	var out []string
	for l := range strings.SplitSeq(tail, "\n") {
		if l == "" || strings.HasPrefix(l, "# Add rules (") {
			continue
		}
		out = append(out, strings.ReplaceAll(l, e.root, "{root}"))
	}
	return out
}

func TestLearnPaths(t *testing.T) {
	type setup func(e *learnEnv)
	setEnv := func(kv ...string) setup {
		return func(e *learnEnv) {
			for _, s := range kv {
				k, _, _ := strings.Cut(s, "=")
				var keep []string
				for _, old := range e.env {
					if !strings.HasPrefix(old, k+"=") {
						keep = append(keep, old)
					}
				}
				e.env = keep
				if strings.Contains(s, "=") {
					e.env = append(e.env, strings.ReplaceAll(s, "{root}", e.root))
				}
			}
		}
	}
	for _, tc := range []struct {
		name   string
		setup  setup
		dirs   []string // created under the root
		before string
		files  []FileAccess // {root} replaced
		skip   []string
		want   []string
	}{
		{
			name:  "file under the current directory",
			dirs:  []string{"proj/data"},
			files: []FileAccess{{Path: "{root}/proj/data/a.csv"}},
			want:  []string{"expose-ro=./data"},
		},
		{
			name:  "relative path",
			dirs:  []string{"proj/data"},
			files: []FileAccess{{Path: "data/a.csv"}},
			want:  []string{"expose-ro=./data"},
		},
		{
			name:  "file in the current directory",
			files: []FileAccess{{Path: "{root}/proj/app.py"}},
			want:  []string{"expose-ro=."},
		},
		{
			name:  "directory access names the directory itself",
			dirs:  []string{"proj/data/sub"},
			files: []FileAccess{{Path: "{root}/proj/data/sub", Dir: true}},
			want:  []string{"expose-ro=./data/sub"},
		},
		{
			name:  "under home",
			dirs:  []string{"home/.config/app"},
			files: []FileAccess{{Path: "{root}/home/.config/app/x.toml"}},
			want:  []string{"expose-ro=~/.config/app"},
		},
		{
			name:  "home itself",
			files: []FileAccess{{Path: "{root}/home/.netrc"}},
			want:  []string{"expose-ro=~"},
		},
		{
			name:  "under TMPDIR",
			dirs:  []string{"tmp/job"},
			files: []FileAccess{{Path: "{root}/tmp/job/x", Write: true}},
			want:  []string{"expose-rw=${TMPDIR:-/tmp}/job"},
		},
		{
			name:  "TMPDIR itself",
			files: []FileAccess{{Path: "{root}/tmp/x", Write: true}},
			want:  []string{"expose-rw=${TMPDIR:-/tmp}"},
		},
		{
			name:  "TEMP when TMPDIR is unset",
			setup: setEnv("TMPDIR", "TEMP={root}/tmp"),
			dirs:  []string{"tmp/job"},
			files: []FileAccess{{Path: "{root}/tmp/job/x", Write: true}},
			want:  []string{"expose-rw=${TMPDIR:-${TEMP:-${TMP:-/tmp}}}/job"},
		},
		{
			name:  "TMP when TMPDIR and TEMP are unset",
			setup: setEnv("TMPDIR", "TMP={root}/tmp"),
			dirs:  []string{"tmp/job"},
			files: []FileAccess{{Path: "{root}/tmp/job/x", Write: true}},
			want:  []string{"expose-rw=${TMPDIR:-${TEMP:-${TMP:-/tmp}}}/job"},
		},
		{
			name:  "VIRTUAL_ENV",
			dirs:  []string{"venv/lib/python3.12/site-packages/httpx"},
			files: []FileAccess{{Path: "{root}/venv/lib/python3.12/site-packages/httpx/_api.py"}},
			want:  []string{"expose-ro=${VIRTUAL_ENV}/lib/python3.12/site-packages/httpx"},
		},
		{
			name:  "VIRTUAL_ENV inside the current directory: the deeper root wins",
			setup: setEnv("VIRTUAL_ENV={root}/proj/.venv"),
			dirs:  []string{"proj/.venv/lib"},
			files: []FileAccess{{Path: "{root}/proj/.venv/lib/x.py"}},
			want:  []string{"expose-ro=${VIRTUAL_ENV}/lib"},
		},
		{
			name:  "HF_HOME and TORCH_HOME",
			setup: setEnv("HF_HOME={root}/hf", "TORCH_HOME={root}/torch"),
			dirs:  []string{"hf/hub", "torch/hub"},
			files: []FileAccess{{Path: "{root}/hf/hub/model.bin"}, {Path: "{root}/torch/hub/w.pt", Write: true}},
			want:  []string{"expose-ro=${HF_HOME}/hub", "expose-rw=${TORCH_HOME}/hub"},
		},
		{
			name:  "a tool variable holding a relative path is not used",
			setup: setEnv("NLTK_DATA=nltk"),
			dirs:  []string{"proj/nltk"},
			files: []FileAccess{{Path: "{root}/proj/nltk/x"}},
			want:  []string{"expose-ro=./nltk"},
		},
		{
			name:  "current directory under home: ./ wins",
			dirs:  []string{"proj/data"},
			setup: func(e *learnEnv) { e.home = e.root },
			files: []FileAccess{{Path: "{root}/proj/data/x"}},
			want:  []string{"expose-ro=./data"},
		},
		{
			name:  "elsewhere: absolute",
			dirs:  []string{"other/lib"},
			files: []FileAccess{{Path: "{root}/other/lib/x"}},
			want:  []string{"expose-ro={root}/other/lib"},
		},
		{
			name: "through a symbolic link into the current directory",
			dirs: []string{"proj/data"},
			setup: func(e *learnEnv) {
				if err := os.Symlink(filepath.Join(e.root, "proj/data"), filepath.Join(e.root, "link")); err != nil {
					e.t.Fatal(err)
				}
			},
			files: []FileAccess{{Path: "{root}/link/a.csv"}},
			want:  []string{"expose-ro=./data"},
		},
		{
			name:  "write wins",
			dirs:  []string{"proj/out"},
			files: []FileAccess{{Path: "{root}/proj/out/a"}, {Path: "{root}/proj/out/b", Write: true}, {Path: "{root}/proj/out/c"}},
			want:  []string{"expose-rw=./out"},
		},
		{
			name: "children of a learned directory with the same or a weaker mode collapse",
			dirs: []string{"proj/a/b/c", "proj/w/r"},
			files: []FileAccess{
				{Path: "{root}/proj/a/b/c/x"}, {Path: "{root}/proj/a/x"}, {Path: "{root}/proj/a/b/x"},
				{Path: "{root}/proj/w/r/x"}, {Path: "{root}/proj/w/x", Write: true},
			},
			want: []string{"expose-ro=./a", "expose-rw=./w"},
		},
		{
			name:  "a child written under a learned read-only directory is kept",
			dirs:  []string{"proj/a/out"},
			files: []FileAccess{{Path: "{root}/proj/a/x"}, {Path: "{root}/proj/a/out/x", Write: true}},
			want:  []string{"expose-ro=./a", "expose-rw=./a/out"},
		},
		{
			name:   "covered by the profile",
			dirs:   []string{"proj/data/sub", "proj/out/sub"},
			before: "expose-ro=./data\nexpose-rw=./out\n",
			files: []FileAccess{
				{Path: "{root}/proj/data/sub/x"}, {Path: "{root}/proj/data/y"},
				{Path: "{root}/proj/out/sub/x", Write: true}, {Path: "{root}/proj/out/y"},
			},
		},
		{
			name:   "a write under a read-only directory of the profile",
			dirs:   []string{"proj/data/cache"},
			before: "expose-ro=./data\n",
			files:  []FileAccess{{Path: "{root}/proj/data/cache/x", Write: true}},
			want:   []string{"expose-rw=./data/cache"},
		},
		{
			name:   "a read under a deeper read-write rule of the profile",
			dirs:   []string{"proj/data/cache"},
			before: "expose-rw=./data/cache\n",
			files:  []FileAccess{{Path: "{root}/proj/data/cache/x"}},
		},
		{
			name:  "skipped prefixes",
			dirs:  []string{"python/lib/python3.12", "layer/pysandboxes"},
			skip:  []string{"{root}/python", "{root}/layer"},
			files: []FileAccess{{Path: "{root}/python/lib/python3.12/os.py"}, {Path: "{root}/layer/pysandboxes/guard.py"}, {Path: "{root}/python", Dir: true}},
		},
		{
			name:  "a skip prefix matches whole components",
			dirs:  []string{"python2/lib"},
			skip:  []string{"{root}/python"},
			files: []FileAccess{{Path: "{root}/python2/lib/x"}},
			want:  []string{"expose-ro={root}/python2/lib"},
		},
		{
			name: "never /proc, /sys, nor the usual devices",
			files: []FileAccess{
				{Path: "/proc/self/status"}, {Path: "/proc", Dir: true}, {Path: "/proc/1/fd/3", Write: true},
				{Path: "/sys/fs/cgroup/cpu.max"}, {Path: "/dev/null", Write: true}, {Path: "/dev/urandom"},
				{Path: "/dev/pts/0", Write: true}, {Path: "/dev/fd/1", Write: true}, {Path: "/dev", Dir: true},
			},
		},
		{
			name: "other devices: a comment, no rule; /dev/shm as a whole",
			files: []FileAccess{{Path: "/dev/shm/sem.x", Write: true}, {Path: "/dev/shm/sem.y", Write: true},
				{Path: "/dev/shm/gone/x"}, {Path: "/dev/kvm", Write: true}},
			want: []string{
				"expose-rw=/dev/shm",
				"# not learned: /dev/kvm (device files are never learned: add a rule by hand if the program needs it)",
			},
		},
		{
			name:  "a program run and what it needs: under a skipped prefix too",
			dirs:  []string{"usr/bin", "usr/lib"},
			files: []FileAccess{{Path: "{root}/usr/bin/echo", Exec: true}, {Path: "{root}/usr/lib/libc.so", Exec: true}, {Path: "{root}/usr/lib/other.py"}},
			skip:  []string{"{root}/usr"},
			want:  []string{"expose-ro={root}/usr/bin", "expose-ro={root}/usr/lib"},
		},
		{
			name:  "never the root directory",
			files: []FileAccess{{Path: "/.dockerenv"}},
			want:  []string{"# not learned: / (the whole file system: write a narrower rule by hand)"},
		},
		{
			name:  "a directory that no longer exists",
			files: []FileAccess{{Path: "{root}/tmp/tmpab12/x", Write: true}, {Path: "{root}/gone/x"}},
			want: []string{
				"# not learned: ${TMPDIR:-/tmp}/tmpab12 (the directory no longer exists)",
				"# not learned: {root}/gone (the directory no longer exists)",
			},
		},
		{
			name:  "paths a rule cannot spell",
			dirs:  []string{"proj/a#b", "proj/c,d", "proj/${X}"},
			files: []FileAccess{{Path: "{root}/proj/a#b/x"}, {Path: "{root}/proj/c,d/x"}, {Path: "{root}/proj/${X}/x"}, {Path: "{root}/proj/e\nf/x"}, {Path: ""}, {Path: "{root}/proj/\x00"}},
			want: []string{
				"# not learned: ./a#b (a rule value cannot hold '#', ',', \"${\" or surrounding spaces: expose a parent by hand)",
				"# not learned: ./c,d (a rule value cannot hold '#', ',', \"${\" or surrounding spaces: expose a parent by hand)",
				"# not learned: {root}/proj/${X} (a rule value cannot hold '#', ',', \"${\" or surrounding spaces: expose a parent by hand)",
			},
		},
		{
			name:   "hidden by an ignore= rule",
			dirs:   []string{"proj/secrets"},
			before: "ignore=.env\nignore=secrets\n",
			files:  []FileAccess{{Path: "{root}/proj/.env"}, {Path: "{root}/proj/secrets/key.pem"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newLearnEnv(t)
			if tc.setup != nil {
				tc.setup(e)
			}
			e.mkdir(tc.dirs...)
			obs := Observations{}
			for _, f := range tc.files {
				f.Path = strings.ReplaceAll(f.Path, "{root}", e.root)
				obs.Files = append(obs.Files, f)
			}
			var skip []string
			for _, s := range tc.skip {
				skip = append(skip, strings.ReplaceAll(s, "{root}", e.root))
			}
			path := filepath.Join(e.dir, DefaultName)
			e.writeAbs(path, tc.before, 0o644)
			opts := e.opts()
			opts.Skip = skip
			res, err := Learn(path, obs, opts)
			if err != nil {
				t.Fatal(err)
			}
			e.mustLoad(path)
			tail := strings.TrimPrefix(e.read(path), tc.before)
			var got []string
			for l := range strings.SplitSeq(tail, "\n") {
				if l != "" && !strings.HasPrefix(l, "# Add rules (") {
					got = append(got, strings.ReplaceAll(l, e.root, "{root}"))
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if len(tc.want) == 0 && res.Backup != "" {
				t.Errorf("nothing learned, but a backup was made: %s", res.Backup)
			}
		})
	}
}

// TestLearnPrivateTmp: a rule for the temporary directory covers what the run made
// there, not what was there before (a provider may give a private one).
func TestLearnPrivateTmp(t *testing.T) {
	e := newLearnEnv(t)
	e.mkdir("tmp/data", "tmp/out", "tmp/proj")
	if _, known := bornSince(e.abs("tmp/data"), time.Now()); !known {
		t.Skip("the file system here gives no birth time")
	}
	time.Sleep(50 * time.Millisecond)
	e.since = time.Now()
	e.mkdir("tmp/pytest-of-me/test0")
	e.dir = e.abs("tmp/proj")
	obs := Observations{Files: []FileAccess{
		{Path: e.abs("tmp"), Write: true, Dir: true}, // mkdir tmp/pytest-of-me
		{Path: e.abs("tmp/pytest-of-me/test0/x.json"), Write: true},
		{Path: e.abs("tmp/data/a.csv")},             // there before: read
		{Path: e.abs("tmp/out/b.csv"), Write: true}, // there before: written
		{Path: e.abs("tmp/proj/test_a.py")},         // the working directory
	}}
	got := e.learnCase(t, "", nil, obs)
	want := []string{"expose-ro=${TMPDIR:-/tmp}/data", "expose-ro=.", "expose-rw=${TMPDIR:-/tmp}", "expose-rw=${TMPDIR:-/tmp}/out"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// The same when the profile exposes the temporary directory already; a
	// second run learns nothing more.
	e = newLearnEnv(t)
	e.mkdir("tmp/data")
	e.since = time.Now().Add(time.Second)
	got = e.learnCase(t, "expose-rw=${TMPDIR:-/tmp}\n", nil, Observations{Files: []FileAccess{{Path: e.abs("tmp/data/a.csv")}}})
	if diff := cmp.Diff([]string{"expose-ro=${TMPDIR:-/tmp}/data"}, got); diff != "" {
		t.Errorf("profile exposing the temporary directory (-want +got):\n%s", diff)
	}
	res, err := e.learn(Observations{Files: []FileAccess{{Path: e.abs("tmp/data/a.csv")}}})
	if err != nil || len(res.Added) != 0 {
		t.Errorf("second run: %v, learned %q", err, res.Added)
	}
}

// TestLearnPrivateTmpWorkDir: the working directory, in the temporary
// directory, is never taken for one the run made, even when it was made just
// before the run (within the file system clock's lag): it gets its rule, and
// so does its parent when the run used it.
func TestLearnPrivateTmpWorkDir(t *testing.T) {
	e := newLearnEnv(t)
	e.mkdir("tmp/ci/proj", "tmp/made")
	if _, known := bornSince(e.abs("tmp/ci"), time.Now()); !known {
		t.Skip("the file system here gives no birth time")
	}
	// The run starts before the directories' birth times, as far as the
	// clocks can tell.
	e.since = time.Now().Add(-time.Second)
	e.dir = e.abs("tmp/ci/proj")
	obs := Observations{Files: []FileAccess{
		{Path: e.abs("tmp"), Write: true, Dir: true},
		{Path: e.abs("tmp/made/x.json"), Write: true}, // made by the run
		{Path: e.abs("tmp/ci/proj/test_a.py")},        // the working directory
		{Path: e.abs("tmp/ci/other.txt")},             // beside it
	}}
	got := e.learnCase(t, "", nil, obs)
	want := []string{"expose-ro=${TMPDIR:-/tmp}/ci", "expose-rw=${TMPDIR:-/tmp}"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	got = e.learnCase(t, "", nil, Observations{Files: []FileAccess{
		{Path: e.abs("tmp"), Write: true, Dir: true},
		{Path: e.abs("tmp/ci/proj/test_a.py")},
	}})
	want = []string{"expose-ro=.", "expose-rw=${TMPDIR:-/tmp}"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the working directory alone (-want +got):\n%s", diff)
	}
}

func TestLearnPathsUnderSystemTmp(t *testing.T) {
	// Without TMPDIR, TEMP or TMP the temporary directory is /tmp.
	d, err := os.MkdirTemp("/tmp", "learn-test-")
	if err != nil {
		t.Skip("no /tmp:", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	d, err = filepath.EvalSymlinks(d)
	if err != nil || !strings.HasPrefix(d, "/tmp/") {
		t.Skip("/tmp is a link here")
	}
	e := newLearnEnv(t)
	e.env = []string{"HOME=" + e.home}
	got := e.learnCase(t, "", nil, Observations{Files: []FileAccess{{Path: d + "/x", Write: true}}})
	want := []string{"expose-rw=${TMPDIR:-/tmp}/" + filepath.Base(d)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// With TMPDIR elsewhere, /tmp is written absolute.
	e = newLearnEnv(t)
	got = e.learnCase(t, "", nil, Observations{Files: []FileAccess{{Path: d + "/x", Write: true}}})
	if diff := cmp.Diff([]string{"expose-rw=" + d}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestLearnSupersedesReadOnlyDirectory(t *testing.T) {
	e := newLearnEnv(t)
	e.mkdir("proj/out")
	path := filepath.Join(e.dir, DefaultName)
	before := "python-import=json\nexpose-ro=./out  # reports\n"
	e.writeAbs(path, before, 0o644)
	res, err := e.learn(Observations{Files: []FileAccess{{Path: e.abs("proj/out/r.txt"), Write: true}}})
	if err != nil {
		t.Fatal(err)
	}
	want := "python-import=json\n" +
		"# Previous rule superseded by learning on 2026/10/07 at 16:48:\n" +
		"# expose-ro=./out  # reports\n" +
		"\n" +
		"# Add rules (2026/10/07 at 16:48)\n" +
		"expose-rw=./out\n" +
		"\n"
	if diff := cmp.Diff(want, e.read(path)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"expose-rw=./out"}, res.Added); diff != "" {
		t.Errorf("Added (-want +got):\n%s", diff)
	}
	p := e.mustLoad(path)
	if x, ok := p.Exposed(e.abs("proj/out")); !ok || x.Mode != ReadWrite {
		t.Errorf("./out is %v, %v; want rw", x.Mode, ok)
	}
	// Learning again adds nothing.
	res, err = e.learn(Observations{Files: []FileAccess{{Path: e.abs("proj/out/r.txt"), Write: true}}})
	if err != nil || res.Backup != "" || len(res.Added) != 0 {
		t.Errorf("second run: %+v, %v", res, err)
	}
}

func TestLearnReadOnlyDirectoryInIncludedProfile(t *testing.T) {
	e := newLearnEnv(t)
	e.mkdir("proj/out")
	got := e.learnCase(t, "include \"common\"\n", map[string]string{"common": "expose-ro=./out\n"},
		Observations{Files: []FileAccess{{Path: e.abs("proj/out/r.txt"), Write: true}}})
	want := []string{"# not learned: expose-rw=./out (writes seen, but an included profile exposes it read-only: change it there)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestLearnEnv(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before string
		keys   []string
		want   []string
	}{
		{
			name: "sorted, once each",
			keys: []string{"PORT", "LANG", "API_TOKEN", "LANG", "My_ENV"},
			want: []string{"env=API_TOKEN=${API_TOKEN}", "env=LANG=${LANG}", "env=My_ENV=${My_ENV}", "env=PORT=${PORT}"},
		},
		{
			name:   "covered by an exact rule or a pattern",
			before: "env=LANG=C\nenv=LC_*=${LC_*}\nenv=EMPTY=${NOT_SET}\n",
			keys:   []string{"LANG", "LC_ALL", "LC_CTYPE", "EMPTY", "TERM"},
			want:   []string{"env=TERM=${TERM}"},
		},
		{
			name:   "removed by unenv: a comment, never a rule",
			before: "unenv=*_KEY\nunenv=SECRET\n",
			keys:   []string{"OPENAI_KEY", "SECRET", "HOME"},
			want: []string{
				"env=HOME=${HOME}",
				"# not learned: OPENAI_KEY (removed by unenv=*_KEY)",
				"# not learned: SECRET (removed by unenv=SECRET)",
			},
		},
		{
			name: "names ${NAME} cannot spell are dropped",
			keys: []string{"A-B", "X\nY", "*", "A=B", "", "1X", "ÉTÉ", "OK"},
			want: []string{"env=OK=${OK}"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newLearnEnv(t)
			got := e.learnCase(t, tc.before, nil, Observations{Env: tc.keys})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLearnNet(t *testing.T) {
	ip := netip.MustParseAddr
	for _, tc := range []struct {
		name   string
		before string
		env    []string // added to the host environment
		hosts  string   // the hosts file, when not the default one
		obs    Observations
		want   []string
	}{
		{
			name: "wildcard binds, IPv4 and IPv6",
			obs: Observations{Net: []NetAccess{
				{Proto: TCP, Dir: In, IP: netip.IPv4Unspecified(), Port: 8000},
				{Proto: TCP, Dir: In, IP: netip.IPv6Unspecified(), Port: 8000},
				{Proto: UDP, Dir: In, IP: netip.IPv6Unspecified(), Port: 0},
			}},
			want: []string{"net=ALLOW|TCP|0.0.0.0|8000|IN", "net=ALLOW|TCP|::|8000|IN", "net=ALLOW|UDP|0.0.0.0|0|IN", "net=ALLOW|UDP|::|0|IN"},
		},
		{
			name: "loopback binds: the literal address, never a name of the hosts file",
			obs: Observations{Net: []NetAccess{
				{Proto: TCP, Dir: In, IP: ip("127.0.0.1"), Port: 9999},
				{Proto: TCP, Dir: In, IP: ip("::1"), Port: 0},
			}},
			want: []string{"net=ALLOW|TCP|127.0.0.1|9999|IN", "net=ALLOW|TCP|::1|0|IN"},
		},
		{
			name: "an address the hosts file names",
			obs: Observations{Net: []NetAccess{
				{Proto: TCP, Dir: Out, IP: ip("192.0.2.80"), Port: 80},
			}},
			hosts: "192.0.2.80 web.test\n",
			want:  []string{"net=ALLOW|TCP|192.0.2.80|80|OUT"},
		},
		{
			name: "bare addresses",
			obs: Observations{Net: []NetAccess{
				{Proto: TCP, Dir: Out, IP: ip("198.51.100.7"), Port: 5432},
				{Proto: UDP, Dir: Out, IP: ip("2001:db8::1"), Port: 53},
				{Proto: TCP, Dir: Out, IP: ip("fe80::1%eth0"), Port: 22},
			}},
			want: []string{
				"net=ALLOW|TCP|198.51.100.7|5432|OUT",
				"net=ALLOW|TCP|fe80::1|22|OUT",
				"net=ALLOW|UDP|2001:db8::1|53|OUT",
			},
		},
		{
			name: "names from the DNS answers, IPv4-mapped addresses too",
			obs: Observations{
				DNS: []DNSAnswer{
					{Name: "API.Example.Test.", Addrs: []netip.Addr{ip("192.0.2.50")}},
					{Name: "other.example.test", Addrs: []netip.Addr{ip("192.0.2.50")}},
					{Name: "bad name", Addrs: []netip.Addr{ip("192.0.2.51")}},
				},
				Net: []NetAccess{
					{Proto: TCP, Dir: Out, IP: ip("::ffff:192.0.2.50"), Port: 443},
					{Proto: TCP, Dir: Out, IP: ip("192.0.2.51"), Port: 443},
				},
			},
			want: []string{"net=ALLOW|TCP|192.0.2.51|443|OUT", "net=ALLOW|TCP|api.example.test|443|OUT"},
		},
		{
			name: "the name the program used",
			obs: Observations{Net: []NetAccess{
				{Proto: TCP, Dir: Out, Host: "db.example.test", IP: ip("192.0.2.60"), Port: 5432},
				{Proto: TCP, Dir: Out, Host: "192.0.2.61", Port: 80},
			}},
			want: []string{"net=ALLOW|TCP|192.0.2.61|80|OUT", "net=ALLOW|TCP|db.example.test|5432|OUT"},
		},
		{
			name: "hosts and ports held in variables the program read; addresses stay literal",
			env:  []string{"SERVER_IP=203.0.113.5", "APP_Port=9000", "N=7000", "UNREAD_PORT=7001"},
			obs: Observations{
				Env: []string{"DB_HOST", "SERVER_IP", "APP_Port", "N", "PORT"},
				Net: []NetAccess{
					{Proto: TCP, Dir: Out, Host: "db.example.test", IP: ip("192.0.2.60"), Port: 8080},
					{Proto: TCP, Dir: Out, IP: ip("203.0.113.5"), Port: 9000},
					{Proto: TCP, Dir: In, IP: netip.IPv4Unspecified(), Port: 7000},
					{Proto: TCP, Dir: In, IP: netip.IPv4Unspecified(), Port: 7001},
				},
			},
			want: []string{
				"env=APP_Port=${APP_Port}",
				"env=DB_HOST=${DB_HOST}",
				"env=N=${N}",
				"env=PORT=${PORT}",
				"env=SERVER_IP=${SERVER_IP}",
				"net=ALLOW|TCP|${DB_HOST}|${PORT}|OUT",
				"net=ALLOW|TCP|0.0.0.0|7000|IN",
				"net=ALLOW|TCP|0.0.0.0|7001|IN",
				"net=ALLOW|TCP|203.0.113.5|${APP_Port}|OUT",
				"net=ALLOW|TCP|::|7000|IN",
				"net=ALLOW|TCP|::|7001|IN",
			},
		},
		{
			name: "a lookup of an address names nothing; the name looked up names its answers",
			obs: Observations{
				DNS: []DNSAnswer{
					{Name: "127.0.0.1", Addrs: []netip.Addr{ip("127.0.0.1")}},
					{Name: "::1", Addrs: []netip.Addr{ip("::1")}},
					{Name: "localhost", Addrs: []netip.Addr{ip("127.0.0.2")}},
				},
				Net: []NetAccess{
					{Proto: TCP, Dir: Out, IP: ip("127.0.0.1"), Port: 8080},
					{Proto: TCP, Dir: Out, IP: ip("::1"), Port: 8080},
					{Proto: TCP, Dir: Out, IP: ip("127.0.0.2"), Port: 8080},
				},
			},
			want: []string{"net=ALLOW|TCP|127.0.0.1|8080|OUT", "net=ALLOW|TCP|::1|8080|OUT", "net=ALLOW|TCP|localhost|8080|OUT"},
		},
		{
			name: "ports: only a variable named as a port holds one, never port 0",
			env:  []string{"REPORT_ID=8080", "IMPORT_LIMIT=8081", "TRANSPORT=8082", "HTTP_PORT2=8083", "ZERO_PORT=0", "PORTAL=8084"},
			obs: Observations{
				Env: []string{"REPORT_ID", "IMPORT_LIMIT", "TRANSPORT", "HTTP_PORT2", "ZERO_PORT", "PORTAL"},
				Net: []NetAccess{
					{Proto: TCP, Dir: Out, IP: ip("192.0.2.1"), Port: 8080},
					{Proto: TCP, Dir: Out, IP: ip("192.0.2.1"), Port: 8081},
					{Proto: TCP, Dir: Out, IP: ip("192.0.2.1"), Port: 8082},
					{Proto: TCP, Dir: Out, IP: ip("192.0.2.1"), Port: 8083},
					{Proto: TCP, Dir: Out, IP: ip("192.0.2.1"), Port: 8084},
					{Proto: TCP, Dir: In, IP: ip("127.0.0.1"), Port: 0},
				},
			},
			want: []string{
				"env=HTTP_PORT2=${HTTP_PORT2}",
				"env=IMPORT_LIMIT=${IMPORT_LIMIT}",
				"env=PORTAL=${PORTAL}",
				"env=REPORT_ID=${REPORT_ID}",
				"env=TRANSPORT=${TRANSPORT}",
				"env=ZERO_PORT=${ZERO_PORT}",
				"net=ALLOW|TCP|127.0.0.1|0|IN",
				"net=ALLOW|TCP|192.0.2.1|${HTTP_PORT2}|OUT",
				"net=ALLOW|TCP|192.0.2.1|8080|OUT",
				"net=ALLOW|TCP|192.0.2.1|8081|OUT",
				"net=ALLOW|TCP|192.0.2.1|8082|OUT",
				"net=ALLOW|TCP|192.0.2.1|8084|OUT",
			},
		},
		{
			name:   "a wildcard bind the profile allows for one family learns the other",
			before: "net=ALLOW|tcp|0.0.0.0|8000|IN\n",
			obs: Observations{Net: []NetAccess{
				{Proto: TCP, Dir: In, IP: netip.IPv6Unspecified(), Port: 8000},
			}},
			want: []string{"net=ALLOW|TCP|::|8000|IN"},
		},
		{
			name:   "already allowed by the profile",
			before: "net=ALLOW|tcp|198.51.100.0/24|*|OUT\nnet=ALLOW|TCP|db.example.test|5432|OUT\n",
			obs: Observations{Net: []NetAccess{
				{Proto: TCP, Dir: Out, IP: ip("198.51.100.7"), Port: 443},
				{Proto: TCP, Dir: Out, Host: "db.example.test", IP: ip("192.0.2.60"), Port: 5432},
				{Proto: UDP, Dir: Out, IP: ip("198.51.100.7"), Port: 443},
			}},
			want: []string{"net=ALLOW|UDP|198.51.100.7|443|OUT"},
		},
		{
			name:   "refused by a DENY rule: a comment, no rule",
			before: "net=DENY|*|10.0.0.0/8|*|OUT\n",
			obs: Observations{Net: []NetAccess{
				{Proto: TCP, Dir: Out, IP: ip("10.1.2.3"), Port: 80},
				{Proto: TCP, Dir: Out, IP: ip("10.1.2.3"), Port: 80},
			}},
			want: []string{"# not learned: TCP 10.1.2.3 port 80 OUT (refused by net=DENY|*|10.0.0.0/8|*|OUT)"},
		},
		{
			name: "invalid accesses are dropped",
			obs: Observations{Net: []NetAccess{
				{Proto: AnyProto, Dir: Out, IP: ip("192.0.2.1"), Port: 80},
				{Proto: TCP, Dir: Both, IP: ip("192.0.2.1"), Port: 80},
				{Proto: TCP, Dir: Out, Port: 80},
				{Proto: TCP, Dir: Out, Host: "x|y\nnet=ALLOW|*|*|*|*", Port: 80},
			}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newLearnEnv(t)
			e.env = append(e.env, tc.env...)
			if tc.hosts != "" {
				e.writeAbs(e.hosts, tc.hosts, 0o644)
			}
			got := e.learnCase(t, tc.before, nil, tc.obs)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLearnImports(t *testing.T) {
	for _, tc := range []struct {
		name    string
		before  string
		modules []string
		want    []string
	}{
		{
			name:    "groups and headers",
			modules: []string{"requests", "json", "subprocess", "asyncore", "os", "_thread", "ctypes", "numpy", "os.path", "xml.etree", "annotationlib"},
			want: []string{
				"# ⚠ Dangerous!",
				"python-import=ctypes, subprocess",
				"# Standard Python",
				"python-import=_thread, annotationlib, json, os, xml",
				"# ⚠ Deprecated Python module",
				"python-import=asyncore",
				"# External modules (Are you sure about the origin?)",
				"python-import=numpy",
				"python-import=requests",
			},
		},
		{
			name: "packed up to 70 characters",
			modules: []string{"__future__", "_codecs_cn", "_codecs_hk", "_codecs_iso2022", "_codecs_jp", "_codecs_kr",
				"abc", "argparse", "asyncio", "base64", "collections", "contextlib", "dataclasses", "functools"},
			want: []string{
				"# Standard Python",
				"python-import=__future__, _codecs_cn, _codecs_hk, _codecs_iso2022, _codecs_jp",
				"python-import=_codecs_kr, abc, argparse, asyncio, base64, collections, contextlib",
				"python-import=dataclasses, functools",
			},
		},
		{
			name:    "already allowed",
			before:  "python-import=json, requests\n",
			modules: []string{"json", "requests", "csv"},
			want:    []string{"# Standard Python", "python-import=csv"},
		},
		{
			name:    "python-import=* allows all",
			before:  "python-import=*\n",
			modules: []string{"json", "subprocess", "requests"},
		},
		{
			name:    "invalid names dropped",
			modules: []string{"a b", "x\npython-import=*", "", "1x", "-", "ok_mod"},
			want:    []string{"# External modules (Are you sure about the origin?)", "python-import=ok_mod"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newLearnEnv(t)
			got := e.learnCase(t, tc.before, nil, Observations{Imports: tc.modules})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestImportGroup(t *testing.T) {
	for name, want := range map[string]int{
		"subprocess": impDangerous, "importlib": impDangerous, "posix": impDangerous, "cProfile": impDangerous,
		"json": impStandard, "_socket": impStandard, "tomllib": impStandard, "compression": impStandard,
		"asyncore": impDeprecated, "distutils": impDeprecated, "imp": impDeprecated, "telnetlib": impDeprecated,
		"requests": impExternal, "numpy": impExternal, "pysandboxes": impExternal,
	} {
		if got := importGroup(name); got != want {
			t.Errorf("importGroup(%q) = %d, want %d", name, got, want)
		}
	}
	for _, l := range packImports([]string{strings.Repeat("a", 80), "b", "c"}) {
		if v := strings.TrimPrefix(l, "python-import="); len(v) > importPackWidth && strings.Contains(v, ",") {
			t.Errorf("packed line too long: %q", l)
		}
	}
}

func TestLearnAPI(t *testing.T) {
	threads := APIFunctions(CatThreads)
	for _, tc := range []struct {
		name   string
		before string
		api    []string
		want   []string
	}{
		{
			name: "a whole category collapses, part of one does not",
			api:  append([]string{"subprocess.run", "os.system"}, threads...),
			want: []string{
				"# ⚠ process-exec: runs code outside the patched interpreter",
				"python-api=ALLOW:os.system",
				"python-api=ALLOW:subprocess.run",
				"# threads: concurrency primitives",
				"python-api=ALLOW:threads",
			},
		},
		{
			name: "twins count as their function",
			api:  []string{"_thread.start_new_thread", "_thread.start_joinable_thread", "threading.Thread.start", "_thread.interrupt_main", "threading.settrace", "threading.setprofile", "_thread.stack_size", "threading.settrace_all_threads", "threading.setprofile_all_threads", "sys._settraceallthreads", "sys._setprofileallthreads"},
			want: []string{"# threads: concurrency primitives", "python-api=ALLOW:threads"},
		},
		{
			name:   "completed by the profile's grants",
			before: "python-api=ALLOW:ctypes.CDLL, ctypes.cast\n",
			api:    []string{"ctypes.string_at", "ctypes.wstring_at"},
			want:   []string{"# ⚠ native: native code and arbitrary memory access", "python-api=ALLOW:native"},
		},
		{
			name:   "a category DENY: function rules, never the category",
			before: "python-api=DENY:native\n",
			api:    []string{"ctypes.CDLL", "ctypes.cast", "ctypes.string_at", "ctypes.wstring_at"},
			want: []string{
				"# ⚠ native: native code and arbitrary memory access",
				"python-api=ALLOW:ctypes.CDLL",
				"python-api=ALLOW:ctypes.cast",
				"python-api=ALLOW:ctypes.string_at",
				"python-api=ALLOW:ctypes.wstring_at",
			},
		},
		{
			name:   "a function DENY: a comment",
			before: "python-api=DENY:posix.kill\n",
			api:    []string{"os.kill", "os.nice"},
			want: []string{
				"# process-control: kills processes, exhausts host resources",
				"python-api=ALLOW:os.nice",
				"# not learned: python-api=ALLOW:os.kill (refused by python-api=DENY:posix.kill)",
			},
		},
		{
			name: "dynamic code is never allowed unguarded",
			api:  []string{"builtins.eval", "builtins.exec"},
			want: []string{
				"# not learned: python-api=ALLOW:builtins.eval (eval, exec and compile are learned as eval-* rules, never allowed unguarded)",
				"# not learned: python-api=ALLOW:builtins.exec (eval, exec and compile are learned as eval-* rules, never allowed unguarded)",
			},
		},
		{
			name:   "already allowed, unknown names",
			before: "python-api=ALLOW:introspection\n",
			api:    []string{"sys._getframe", "os.nonexistent", "x\npython-api=ALLOW:*"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newLearnEnv(t)
			got := e.learnCase(t, tc.before, nil, Observations{API: tc.api})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLearnEval(t *testing.T) {
	e := newLearnEnv(t)
	got := e.learnCase(t, "eval-timeout=2s\n", nil, Observations{Eval: []string{
		"# namespace from the call site: prefer eval-namespace=closed",
		"eval-syntax=arith, compare",
		"eval-call=len",
		"eval-timeout=5s",
		"eval-max-nodes=100",
		"python-api=ALLOW:*",
		"eval-call=min\npython-import=*",
		"  eval-attribute=str-methods  ",
		"eval-syntax=arith, compare",
	}})
	want := []string{
		"# namespace from the call site: prefer eval-namespace=closed",
		"eval-syntax=arith, compare",
		"eval-call=len",
		"# not learned: eval-timeout=5s (eval-timeout is already set)",
		"eval-max-nodes=100",
		"eval-attribute=str-methods",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
