package policy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// reparse parses the printed form of p as a file in another directory (so that
// nothing relative to the first one can leak through), with the same environment.
func reparse(t *testing.T, e *coreEnv, p *Policy) (*Policy, string) {
	t.Helper()
	text := p.String()
	o := e.opts()
	o.Rules, o.Learn = nil, false
	o.Dir = t.TempDir()
	q, err := Parse(context.Background(), filepath.Join(o.Dir, "printed"), []byte(text), o)
	if err != nil {
		t.Fatalf("the printed policy does not parse: %v\n--- printed:\n%s", err, text)
	}
	return q, text
}

func checkRoundTrip(t *testing.T, e *coreEnv, p *Policy) string {
	t.Helper()
	q, text := reparse(t, e, p)
	if diff := cmp.Diff(digest(p), digest(q)); diff != "" {
		t.Errorf("the printed policy differs (-original +printed):\n%s\n--- printed:\n%s", diff, text)
	}
	// Printing is stable: the printed policy prints the same rules.
	var a, b []string
	for _, l := range strings.Split(text, "\n") {
		if l = stripComment(l); l != "" {
			a = append(a, l)
		}
	}
	for _, l := range strings.Split(q.String(), "\n") {
		if l = stripComment(l); l != "" {
			b = append(b, l)
		}
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("printing the printed policy gives other rules (-first +second):\n%s", diff)
	}
	return text
}

func TestFormatRoundTrip(t *testing.T) {
	e, global := composeEnv(t,
		`# project
env=TERM=${TERM}
set-env=MODE=fixed # legacy spelling
env=*_KEY=${*_KEY}
unenv=SECRET_KEY
include "~/.config/py-sandboxes/user-py-sandboxes.profile"
expose-ro=./data
expose-ro=data
expose-ro=./link
bind=./tmp,tmp
ignore=.env
ignore=~/secrets
net=ALLOW|tcp|192.168.1.10|443|OUT
net=ALLOW|TCP|pinned.test|80,8000-8100|OUT
net=ALLOW|udp|::1|53|IN,OUT
include "${GLOBAL_PROFILE}"
python-import=json, csv
python-api=ALLOW:threads,os.system
python-api=DENY:os.system
eval-syntax=arith, compare
eval-timeout=2s
eval-syntax:llm=loop
eval-call:llm=len
eval-call:llm=DENY:eval
eval-max-iterations:llm=100_000
os-sandbox=${OS_SANDBOX:-subprocess}
remote-result-mode=objects
remote-result-guard=false
bwrap.share-net=yes
qemu.memory=${QEMU_MEMORY:-2048}`,
		`# user profile
env=API_KEY=${API_KEY}
learn=user.learn
py-sandbox=true
expose-rw=~/hdir`,
		`net=DENY|*|10.0.0.0/8|*|OUT
unset-env=*_TOKEN
port=8080`)
	e.env = append(e.env, "A_KEY=a", "SECRET_KEY=s", "GH_TOKEN=t")
	e.mkdir("~/hdir")
	if err := os.Symlink(e.path("data"), e.path("link")); err != nil {
		t.Fatal(err)
	}
	e.args = []string{"env=ARG=1", "eval-timeout=1s", "eval-max-iterations:llm=5", "os-sandbox=bwrap"}
	p := e.mustLoad(".py-sandboxes")
	text := checkRoundTrip(t, e, p)

	// The printed rules, comments aside.
	var got []string
	for _, l := range strings.Split(text, "\n") {
		if l = stripComment(l); l != "" {
			got = append(got, l)
		}
	}
	want := []string{
		"env=ARG=1",
		"eval-timeout=1s",
		"eval-max-iterations:llm=5",
		"os-sandbox=bwrap",
		"env=TERM=${TERM}",
		"env=MODE=fixed",
		"env=*_KEY=${*_KEY}",
		"unenv=SECRET_KEY",
		"env=API_KEY=${API_KEY}",
		"learn=" + e.path("~/.config/py-sandboxes/user.learn"),
		"py-sandbox=true",
		"expose-rw=" + e.path("~/hdir"),
		"expose-ro=" + e.path("data"),
		"expose-ro=" + e.path("data"),
		"expose-ro=" + e.path("data"),
		"expose-rw=" + e.path("tmp"),
		"ignore=.env",
		"ignore=" + e.path("~/secrets"),
		"net=ALLOW|tcp|192.168.1.10|443|OUT",
		"net=ALLOW|TCP|pinned.test|80,8000-8100|OUT",
		"net=ALLOW|udp|::1|53|IN,OUT",
		"net=DENY|*|10.0.0.0/8|*|OUT",
		"unenv=*_TOKEN",
		"port=8080",
		"python-import=json, csv",
		"python-api=ALLOW:threads,os.system",
		"python-api=DENY:os.system",
		"eval-syntax=arith, compare",
		"eval-syntax:llm=loop",
		"eval-call:llm=len",
		"eval-call:llm=DENY:eval",
		"remote-result-mode=objects",
		"remote-result-guard=false",
		"bwrap.share-net=yes",
		"qemu.memory=2048",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("printed rules (-want +got):\n%s", diff)
	}
	// Each rule names its origin.
	for _, l := range []string{
		"env=ARG=1  # <arg>",
		"env=TERM=${TERM}  # .py-sandboxes(2)",
		"env=API_KEY=${API_KEY}  # ~/.config/py-sandboxes/user-py-sandboxes.profile(2)",
		"net=DENY|*|10.0.0.0/8|*|OUT  # " + global + "(1)",
	} {
		if !strings.Contains(text, "\n"+l+"\n") {
			t.Errorf("printed text lacks %q:\n%s", l, text)
		}
	}
	if !strings.HasPrefix(text, "# Rules loaded from "+e.path(".py-sandboxes")+"\n") {
		t.Errorf("header: %q", text[:min(len(text), 80)])
	}
	// WriteTo writes String's text and counts it.
	var b strings.Builder
	n, err := p.WriteTo(&b)
	if err != nil || n != int64(len(text)) || b.String() != text {
		t.Errorf("WriteTo = %d, %v", n, err)
	}
}

func TestFormatLocked(t *testing.T) {
	e := newCoreEnv(t)
	p := e.mustParse("env=A=1\nlearn=FALSE")
	q, text := reparse(t, e, p)
	if q.Locked() == nil || !strings.Contains(text, "\nlearn=false  # .py-sandboxes(2)\n") {
		t.Errorf("lock lost:\n%s", text)
	}
}

// TestFormatTrickyValues checks values that cannot be printed as they resolved: the
// rule is then printed as written, or its comment is moved to a line of its own.
func TestFormatTrickyValues(t *testing.T) {
	e := newCoreEnv(t,
		"HASH=a#b", "DOLLAR=${NOT_EXPANDED}", "NL=x\ny", "TRAIL=v  ", "QUOTE=it's", "NOT_EXPANDED=oops")
	e.mkdir("d")
	tests := []struct {
		name, text string
		wantLine   string // a line of the printed text
	}{
		{"'#' from the environment", "ignore=${HASH}", "ignore=${HASH}  # .py-sandboxes(1)"},
		{"'${' from the environment", "ignore=${DOLLAR}", "ignore=${DOLLAR}  # .py-sandboxes(1)"},
		{"line break from the environment", "ignore=x${NL}", "ignore=x${NL}  # .py-sandboxes(1)"},
		{"trailing spaces from the environment", "bwrap.opt=${TRAIL}", "bwrap.opt=${TRAIL}  # .py-sandboxes(1)"},
		{"unbalanced quote", "ignore=it's", "ignore=it's"},
		{"unbalanced quote from the environment", "ignore=${QUOTE}", "ignore=it's"},
		{"quoted '#'", `ignore="#x"`, `ignore="#x"  # .py-sandboxes(1)`},
		{"env value with a quote", "env=Q=it's", "env=Q=it's"},
		{"env value with a quoted '#'", "env=Q='a # b'", "env=Q='a # b'  # .py-sandboxes(1)"},
		{"expose through a substitution", "expose-ro=${UNSET:-d}", "expose-ro=" + e.path("d") + "  # .py-sandboxes(1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := e.mustParse(tt.text)
			text := checkRoundTrip(t, e, p)
			if !strings.Contains(text, "\n"+tt.wantLine+"\n") {
				t.Errorf("printed text lacks %q:\n%s", tt.wantLine, text)
			}
		})
	}
	// The comment of a rule with an open quote is on the line before it.
	p := e.mustParse("ignore=it's")
	if got := p.String(); !strings.HasSuffix(got, "\n# .py-sandboxes(1)\nignore=it's\n") {
		t.Errorf("printed:\n%s", got)
	}
}

// TestFormatBuilder checks a policy built by code: no header, "<arg>" comments, and
// the printed file means the same.
func TestFormatBuilder(t *testing.T) {
	e := newCoreEnv(t)
	e.mkdir("data")
	p, err := NewBuilder().Env("A", "1").ExposeRO("./data").Net("ALLOW", "tcp", "192.0.2.1", "443", "OUT").Build(t.Context(), e.opts())
	if err != nil {
		t.Fatal(err)
	}
	want := "env=A=1  # <arg>\nexpose-ro=" + e.path("data") + "  # <arg>\nnet=ALLOW|tcp|192.0.2.1|443|OUT  # <arg>\n"
	if got := p.String(); got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
	checkRoundTrip(t, e, p)
	if got := NewBuilder(); got == nil {
		t.Fatal("NewBuilder")
	}
	empty, err := NewBuilder().Build(t.Context(), e.opts())
	if err != nil {
		t.Fatal(err)
	}
	if s := empty.String(); s != "" {
		t.Errorf("empty policy prints %q", s)
	}
}

// TestFormatExamples round-trips the example files of the reference.
func TestFormatExamples(t *testing.T) {
	e := newCoreEnv(t, "TERM=xterm", "My_ENV=x")
	e.mkdir("tmp", "app", "data", "~/.claude/skills/my-skill/scripts")
	for i, text := range []string{fuzzSeeds[0], fuzzSeeds[2], fuzzSeeds[3], fuzzSeeds[4], fuzzSeeds[5], fuzzSeeds[6], fuzzSeeds[7], fuzzSeeds[8]} {
		text = strings.ReplaceAll(text, "expose-ro=/usr/local/lib\n", "")
		p, err := e.parse(text)
		if err != nil {
			t.Errorf("example %d: %v", i, err)
			continue
		}
		checkRoundTrip(t, e, p)
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(b []byte) (int, error) {
	if w.n+len(b) > 10 {
		return 0, errors.New("disk full")
	}
	w.n += len(b)
	return len(b), nil
}

func TestWriteToError(t *testing.T) {
	e := newCoreEnv(t)
	var b strings.Builder
	for range 1000 {
		b.WriteString("python-import=json\n")
	}
	p := e.mustParse(b.String())
	if _, err := p.WriteTo(&failWriter{}); err == nil || err.Error() != "disk full" {
		t.Errorf("WriteTo error = %v", err)
	}
}

// TestFormatStrangeFileName checks that a file name holding a line break cannot break
// the printed file.
func TestFormatStrangeFileName(t *testing.T) {
	e := newCoreEnv(t)
	p, err := Parse(t.Context(), e.path("a\nnet=ALLOW|*|*|*|*"), []byte("env=A=1"), e.opts())
	if err != nil {
		t.Fatal(err)
	}
	q, text := reparse(t, e, p)
	if len(q.Rules()) != 1 || strings.Count(text, "\n") != 2 {
		t.Errorf("printed:\n%s", text)
	}
}

func TestStrings(t *testing.T) {
	for _, tt := range []struct {
		got, want string
	}{
		{ReadOnly.String(), "ro"},
		{ReadWrite.String(), "rw"},
		{Mode(0).String(), "?"},
		{Rule{Raw: "env=A=1"}.String(), "env=A=1"},
		{Warning{Msg: "m"}.String(), "m"},
		{Warning{Ref: Ref{Name: "f", Line: 2}, Msg: "m"}.String(), "f(2): m"},
		{(&ConfigError{Msg: "m"}).Error(), "m"},
		{(&ConfigError{Ref: Ref{Name: "f", Line: 1}, Also: []Ref{argRef, {Name: "g"}}, Msg: "m"}).Error(), "f(1), <arg> and g: m"},
		{ConfigErrors{}.Error(), Headline},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
