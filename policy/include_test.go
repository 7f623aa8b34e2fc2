package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestIncludeResolution(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string // relative to the current directory, "~/" for home, absolute for elsewhere
		main  string            // file loaded
		want  []string          // "ref raw" of every rule
	}{
		{
			name: "recursive, spliced in place",
			files: map[string]string{
				".py-sandboxes": "env=A=1\ninclude \"a\"\nenv=A=3",
				"a":             "env=B=1\ninclude \"b\"\n\nenv=B=2",
				"b":             "# b\nenv=C=1",
			},
			main: ".py-sandboxes",
			want: []string{
				".py-sandboxes(1) env=A=1",
				"a(1) env=B=1",
				"b(2) env=C=1",
				"a(4) env=B=2",
				".py-sandboxes(3) env=A=3",
			},
		},
		{
			name:  "including itself loads once",
			files: map[string]string{".py-sandboxes": "env=A=1\ninclude \".py-sandboxes\"\nenv=A=2"},
			main:  ".py-sandboxes",
			want:  []string{".py-sandboxes(1) env=A=1", ".py-sandboxes(3) env=A=2"},
		},
		{
			name: "A -> B -> A",
			files: map[string]string{
				".py-sandboxes": "include \"b\"\nenv=A=1",
				"b":             "env=B=1\ninclude \".py-sandboxes\"\ninclude \"b\"",
			},
			main: ".py-sandboxes",
			want: []string{"b(1) env=B=1", ".py-sandboxes(2) env=A=1"},
		},
		{
			name: "a file reached twice is loaded once",
			files: map[string]string{
				".py-sandboxes": "include \"b\"\ninclude \"c\"",
				"b":             "include \"d\"\nenv=B=1",
				"c":             "include \"d\"\nenv=C=1",
				"d":             "env=D=1",
			},
			main: ".py-sandboxes",
			want: []string{"d(1) env=D=1", "b(2) env=B=1", "c(2) env=C=1"},
		},
		{
			name: "a cycle through a symbolic link is seen",
			files: map[string]string{
				".py-sandboxes": "env=A=1\ninclude \"link\"",
			},
			main: ".py-sandboxes",
			want: []string{".py-sandboxes(1) env=A=1"},
		},
		{
			name:  "missing include is ignored",
			files: map[string]string{".py-sandboxes": "include \"nope\"\ninclude \"/nonexistent/dir/x\"\ninclude \"~/nope\"\nenv=A=1"},
			main:  ".py-sandboxes",
			want:  []string{".py-sandboxes(4) env=A=1"},
		},
		{
			name: "bare name next to the including file, in another directory",
			files: map[string]string{
				".py-sandboxes": "include \"conf/a\"",
				"conf/a":        "include \"b\"\nenv=A=1",
				"conf/b":        "env=B=conf",
				"b":             "env=B=cwd",
			},
			main: ".py-sandboxes",
			want: []string{"conf/b(1) env=B=conf", "conf/a(2) env=A=1"},
		},
		{
			name: "bare name next to the main file, wherever the current directory is",
			files: map[string]string{
				"~/proj/.py-sandboxes": "include \"common\"",
				"~/proj/common":        "env=A=proj",
				"common":               "env=A=cwd",
			},
			main: "~/proj/.py-sandboxes",
			want: []string{"~/proj/common(1) env=A=proj"},
		},
		{
			name: "./x and sub/x come from the current directory",
			files: map[string]string{
				"~/proj/.py-sandboxes":       "include \"./.local.py-sandboxes\"\ninclude \"sub/x\"",
				"~/proj/.local.py-sandboxes": "env=A=proj",
				"~/proj/sub/x":               "env=B=proj",
				".local.py-sandboxes":        "env=A=cwd",
				"sub/x":                      "env=B=cwd",
			},
			main: "~/proj/.py-sandboxes",
			want: []string{".local.py-sandboxes(1) env=A=cwd", "sub/x(1) env=B=cwd"},
		},
		{
			name: "./x inside an included file comes from the current directory too",
			files: map[string]string{
				".py-sandboxes": "include \"~/.config/py-sandboxes/user-py-sandboxes.profile\"",
				"~/.config/py-sandboxes/user-py-sandboxes.profile": "include \"./local\"",
				"local": "env=A=cwd",
			},
			main: ".py-sandboxes",
			want: []string{"local(1) env=A=cwd"},
		},
		{
			name: "~ is the home directory",
			files: map[string]string{
				".py-sandboxes": "include \"~/.config/py-sandboxes/user-py-sandboxes.profile\"\nenv=A=1",
				"~/.config/py-sandboxes/user-py-sandboxes.profile": "env=U=1",
			},
			main: ".py-sandboxes",
			want: []string{"~/.config/py-sandboxes/user-py-sandboxes.profile(1) env=U=1", ".py-sandboxes(2) env=A=1"},
		},
		{
			name: "${VAR} in the path",
			files: map[string]string{
				".py-sandboxes": "include \"${CONF_DIR}/x\"\ninclude \"${UNSET:-sub}/y\"",
				"conf/x":        "env=X=1",
				"sub/y":         "env=Y=1",
			},
			main: ".py-sandboxes",
			want: []string{"conf/x(1) env=X=1", "sub/y(1) env=Y=1"},
		},
		{
			name: "spaces, comment and '#' inside the quotes",
			files: map[string]string{
				".py-sandboxes": "include   \"a#b\"   # comment\n  include \"c d\"",
				"a#b":           "env=A=1",
				"c d":           "env=C=1",
			},
			main: ".py-sandboxes",
			want: []string{"a#b(1) env=A=1", "c d(1) env=C=1"},
		},
		{
			name: "an included file without rules",
			files: map[string]string{
				".py-sandboxes": "include \"empty\"\nenv=A=1",
				"empty":         "# nothing\n",
			},
			main: ".py-sandboxes",
			want: []string{".py-sandboxes(2) env=A=1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newCoreEnv(t, "CONF_DIR="+"conf")
			for name, content := range tt.files {
				e.write(name, content)
			}
			if tt.name == "a cycle through a symbolic link is seen" {
				if err := os.Symlink(e.path(".py-sandboxes"), e.path("link")); err != nil {
					t.Fatal(err)
				}
			}
			p := e.mustLoad(tt.main)
			if diff := cmp.Diff(tt.want, refs(p.Rules())); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
}

// TestIncludeRefs checks the provenance of spliced lines: their own absolute file and
// line.
func TestIncludeRefs(t *testing.T) {
	e := newCoreEnv(t)
	e.write(".py-sandboxes", "# main\ninclude \"conf/a\"\nenv=M=1")
	a := e.write("conf/a", "\n\nenv=A=1")
	p := e.mustLoad(".py-sandboxes")
	rules := p.Rules()
	want := []Ref{{File: a, Line: 3, Name: "conf/a"}, {File: e.path(".py-sandboxes"), Line: 3, Name: ".py-sandboxes"}}
	var got []Ref
	for _, r := range rules {
		got = append(got, r.Ref)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refs (-want +got):\n%s", diff)
	}
	if src, ok := p.EnvSource("A"); !ok || src != want[0] {
		t.Errorf("EnvSource(A) = %v, %v", src, ok)
	}
}

func TestIncludeErrors(t *testing.T) {
	e := newCoreEnv(t)
	e.mkdir("adir")
	e.write("bad", "\nnope=1")
	e.write(".py-sandboxes", strings.Join([]string{
		`include "adir"`,
		`include "~"`,
		`include "bad"`,
		`include "${A:B}"`,
		`include "${NOPE"`,
		"include \"x\x00y\"",
		`env=OK=1`,
	}, "\n"))
	_, err := e.load(".py-sandboxes")
	want := []string{
		".py-sandboxes(1): cannot read included file 'adir': is a directory",
		".py-sandboxes(2): cannot read included file '~': is a directory",
		`.py-sandboxes(4): include "${A:B}": unsupported substitution "${A:B}": expected ${NAME} or ${NAME:-default}`,
		`.py-sandboxes(5): include "${NOPE": unterminated substitution "${NOPE"`,
		`.py-sandboxes(6): include "x\x00y": path is invalid`,
		"bad(2): Invalid rule 'nope=1': unknown key 'nope'",
	}
	if diff := cmp.Diff(want, errLines(t, err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// TestIncludeDepth checks the bound on include nesting: a chain of distinct files
// deeper than the limit is an error at the include line that goes too deep.
func TestIncludeDepth(t *testing.T) {
	e := newCoreEnv(t)
	const n = maxIncludeDepth + 5
	for i := range n {
		e.write(fmt.Sprintf("f%02d", i), fmt.Sprintf("env=F%d=1\ninclude \"f%02d\"", i, i+1))
	}
	_, err := e.load("f00")
	want := []string{fmt.Sprintf("f%02d(2): includes nest more than %d levels deep", maxIncludeDepth, maxIncludeDepth)}
	if diff := cmp.Diff(want, errLines(t, err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	// At the limit itself it loads.
	e.write(fmt.Sprintf("f%02d", maxIncludeDepth), "env=LAST=1")
	p := e.mustLoad("f00")
	if got := len(p.Rules()); got != maxIncludeDepth+1 {
		t.Errorf("%d rules, want %d", got, maxIncludeDepth+1)
	}
}

// TestIncludeSubstitutionNotReexpanded checks that a path taken from the environment
// is used as it is.
func TestIncludeSubstitutionNotReexpanded(t *testing.T) {
	e := newCoreEnv(t, "P=${Q}", "Q=real")
	e.write("${Q}", "env=LITERAL=1")
	e.write("real", "env=REAL=1")
	p := e.mustParse(`include "${P}"`)
	if diff := cmp.Diff([]string{"${Q}(1) env=LITERAL=1"}, refs(p.Rules())); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
}

// TestIncludeMainPathSymlink checks that the main file, loaded through a symbolic
// link, is recognised when it includes itself by its real path.
func TestIncludeMainPathSymlink(t *testing.T) {
	e := newCoreEnv(t)
	real := e.path("real/.py-sandboxes")
	e.write("real/.py-sandboxes", "env=A=1\ninclude \""+real+"\"")
	if err := os.Symlink(e.path("real"), e.path("link")); err != nil {
		t.Fatal(err)
	}
	p := e.mustLoad(filepath.Join("link", ".py-sandboxes"))
	if diff := cmp.Diff([]string{"link/.py-sandboxes(1) env=A=1"}, refs(p.Rules())); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
}
