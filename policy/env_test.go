package policy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestEnviron(t *testing.T) {
	host := []string{
		"HOME=/home/u", "TERM=xterm", "USER=u", "EMPTY=",
		"OPENAI_API_KEY=sk-1", "OTHER_API_KEY=sk-2", "A_KEY=k", "A_KEY_SUFFIX=no",
		"AWS_ID=id", "AWS_SECRET=s", "REF=${HOME}", "PAT_REF=${USER}", "DUP=first", "DUP=second",
	}
	tests := []struct {
		name string
		args []string
		text string
		want []string
		src  map[string]string // variable -> provenance of the rule that set it
	}{
		{name: "nothing by default", text: "", want: []string{}},
		{name: "fixed value", text: "env=USER=sandbox", want: []string{"USER=sandbox"}},
		{name: "copied", text: "env=TERM=${TERM}\nenv=HOME=${HOME}", want: []string{"HOME=/home/u", "TERM=xterm"}},
		{name: "renamed copy", text: "env=MY_TERM=${TERM}", want: []string{"MY_TERM=xterm"}},
		{name: "default", text: "env=LANG=${LANG:-C.UTF-8}\nenv=TERM=${TERM:-dumb}", want: []string{"LANG=C.UTF-8", "TERM=xterm"}},
		{name: "empty host value takes the default", text: "env=E=${EMPTY:-d}", want: []string{"E=d"}},
		{name: "value with '=' and spaces", text: "env=OPTS=a=b c=d", want: []string{"OPTS=a=b c=d"}},
		{name: "spaces around the name", text: "env= SPACED =v", want: []string{"SPACED=v"}},
		{name: "mixed value", text: "env=P=${HOME}/bin:${UNSET:-/usr/bin}", want: []string{"P=/home/u/bin:/usr/bin"}},
		{name: "first host value of a duplicate wins", text: "env=DUP=${DUP}", want: []string{"DUP=first"}},
		{
			name: "host value never expanded again",
			text: "env=REF=${REF}\nenv=PAT_*=${PAT_*}",
			want: []string{"PAT_REF=${USER}", "REF=${HOME}"},
		},
		{name: "glob copy", text: "env=AWS_*=${AWS_*}", want: []string{"AWS_ID=id", "AWS_SECRET=s"}},
		{name: "glob matches the whole name", text: "env=*_KEY=${*_KEY}", want: []string{"A_KEY=k", "OPENAI_API_KEY=sk-1", "OTHER_API_KEY=sk-2"}},
		{name: "glob with a middle star", text: "env=O*_API_*=${O*_API_*}", want: []string{"OPENAI_API_KEY=sk-1", "OTHER_API_KEY=sk-2"}},
		{name: "glob with a literal value", text: "env=*_API_KEY=redacted", want: []string{"OPENAI_API_KEY=redacted", "OTHER_API_KEY=redacted"}},
		{name: "glob with a substituted value", text: "env=AWS_*=${USER}-x", want: []string{"AWS_ID=u-x", "AWS_SECRET=u-x"}},
		{name: "glob matching nothing", text: "env=NOPE_*=${NOPE_*}", want: []string{}},
		{
			name: "forward everything",
			text: "env=*=${*}",
			want: []string{"AWS_ID=id", "AWS_SECRET=s", "A_KEY=k", "A_KEY_SUFFIX=no", "DUP=first", "HOME=/home/u",
				"OPENAI_API_KEY=sk-1", "OTHER_API_KEY=sk-2", "PAT_REF=${USER}", "REF=${HOME}", "TERM=xterm", "USER=u"},
		},
		{
			name: "forward everything but secrets",
			text: "env=*=${*}\nunenv=*_KEY\nunenv=AWS_SECRET\nunenv=DUP\nunenv=*REF",
			want: []string{"AWS_ID=id", "A_KEY_SUFFIX=no", "HOME=/home/u", "TERM=xterm", "USER=u"},
		},
		{name: "unenv exact", text: "env=USER=${USER}\nunenv=USER", want: []string{}},
		// unenv= acts on what the rules before it set (upstream's
		// unenv_only_removes_what_is_already_declared).
		{name: "unenv before env", text: "unenv=USER\nenv=USER=${USER}", want: []string{"USER=u"}},
		{name: "unenv pattern removes a pattern", text: "env=AWS_*=${AWS_*}\nunenv=AWS_S*", want: []string{"AWS_ID=id"}},
		{name: "unenv pattern before env", text: "unenv=AWS_S*\nenv=AWS_*=${AWS_*}", want: []string{"AWS_ID=id", "AWS_SECRET=s"}},
		// Exact beats wildcard in both directions, whatever the order.
		{name: "exact env beats pattern unenv", text: "unenv=*_KEY\nenv=OPENAI_API_KEY=${OPENAI_API_KEY}", want: []string{"OPENAI_API_KEY=sk-1"}},
		{name: "exact env beats pattern unenv, reversed", text: "env=OPENAI_API_KEY=${OPENAI_API_KEY}\nunenv=*_KEY", want: []string{"OPENAI_API_KEY=sk-1"}},
		{name: "exact unenv beats pattern env", text: "env=*_KEY=${*_KEY}\nunenv=A_KEY", want: []string{"OPENAI_API_KEY=sk-1", "OTHER_API_KEY=sk-2"}},
		{name: "exact unenv beats pattern env, reversed", text: "unenv=A_KEY\nenv=*_KEY=${*_KEY}", want: []string{"OPENAI_API_KEY=sk-1", "OTHER_API_KEY=sk-2"}},
		{name: "exact env beats pattern env", text: "env=*_KEY=${*_KEY}\nenv=A_KEY=fixed", want: []string{"A_KEY=fixed", "OPENAI_API_KEY=sk-1", "OTHER_API_KEY=sk-2"}},
		{name: "exact env beats pattern env, reversed", text: "env=A_KEY=fixed\nenv=*_KEY=${*_KEY}", want: []string{"A_KEY=fixed", "OPENAI_API_KEY=sk-1", "OTHER_API_KEY=sk-2"}},
		{name: "exact empty value beats a pattern and sets nothing", text: "env=*_KEY=${*_KEY}\nenv=A_KEY=${UNSET}", want: []string{"OPENAI_API_KEY=sk-1", "OTHER_API_KEY=sk-2"}},
		// At the same level the rules apply in order.
		{name: "env after unenv sets again, exact", text: "env=USER=x\nunenv=USER\nenv=USER=y", want: []string{"USER=y"}},
		{name: "unenv beats env, pattern", text: "env=AWS_*=${AWS_*}\nunenv=AWS_*", want: []string{}},
		// First env= of a level wins.
		{name: "first exact wins", text: "env=USER=one\nenv=USER=two", want: []string{"USER=one"}, src: map[string]string{"USER": ".py-sandboxes(1)"}},
		{name: "first pattern wins", text: "env=AWS_*=one\nenv=*=${*}\nunenv=*_KEY\nunenv=*REF\nunenv=DUP\nunenv=A_KEY_SUFFIX",
			want: []string{"AWS_ID=one", "AWS_SECRET=one", "HOME=/home/u", "TERM=xterm", "USER=u"},
			src:  map[string]string{"AWS_ID": ".py-sandboxes(1)", "HOME": ".py-sandboxes(2)"}},
		{name: "<arg> wins over the file", args: []string{"env=USER=arg"}, text: "env=USER=file", want: []string{"USER=arg"}, src: map[string]string{"USER": "<arg>"}},
		{name: "<arg> unenv removes a file env", args: []string{"unenv=USER"}, text: "env=USER=file", want: []string{}},
		// Empty values set nothing.
		{name: "empty fixed value", text: "env=X=", want: []string{}},
		{name: "unset copy", text: "env=X=${UNSET}", want: []string{}},
		{name: "empty copy", text: "env=X=${EMPTY}", want: []string{}},
		{name: "empty glob copy", text: "env=EMP*=${EMP*}", want: []string{}},
		// Legacy spellings.
		{name: "set-env", text: "set-env=USER=legacy\nset-env=AWS_*=${AWS_*}", want: []string{"AWS_ID=id", "AWS_SECRET=s", "USER=legacy"}},
		{name: "unset-env", text: "env=USER=x\nenv=HOME=${HOME}\nunset-env=USER", want: []string{"HOME=/home/u"}},
		{name: "provenance", text: "# x\nenv=USER=a\nenv=AWS_*=${AWS_*}", want: []string{"AWS_ID=id", "AWS_SECRET=s", "USER=a"},
			src: map[string]string{"USER": ".py-sandboxes(2)", "AWS_ID": ".py-sandboxes(3)", "AWS_SECRET": ".py-sandboxes(3)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newCoreEnv(t, host...)
			e.args = tt.args
			p := e.mustParse(tt.text)
			if diff := cmp.Diff(tt.want, p.Environ(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Environ (-want +got):\n%s", diff)
			}
			for name, want := range tt.src {
				ref, ok := p.EnvSource(name)
				if !ok || ref.String() != want {
					t.Errorf("EnvSource(%s) = %v, %v; want %s", name, ref, ok, want)
				}
			}
			for _, kv := range p.Environ() {
				name, _, _ := strings.Cut(kv, "=")
				if _, ok := p.EnvSource(name); !ok {
					t.Errorf("EnvSource(%s) missing", name)
				}
			}
			if _, ok := p.EnvSource("NOT_SET_BY_ANY_RULE"); ok {
				t.Error("EnvSource of an unset variable")
			}
		})
	}
}

func TestEnvErrors(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"env=FOO", []string{".py-sandboxes(1): Invalid rule 'env=FOO': env= needs NAME=VALUE: write env=FOO=VALUE, or env=FOO=${FOO} to copy the host's value"}},
		{"env=", []string{".py-sandboxes(1): Invalid rule 'env=': env= needs NAME=VALUE: write env=NAME=VALUE, or env=NAME=${NAME} to copy the host's value"}},
		{"env=A*", []string{".py-sandboxes(1): Invalid rule 'env=A*': env= needs NAME=VALUE: write env=NAME=VALUE, or env=NAME=${NAME} to copy the host's value"}},
		{"set-env=FOO", []string{".py-sandboxes(1): Invalid rule 'set-env=FOO': set-env= needs NAME=VALUE: write set-env=FOO=VALUE, or set-env=FOO=${FOO} to copy the host's value"}},
		{"env==x", []string{".py-sandboxes(1): Invalid rule 'env==x': expected a variable name or a pattern with '*'"}},
		{"env=A B=x", []string{".py-sandboxes(1): Invalid rule 'env=A B=x': expected a variable name or a pattern with '*'"}},
		{"unenv=", []string{".py-sandboxes(1): Invalid rule 'unenv=': expected a variable name or a pattern with '*'"}},
		{"unenv=A=B", []string{".py-sandboxes(1): Invalid rule 'unenv=A=B': expected a variable name or a pattern with '*'"}},
		{"unenv=A B", []string{".py-sandboxes(1): Invalid rule 'unenv=A B': expected a variable name or a pattern with '*'"}},
		{"unset-env=", []string{".py-sandboxes(1): Invalid rule 'unset-env=': expected a variable name or a pattern with '*'"}},
		{"env=A=${A:B}", []string{`.py-sandboxes(1): unsupported substitution "${A:B}": expected ${NAME} or ${NAME:-default}`}},
		{"env=A=${A", []string{`.py-sandboxes(1): unterminated substitution "${A"`}},
		{"env=A*=${B*}", []string{`.py-sandboxes(1): unsupported substitution "${B*}": expected ${NAME} or ${NAME:-default}`}},
		{"env=A=${*}", []string{`.py-sandboxes(1): unsupported substitution "${*}": expected ${NAME} or ${NAME:-default}`}},
		{"env=OK=1\nenv=BAD\nunenv=\nenv=ALSO_OK=${X:-1}", []string{
			".py-sandboxes(2): Invalid rule 'env=BAD': env= needs NAME=VALUE: write env=BAD=VALUE, or env=BAD=${BAD} to copy the host's value",
			".py-sandboxes(3): Invalid rule 'unenv=': expected a variable name or a pattern with '*'",
		}},
	}
	for _, tt := range tests {
		newCoreEnv(t).wantErrs(tt.text, tt.want...)
	}
}

func TestEnvRules(t *testing.T) {
	e := newCoreEnv(t, "X=1")
	p := e.mustParse("env=A=${X}\nunenv=B*\nset-env=C*=${C*}\nunset-env=D")
	type envRule struct {
		Key, Name, Value string
		Unset, Pattern   bool
		Line             int
	}
	var got []envRule
	for _, r := range p.EnvRules() {
		got = append(got, envRule{r.Key, r.Name, r.Value, r.Unset, r.Pattern(), r.Ref.Line})
	}
	want := []envRule{
		{"env", "A", "${X}", false, false, 1},
		{"unenv", "B*", "", true, true, 2},
		{"set-env", "C*", "${C*}", false, true, 3},
		{"unset-env", "D", "", true, false, 4},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EnvRules (-want +got):\n%s", diff)
	}
	if got := (&Policy{}).EnvRules(); got != nil {
		t.Errorf("EnvRules of an empty policy = %v", got)
	}
}

// TestEnvHostFromOptions checks that the host environment is Options.Env, never the
// process environment.
func TestEnvHostFromOptions(t *testing.T) {
	t.Setenv("POLICY_TEST_PROCESS_VAR", "leak")
	e := newCoreEnv(t, "ONLY=opts")
	p := e.mustParse("env=*=${*}")
	if diff := cmp.Diff([]string{"ONLY=opts"}, p.Environ()); diff != "" {
		t.Errorf("Environ (-want +got):\n%s", diff)
	}
}

func TestStarMatch(t *testing.T) {
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"", "", true},
		{"", "a", false},
		{"*", "", true},
		{"*", "anything", true},
		{"A", "A", true},
		{"A", "AB", false},
		{"A*", "A", true},
		{"A*", "ABC", true},
		{"A*", "BA", false},
		{"*A", "BA", true},
		{"*A", "AB", false},
		{"A*B", "AB", true},
		{"A*B", "AXXB", true},
		{"A*B", "AXXBX", false},
		{"A*A", "A", false},
		{"*A*A*", "AA", true},
		{"*A*A*", "A", false},
		{"**", "x", true},
		{"A*B*C", "ABBC", true},
		{"A*B*C", "ACB", false},
		{"*_KEY", "A_KEY_SUFFIX", false},
		{"*ab*ab", "xabab", true},
		{"*aab", "aaab", true},
	}
	for _, tt := range tests {
		if got := starMatch(tt.pattern, tt.s); got != tt.want {
			t.Errorf("starMatch(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
	}
}
