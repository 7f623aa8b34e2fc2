package policy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLineSyntax checks how a file is cut into rules: key=value, comments outside
// quotes, spaces, blank lines, '{' lines, byte order mark, line numbers.
func TestLineSyntax(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string // "ref raw" of every rule, in order
	}{
		{"value holds '='", "env=A=B=C", []string{".py-sandboxes(1) env=A=B=C"}},
		{"comment", "env=A=x # a comment", []string{".py-sandboxes(1) env=A=x"}},
		{"comment without space", "env=A=x#y", []string{".py-sandboxes(1) env=A=x"}},
		{"full-line comments", "# one\n  # two\n#env=A=x\nenv=B=y", []string{".py-sandboxes(4) env=B=y"}},
		{"'#' in single quotes", "env=A='x # y' # z", []string{".py-sandboxes(1) env=A='x # y'"}},
		{"'#' in double quotes", `env=A="x # y" # z`, []string{`.py-sandboxes(1) env=A="x # y"`}},
		{"escaped double quote", `env=A="x \" # y" # z`, []string{`.py-sandboxes(1) env=A="x \" # y"`}},
		{"escaped single quote", `env=A='it\'s # here' # z`, []string{`.py-sandboxes(1) env=A='it\'s # here'`}},
		{"other quote inside quotes", `env=A="it's # x" # z`, []string{`.py-sandboxes(1) env=A="it's # x"`}},
		{"two quoted runs", `env=A='#' "#" # z`, []string{`.py-sandboxes(1) env=A='#' "#"`}},
		{"backslash outside quotes escapes nothing", `env=A=x\#y`, []string{`.py-sandboxes(1) env=A=x\`}},
		{"unterminated quote keeps the rest", "env=A=it's # not a comment", []string{".py-sandboxes(1) env=A=it's # not a comment"}},
		{"trailing spaces", "env=A=x   \t", []string{".py-sandboxes(1) env=A=x"}},
		{"leading spaces", "   \tenv=A=x", []string{".py-sandboxes(1) env=A=x"}},
		{"spaces before a comment", "env=A=x    # c", []string{".py-sandboxes(1) env=A=x"}},
		{"blank lines", "\n\n   \n\t\nenv=A=x\n\n", []string{".py-sandboxes(5) env=A=x"}},
		{"template lines", "{{ include_block }}\n  {x=y\nenv=A=x", []string{".py-sandboxes(3) env=A=x"}},
		{"'{' line after a comment strip", "{ # x\nenv=A=x", []string{".py-sandboxes(2) env=A=x"}},
		{"byte order mark", "\xef\xbb\xbfenv=A=x\nenv=B=y", []string{".py-sandboxes(1) env=A=x", ".py-sandboxes(2) env=B=y"}},
		{"CRLF", "env=A=x\r\nenv=B=y\r\n", []string{".py-sandboxes(1) env=A=x", ".py-sandboxes(2) env=B=y"}},
		{"no final newline", "env=A=x\nenv=B=y", []string{".py-sandboxes(1) env=A=x", ".py-sandboxes(2) env=B=y"}},
		{"empty file", "", []string{}},
		{"only comments", "# a\n# b\n", []string{}},
		{"UTF-8 value", "env=A=héllo ⚠ # c", []string{".py-sandboxes(1) env=A=héllo ⚠"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newCoreEnv(t)
			p := e.mustParse(tt.text)
			if diff := cmp.Diff(tt.want, refs(p.Rules())); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLineSyntaxValue checks the key/value split on the env family (whose value is
// kept as written).
func TestLineSyntaxValue(t *testing.T) {
	e := newCoreEnv(t)
	p := e.mustParse("env=A=B=C\nenv=D==\nenv=E='x # y'  # z\n")
	var got []string
	for _, r := range p.EnvRules() {
		got = append(got, r.Name+" -> "+r.Value)
	}
	want := []string{"A -> B=C", "D -> =", "E -> 'x # y'"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("env rules (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"A=B=C", "D==", "E='x # y'"}, p.Environ()); diff != "" {
		t.Errorf("Environ (-want +got):\n%s", diff)
	}
}

func TestLineErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"unknown key", "env=A=x\nfoo=bar", []string{".py-sandboxes(2): Invalid rule 'foo=bar': unknown key 'foo'"}},
		{"no '='", "\n\nsomething", []string{".py-sandboxes(3): Invalid rule 'something': expected KEY=VALUE"}},
		{"empty key", "=value", []string{".py-sandboxes(1): Invalid rule '=value': expected KEY=VALUE (the key is empty)"}},
		{"space before '='", "env =A=x", []string{".py-sandboxes(1): Invalid rule 'env =A=x': expected KEY=VALUE with no space around the key: 'env=A=x'"}},
		{"keys are lower-case", "ENV=A=x\nExpose-ro=/", []string{
			".py-sandboxes(1): Invalid rule 'ENV=A=x': unknown key 'ENV'; did you mean 'env'?",
			".py-sandboxes(2): Invalid rule 'Expose-ro=/': unknown key 'Expose-ro'; did you mean 'expose-ro'?",
		}},
		{"comment removed from the message", "foo=bar # why", []string{".py-sandboxes(1): Invalid rule 'foo=bar': unknown key 'foo'"}},
		{"legacy dashes are not a key", "--env=A=x", []string{".py-sandboxes(1): Invalid rule '--env=A=x': unknown key '--env'; did you mean 'env'?"}},
		{"bare include", "include", []string{`.py-sandboxes(1): Invalid rule 'include': include takes one path in double quotes: include "path"`}},
		{"include with single quotes", "include 'x'", []string{`.py-sandboxes(1): Invalid rule 'include 'x'': include takes one path in double quotes: include "path"`}},
		{"include without quotes", "include x", []string{`.py-sandboxes(1): Invalid rule 'include x': include takes one path in double quotes: include "path"`}},
		{"byte order mark after line 1", "env=A=x\n\xef\xbb\xbfenv=B=y", []string{".py-sandboxes(2): Invalid rule '\ufeffenv=B=y': the line starts with a byte order mark (U+FEFF), allowed at the start of a file only"}},
		{"invalid UTF-8", "env=A=x\nenv=B=\xff\xfe\nbad", []string{
			".py-sandboxes(2): line is not valid UTF-8",
			".py-sandboxes(3): Invalid rule 'bad': expected KEY=VALUE",
		}},
		{"invalid UTF-8 in a comment", "env=A=x # \xff", []string{".py-sandboxes(1): line is not valid UTF-8"}},
		{"every error, in line order", "z=1\ny=2\n\nx=3", []string{
			".py-sandboxes(1): Invalid rule 'z=1': unknown key 'z'",
			".py-sandboxes(2): Invalid rule 'y=2': unknown key 'y'",
			".py-sandboxes(4): Invalid rule 'x=3': unknown key 'x'",
		}},
		{"same error twice on one line is reported once", "env=A=${A:B}${A:B}", []string{
			`.py-sandboxes(1): unsupported substitution "${A:B}": expected ${NAME} or ${NAME:-default}`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newCoreEnv(t).wantErrs(tt.text, tt.want...)
		})
	}
}

// TestLineErrorText checks the whole text of a ConfigErrors: the headline, then one
// line per problem.
func TestLineErrorText(t *testing.T) {
	e := newCoreEnv(t)
	_, err := e.parse("a=1\nb=2")
	want := "Syntax error in config files.\n.py-sandboxes(1): Invalid rule 'a=1': unknown key 'a'\n.py-sandboxes(2): Invalid rule 'b=2': unknown key 'b'"
	if err == nil || err.Error() != want {
		t.Errorf("error text:\n%v\nwant:\n%s", err, want)
	}
}

// TestRefDisplay checks how a file is named in messages: relative to the current
// directory, else "~/..." under the home directory, else absolute.
func TestRefDisplay(t *testing.T) {
	e := newCoreEnv(t)
	other := t.TempDir()
	tests := []struct {
		file string
		want string
	}{
		{e.path(".py-sandboxes"), ".py-sandboxes(1): Invalid rule 'x': expected KEY=VALUE"},
		{e.path("sub/dir/p"), "sub/dir/p(1): Invalid rule 'x': expected KEY=VALUE"},
		{e.path("~/.config/p"), "~/.config/p(1): Invalid rule 'x': expected KEY=VALUE"},
		{other + "/p", other + "/p(1): Invalid rule 'x': expected KEY=VALUE"},
	}
	for _, tt := range tests {
		e.write(tt.file, "x")
		_, err := e.load(tt.file)
		if diff := cmp.Diff([]string{tt.want}, errLines(t, err)); diff != "" {
			t.Errorf("Load(%s) (-want +got):\n%s", tt.file, diff)
		}
	}
	// The rules of Options.Rules are "<arg>", without a line.
	e.args = []string{"y=1"}
	_, err := e.parse("")
	if diff := cmp.Diff([]string{"<arg>: Invalid rule 'y=1': unknown key 'y'"}, errLines(t, err)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestRefString(t *testing.T) {
	tests := []struct {
		ref  Ref
		want string
	}{
		{Ref{File: "/a/b", Line: 3, Name: "b"}, "b(3)"},
		{Ref{File: "/a/b", Line: 3}, "/a/b(3)"},
		{Ref{File: "/a/b", Name: "b"}, "b"},
		{argRef, "<arg>"},
		{Ref{}, ""},
	}
	for _, tt := range tests {
		if got := tt.ref.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.ref, got, tt.want)
		}
	}
	if !argRef.IsArg() || (Ref{File: "/x"}).IsArg() {
		t.Error("IsArg")
	}
	for _, tt := range []struct {
		refs []Ref
		want string
	}{
		{nil, ""},
		{[]Ref{{Name: "a", Line: 1}}, "a(1)"},
		{[]Ref{{Name: "a", Line: 1}, {Name: "b", Line: 2}}, "a(1) and b(2)"},
		{[]Ref{{Name: "a", Line: 1}, {Name: "b", Line: 2}, argRef}, "a(1), b(2) and <arg>"},
	} {
		if got := joinRefs(tt.refs); got != tt.want {
			t.Errorf("joinRefs = %q, want %q", got, tt.want)
		}
	}
}

// TestArgRules checks the rules given by code or on the command line: read before
// the files, "<arg>" provenance, one rule per entry (a line break is refused: it
// would let a value inject other rules).
func TestArgRules(t *testing.T) {
	e := newCoreEnv(t)
	e.args = []string{"env=A=arg", "  env=B=two  ", ""}
	p := e.mustParse("env=D=file")
	want := []string{"<arg> env=A=arg", "<arg> env=B=two", ".py-sandboxes(1) env=D=file"}
	if diff := cmp.Diff(want, refs(p.Rules())); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	e.args = []string{"env=B=two\nnet=ALLOW|*|*|*|*"}
	_, err := e.parse("")
	if diff := cmp.Diff([]string{`<arg>: Invalid rule "env=B=two\nnet=ALLOW|*|*|*|*": a rule value cannot hold a line break`}, errLines(t, err)); diff != "" {
		t.Errorf("line break (-want +got):\n%s", diff)
	}
	// include is only for files.
	e.args = []string{`include "x"`}
	_, err = e.parse("")
	if diff := cmp.Diff([]string{`<arg>: Invalid rule 'include "x"': include is only allowed in a rule file`}, errLines(t, err)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestParseWithoutName checks Parse with no file name: the text is read as rules given
// by code.
func TestParseWithoutName(t *testing.T) {
	e := newCoreEnv(t)
	p, err := Parse(t.Context(), "", []byte("env=A=x\n\nenv=B=y # c"), e.opts())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"<arg>(1) env=A=x", "<arg>(3) env=B=y"}, refs(p.Rules())); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if p.Path != "" {
		t.Errorf("Path = %q", p.Path)
	}
	p, err = Parse(t.Context(), "rel/name", nil, e.opts())
	if err != nil {
		t.Fatal(err)
	}
	if want := e.path("rel/name"); p.Path != want {
		t.Errorf("Path = %q, want %q", p.Path, want)
	}
}

// TestContextCanceled checks that a canceled context stops the load.
func TestContextCanceled(t *testing.T) {
	e := newCoreEnv(t)
	ctx, cancel := contextWithCancel(t)
	cancel()
	_, err := Parse(ctx, e.path(DefaultName), []byte("env=A=x"), e.opts())
	if err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Errorf("err = %v, want context canceled", err)
	}
}
