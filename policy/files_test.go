package policy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// filesEnv makes a current directory with data/, data/sub/, other/, a file, a symbolic
// link to data and a dangling link, and a home directory with hdir/.
func filesEnv(t *testing.T) *coreEnv {
	t.Helper()
	e := newCoreEnv(t, "DATA_DIR=data")
	e.mkdir("data/sub", "other", "~/hdir")
	e.write("file.txt", "x")
	if err := os.Symlink(e.path("data"), e.path("link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.path("nowhere"), e.path("dangling")); err != nil {
		t.Fatal(err)
	}
	return e
}

type exposeView struct {
	Path, Mode string
	Line       int
}

func exposesOf(p *Policy) []exposeView {
	var out []exposeView
	for _, x := range p.Exposes() {
		out = append(out, exposeView{x.Path, x.Mode.String(), x.Ref.Line})
	}
	return out
}

func TestExpose(t *testing.T) {
	e := filesEnv(t)
	data, sub, other, hdir := e.path("data"), e.path("data/sub"), e.path("other"), e.path("~/hdir")
	tests := []struct {
		name string
		text string
		want []exposeView
	}{
		{"relative", "expose-ro=data", []exposeView{{data, "ro", 1}}},
		{"dot slash", "expose-rw=./data", []exposeView{{data, "rw", 1}}},
		{"dot", "expose-ro=.", []exposeView{{e.dir, "ro", 1}}},
		{"dot dot", "expose-ro=data/sub/..", []exposeView{{data, "ro", 1}}},
		{"absolute", "expose-ro=" + other, []exposeView{{other, "ro", 1}}},
		{"home", "expose-ro=~/hdir", []exposeView{{hdir, "ro", 1}}},
		{"home itself", "expose-ro=~", []exposeView{{e.home, "ro", 1}}},
		{"symbolic link resolved", "expose-ro=link/sub", []exposeView{{sub, "ro", 1}}},
		{"substituted", "expose-ro=${DATA_DIR}\nexpose-rw=${UNSET:-other}", []exposeView{{other, "rw", 2}, {data, "ro", 1}}},
		{"spaces trimmed", "expose-ro=  data  # c", []exposeView{{data, "ro", 1}}},
		{"exact duplicates", "expose-ro=data\nexpose-ro=data\nexpose-ro=./link\nexpose-ro=" + data, []exposeView{{data, "ro", 1}}},
		{"deepest first", "expose-ro=" + e.dir + "\nexpose-rw=data/sub\nexpose-ro=data", []exposeView{{sub, "rw", 2}, {data, "ro", 3}, {e.dir, "ro", 1}}},
		{"legacy bind", "bind=data,data", []exposeView{{data, "rw", 1}}},
		{"legacy ro-bind", "ro-bind=./data, link", []exposeView{{data, "ro", 1}}},
		{"legacy bind of the root", "bind=/,/", []exposeView{{"/", "rw", 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := e.mustParse(tt.text)
			if diff := cmp.Diff(tt.want, exposesOf(p)); diff != "" {
				t.Errorf("Exposes (-want +got):\n%s", diff)
			}
		})
	}
	// Every accepted line stays a rule, duplicates too.
	p := e.mustParse("expose-ro=data\nexpose-ro=./link")
	if diff := cmp.Diff([]string{".py-sandboxes(1) expose-ro=data", ".py-sandboxes(2) expose-ro=./link"}, refs(p.Rules())); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
}

func TestExposeErrors(t *testing.T) {
	e := filesEnv(t)
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"comma", "expose-ro=data,other", []string{"Invalid rule 'expose-ro=data,other': expected a single path (no comma)"}},
		{"legacy remapping spelling", "expose-rw=/,/", []string{"Invalid rule 'expose-rw=/,/': expected a single path (no comma)"}},
		{"empty", "expose-ro=", []string{"Invalid rule 'expose-ro=': path must be set"}},
		{"blank", "expose-rw=   ", []string{"Invalid rule 'expose-rw=': path must be set"}},
		{"substituted to empty", "expose-ro=${UNSET}", []string{"Invalid rule 'expose-ro=${UNSET}': path must be set"}},
		{"NUL", "expose-ro=da\x00ta", []string{"Invalid rule 'expose-ro=da\x00ta': path is invalid"}},
		{"missing", "expose-ro=nope", []string{"Invalid rule 'expose-ro=nope': path 'nope' must exist"}},
		{"missing absolute", "expose-ro=/nonexistent/x", []string{"Invalid rule 'expose-ro=/nonexistent/x': path '/nonexistent/x' must exist"}},
		{"missing under home", "expose-ro=~/nope", []string{"Invalid rule 'expose-ro=~/nope': path '~/nope' must exist"}},
		{"dangling link", "expose-ro=dangling", []string{"Invalid rule 'expose-ro=dangling': path 'dangling' must exist"}},
		{"under a file", "expose-ro=file.txt/x", []string{"Invalid rule 'expose-ro=file.txt/x': path 'file.txt/x' must exist"}},
		{"a file", "expose-rw=file.txt", []string{"Invalid rule 'expose-rw=file.txt': path must be a directory"}},
		{"ro then rw", "expose-ro=data\nexpose-rw=./link", []string{"Invalid rule 'expose-rw=./link': this directory (data) is already exposed read-only by .py-sandboxes(1) ('expose-ro=data'); expose it once, read-only or read-write"}},
		{"rw then ro", "expose-rw=data\n\nexpose-ro=data", []string{"Invalid rule 'expose-ro=data': this directory is already exposed read-write by .py-sandboxes(1) ('expose-rw=data'); expose it once, read-only or read-write"}},
		{"legacy against current", "bind=data,data\nexpose-ro=data", []string{"Invalid rule 'expose-ro=data': this directory (data) is already exposed read-write by .py-sandboxes(1) ('bind=data,data'); expose it once, read-only or read-write"}},
		{"legacy without a comma", "bind=data", []string{"Invalid rule 'bind=data': source and destination must be separated with a comma"}},
		{"legacy remapping", "ro-bind=data,other", []string{"Invalid rule 'ro-bind=data,other': mapping a directory to another place is not supported; expose it where it is with expose-ro=data"}},
		{"legacy remapping rw", "bind=other,data", []string{"Invalid rule 'bind=other,data': mapping a directory to another place is not supported; expose it where it is with expose-rw=other"}},
		{"legacy missing source", "bind=nope,data", []string{"Invalid rule 'bind=nope,data': path 'nope' must exist"}},
		{"legacy both bad", "ro-bind=,nope", []string{"Invalid rule 'ro-bind=,nope': path must be set", "Invalid rule 'ro-bind=,nope': path 'nope' must exist"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.parse(tt.text)
			got := errLines(t, err)
			for i := range got {
				_, got[i], _ = strings.Cut(got[i], ": ")
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExposeConflictKeepsFirst checks that the first of two conflicting rules stays.
func TestExposeConflictKeepsFirst(t *testing.T) {
	e := filesEnv(t)
	e.args = []string{"expose-rw=data"}
	e.write(".py-sandboxes", "expose-ro=data")
	_, err := e.load(".py-sandboxes")
	want := []string{".py-sandboxes(1): Invalid rule 'expose-ro=data': this directory is already exposed read-write by <arg> ('expose-rw=data'); expose it once, read-only or read-write"}
	if diff := cmp.Diff(want, errLines(t, err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestExposed(t *testing.T) {
	e := filesEnv(t)
	e.mkdir("data/sub/deep", "data/subway")
	data, sub := e.path("data"), e.path("data/sub")
	p := e.mustParse("expose-ro=data\nexpose-rw=data/sub")
	tests := []struct {
		path string
		want string // "" when not exposed, else "mode dir"
	}{
		{data, "ro " + data},
		{data + "/f", "ro " + data},
		{data + "/subway/f", "ro " + data},
		{sub, "rw " + sub},
		{sub + "/deep/f", "rw " + sub},
		{e.dir, ""},
		{e.dir + "/dat", ""},
		{e.dir + "/data2", ""},
		{"/", ""},
	}
	for _, tt := range tests {
		x, ok := p.Exposed(tt.path)
		got := ""
		if ok {
			got = x.Mode.String() + " " + x.Path
		}
		if got != tt.want {
			t.Errorf("Exposed(%s) = %q, want %q", tt.path, got, tt.want)
		}
	}
	root := e.mustParse("expose-rw=/\nexpose-ro=data")
	for path, want := range map[string]string{"/": "rw /", "/etc/x": "rw /", data + "/x": "ro " + data} {
		x, ok := root.Exposed(path)
		if got := x.Mode.String() + " " + x.Path; !ok || got != want {
			t.Errorf("Exposed(%s) = %q, %v; want %q", path, got, ok, want)
		}
	}
	if _, ok := e.mustParse("").Exposed(data); ok {
		t.Error("an empty policy exposes something")
	}
}

func TestIgnore(t *testing.T) {
	e := filesEnv(t)
	e.mkdir("data/.venv/lib", "proj/.venv/lib")
	data := e.path("data")
	tests := []struct {
		name    string
		text    string
		hidden  []string
		visible []string
	}{
		{
			name:    "base name",
			text:    "expose-ro=data\nignore=.env",
			hidden:  []string{data + "/.env", data + "/sub/.env", data + "/sub/.env/inside", data + "/.env/a/b"},
			visible: []string{data + "/env", data + "/.envrc", data + "/sub/x.env", data},
		},
		{
			name:    "glob",
			text:    "expose-ro=data\nignore=*.log",
			hidden:  []string{data + "/a.log", data + "/sub/.log", data + "/x.log/y"},
			visible: []string{data + "/a.log.1", data + "/log"},
		},
		{
			name:    "dot files hide .venv and .git",
			text:    "expose-ro=data\nignore=.*",
			hidden:  []string{data + "/.venv/lib/x.py", data + "/.git/config"},
			visible: []string{data + "/x.py"},
		},
		{
			name:    "absolute",
			text:    "expose-ro=" + e.dir + "\nignore=" + data + "/sec*",
			hidden:  []string{data + "/secret", data + "/secret/x", data + "/sec"},
			visible: []string{data + "/sub/secret", e.dir + "/secret"},
		},
		{
			name:    "absolute pattern outside any exposed directory",
			text:    "ignore=/etc/sh*",
			hidden:  []string{"/etc/shadow", "/etc/shadow/x"},
			visible: []string{"/etc/passwd", "/etc"},
		},
		{
			name:    "home",
			text:    "ignore=~/hdir",
			hidden:  []string{e.path("~/hdir"), e.path("~/hdir/f")},
			visible: []string{e.path("~/other")},
		},
		{
			name:    "an exposed directory under a hidden name stays visible",
			text:    "expose-ro=data\nexpose-ro=data/.venv/lib\nignore=.venv",
			hidden:  []string{data + "/.venv", data + "/.venv/other", data + "/.venv/other/f"},
			visible: []string{data + "/.venv/lib", data + "/.venv/lib/x.py", data + "/.venv/lib/sub/y"},
		},
		{
			name:    "the exposed directory itself is not hidden by a relative pattern",
			text:    "expose-ro=proj/.venv\nignore=.venv",
			hidden:  []string{e.path("proj/.venv/.venv")},
			visible: []string{e.path("proj/.venv"), e.path("proj/.venv/lib")},
		},
		{
			name:    "outside every exposed directory",
			text:    "ignore=.env",
			hidden:  []string{"/x/.env", "/x/.env/y", ".env", "a/.env"},
			visible: []string{"/x/env"},
		},
		{
			name:    "not clean paths are cleaned",
			text:    "expose-ro=data\nignore=.env",
			hidden:  []string{data + "/sub/../.env", data + "//.env/"},
			visible: []string{data + "/.env/.."},
		},
		{
			name:    "no ignore rule",
			text:    "expose-ro=data",
			visible: []string{data + "/.env"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := e.mustParse(tt.text)
			for _, path := range tt.hidden {
				if _, ok := p.Ignored(path); !ok {
					t.Errorf("Ignored(%s) = false, want true", path)
				}
			}
			for _, path := range tt.visible {
				if ig, ok := p.Ignored(path); ok {
					t.Errorf("Ignored(%s) = true (by %s), want false", path, ig.Raw)
				}
			}
		})
	}
}

func TestIgnoreRules(t *testing.T) {
	e := filesEnv(t)
	p := e.mustParse("ignore=.env\nignore=  *.log  \nignore=/etc/sh*\nignore=~/secret\nignore=${UNSET:-.git}")
	type view struct {
		Pattern  string
		Absolute bool
		Line     int
	}
	var got []view
	for _, ig := range p.Ignores() {
		got = append(got, view{ig.Pattern, ig.Absolute, ig.Ref.Line})
	}
	want := []view{{".env", false, 1}, {"*.log", false, 2}, {"/etc/sh*", true, 3}, {filepath.Join(e.home, "secret"), true, 4}, {".git", false, 5}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Ignores (-want +got):\n%s", diff)
	}
	ig, ok := p.Ignored("/etc/shadow")
	if !ok || ig.Ref.Line != 3 || ig.Raw != "ignore=/etc/sh*" {
		t.Errorf("Ignored(/etc/shadow) = %+v, %v", ig, ok)
	}

	e.wantErrs("ignore=\nignore=[\nignore=a\x00b\nignore=${UNSET}",
		".py-sandboxes(1): Invalid rule 'ignore=': pattern must be set",
		".py-sandboxes(2): Invalid rule 'ignore=[': bad pattern: syntax error in pattern",
		".py-sandboxes(3): Invalid rule 'ignore=a\x00b': pattern is invalid",
		".py-sandboxes(4): Invalid rule 'ignore=${UNSET}': pattern must be set",
	)
	// A relative pattern holding a '/' is matched against names, which hold
	// none: it would hide nothing, and is refused with the two forms that hide.
	e.wantErrs("ignore=sub/.env\nignore=./secret\nignore=logs/",
		".py-sandboxes(1): Invalid rule 'ignore=sub/.env': a relative pattern is matched against each file's name, which holds no '/', so it would hide nothing; write ignore=.env (any file of that name) or ignore="+filepath.Join(e.dir, "sub/.env")+" (that one)",
		".py-sandboxes(2): Invalid rule 'ignore=./secret': a relative pattern is matched against each file's name, which holds no '/', so it would hide nothing; write ignore=secret (any file of that name) or ignore="+filepath.Join(e.dir, "secret")+" (that one)",
		".py-sandboxes(3): Invalid rule 'ignore=logs/': a relative pattern is matched against each file's name, which holds no '/', so it would hide nothing; write ignore=logs (any file of that name) or ignore="+filepath.Join(e.dir, "logs")+" (that one)",
	)
	if _, err := NewBuilder().Ignore("a/b").Build(context.Background(), nil); err == nil ||
		!strings.Contains(err.Error(), "would hide nothing; write ignore=b") || strings.Contains(err.Error(), "(that one)") {
		t.Errorf("Builder.Ignore(a/b): %v; want the refusal naming ignore=b alone", err)
	}
}
