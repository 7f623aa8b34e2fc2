package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func substEnv(kv ...string) lookupFunc {
	m := map[string]string{}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		m[k] = v
	}
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

func TestSubstitute(t *testing.T) {
	env := substEnv("A=a", "B=bee", "EMPTY=", "N=A", "PREFIX=TM", "TMP=/var/tmp",
		"R=${A}", "R2=${A:-x}", "BRACE=}", "SELF=SELF", "DOLLAR=$", "OPEN={", "NAME_OF_R=R", "BAD_NAME=${A}")
	tests := []struct {
		in, want string
	}{
		{"", ""},
		{"plain", "plain"},
		{"${A}", "a"},
		{"x${A}y${B}z", "xaybeez"},
		{"${A}${A}", "aa"},
		{"${UNSET}", ""},
		{"[${UNSET}]", "[]"},
		{"${A:-def}", "a"},
		{"${UNSET:-def}", "def"},
		{"${EMPTY:-def}", "def"},
		{"${EMPTY}", ""},
		{"${UNSET:-}", ""},
		{"${UNSET:-a b:c=d}", "a b:c=d"},
		{"${UNSET:-with $ and { inside}", "with $ and { inside"},
		{"${UNSET:=legacy}", "legacy"},
		{"${A:=legacy}", "a"},
		{"${EMPTY:=legacy}", "legacy"},
		// Nesting in the default.
		{"${TMPDIR:-${TEMP:-${TMP:-/tmp}}}", "/var/tmp"},
		{"${TMPDIR:-${TEMP:-${NOTMP:-/tmp}}}", "/tmp"},
		{"${UNSET:-${A}/x}", "a/x"},
		{"${UNSET:-pre${A}post}", "preapost"},
		// Nesting in the name.
		{"${${N}}", "a"},
		{"${${PREFIX}P}", "/var/tmp"},
		{"${${UNSET:-A}}", "a"},
		{"${${N}:-d}", "a"},
		// Environment values are never expanded again.
		{"${R}", "${A}"},
		{"${R2}", "${A:-x}"},
		{"${UNSET:-${R}}", "${A}"},
		{"${${NAME_OF_R}}", "${A}"},
		{"${BRACE}${A}", "}a"},
		{"${DOLLAR}{A}", "${A}"},
		{"$${A}", "$a"},
		{"${DOLLAR}${OPEN}A}", "${A}"},
		// Things that are not substitutions.
		{"$A", "$A"},
		{"$", "$"},
		{"a$", "a$"},
		{"$$", "$$"},
		{"{A}", "{A}"},
		{"$ {A}", "$ {A}"},
		{"}", "}"},
		{"${A}}", "a}"},
		{"${UNSET:-x}}", "x}"},
		// The longest nesting allowed.
		{strings.Repeat("${UNSET:-", maxSubstDepth) + "deep" + strings.Repeat("}", maxSubstDepth), "deep"},
		{strings.Repeat("${", maxSubstDepth) + "SELF" + strings.Repeat("}", maxSubstDepth), "SELF"},
	}
	for _, tt := range tests {
		got, err := substitute(tt.in, env)
		if err != nil || got != tt.want {
			t.Errorf("substitute(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestSubstituteErrors(t *testing.T) {
	env := substEnv("A=a", "BAD_NAME=${A}", "SPACE=A B", "SELF=SELF")
	const expected = ": expected ${NAME} or ${NAME:-default}"
	tests := []struct {
		in, want string
	}{
		{"${A:B}", `unsupported substitution "${A:B}"` + expected},
		{"${A:B}x${C}", `unsupported substitution "${A:B}"` + expected},
		{"${}", `unsupported substitution "${}"` + expected},
		{"${A-B}", `unsupported substitution "${A-B}"` + expected},
		{"${A+B}", `unsupported substitution "${A+B}"` + expected},
		{"${A:?B}", `unsupported substitution "${A:?B}"` + expected},
		{"${A:+B}", `unsupported substitution "${A:+B}"` + expected},
		{"${ A}", `unsupported substitution "${ A}"` + expected},
		{"${A }", `unsupported substitution "${A }"` + expected},
		{"${1A}", `unsupported substitution "${1A}"` + expected},
		{"${A.B}", `unsupported substitution "${A.B}"` + expected},
		{"${*}", `unsupported substitution "${*}"` + expected},
		{"${A*}", `unsupported substitution "${A*}"` + expected},
		{"${:-x}", `unsupported substitution "${:"` + expected},
		{"${A:", `unsupported substitution "${A:"` + expected},
		{"${A:-", `unterminated substitution "${A:-"`},
		{"${A", `unterminated substitution "${A"`},
		{"${", `unterminated substitution "${"`},
		{"x${A:-y", `unterminated substitution "${A:-y"`},
		{"${A:-${B}", `unterminated substitution "${A:-${B}"`},
		{"${${A}", `unterminated substitution "${${A}"`},
		{"${UNSET:-${A:B}}", `unsupported substitution "${A:B}"` + expected},
		// A name read from the environment is checked too (never expanded).
		{"${${BAD_NAME}}", `unsupported substitution "${${BAD_NAME}}"` + expected},
		{"${${SPACE}}", `unsupported substitution "${${SPACE}}"` + expected},
		// Deeper than the limit.
		{strings.Repeat("${UNSET:-", maxSubstDepth+1) + "x" + strings.Repeat("}", maxSubstDepth+1), "substitution nested more than 32 levels deep"},
		{strings.Repeat("${", maxSubstDepth+1) + "SELF" + strings.Repeat("}", maxSubstDepth+1), "substitution nested more than 32 levels deep"},
	}
	for _, tt := range tests {
		got, err := substitute(tt.in, env)
		if err == nil {
			t.Errorf("substitute(%q) = %q, want error %q", tt.in, got, tt.want)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("substitute(%q) error:\n got %s\nwant %s", tt.in, err, tt.want)
		}
	}
}

// TestSubstitutePathological feeds hostile inputs: no stack overflow, no hang, linear
// time.
func TestSubstitutePathological(t *testing.T) {
	env := substEnv("A=a")
	const n = 200_000
	tests := []struct {
		in      string
		wantErr bool
	}{
		{strings.Repeat("${", n), true},
		{strings.Repeat("${A:-", n) + strings.Repeat("}", n), true},
		{strings.Repeat("${", n) + "A" + strings.Repeat("}", n), true},
		{strings.Repeat("${A}", n), false},
		{strings.Repeat("${UNSET:-x}", n), false},
		{strings.Repeat("$", n), false},
		{strings.Repeat("}", n), false},
		{strings.Repeat("${A:B}", n), true},
		{strings.Repeat("$${", n), true},
	}
	for _, tt := range tests {
		withTimeout(t, 10*time.Second, func() {
			start := time.Now()
			_, err := substitute(tt.in, env)
			if (err != nil) != tt.wantErr {
				t.Errorf("substitute(%.20q...) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if el := time.Since(start); el > 2*time.Second {
				t.Errorf("substitute(%.20q...) took %v", tt.in, el)
			}
		})
	}
}

// TestSubstitutionInRules checks where substitution applies and that its errors name
// the file and line.
func TestSubstitutionInRules(t *testing.T) {
	e := newCoreEnv(t, "OS_SANDBOX=bwrap", "PORT=8000", "DATA=data", "IMPORTS=json, csv", "R=${PORT}")
	e.mkdir("data")
	p := e.mustParse(strings.Join([]string{
		"os-sandbox=${OS_SANDBOX:-auto}",
		"expose-ro=./${DATA}",
		"net=ALLOW|tcp|0.0.0.0/0|${PORT:-80}|IN",
		"python-import=${IMPORTS}",
		"qemu.use_kvm=${QEMU_USE_KVM:-true}",
		"ignore=${R}",
	}, "\n"))
	var got []string
	for _, r := range p.Rules() {
		got = append(got, r.Key+" = "+r.Value)
	}
	want := []string{
		"os-sandbox = bwrap",
		"expose-ro = ./data",
		"net = ALLOW|tcp|0.0.0.0/0|8000|IN",
		"python-import = json, csv",
		"qemu.use_kvm = true",
		"ignore = ${PORT}",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
	if os, _ := p.OSSandbox(); os != "bwrap" {
		t.Errorf("OSSandbox = %q", os)
	}

	e.wantErrs("env=A=1\nos-sandbox=${A:B}\nexpose-ro=${X\nignore=${}\nnet=ALLOW|tcp|${A-B}|1|IN\nunknown=${A:B}",
		`.py-sandboxes(2): unsupported substitution "${A:B}": expected ${NAME} or ${NAME:-default}`,
		`.py-sandboxes(3): unterminated substitution "${X"`,
		`.py-sandboxes(4): unsupported substitution "${}": expected ${NAME} or ${NAME:-default}`,
		`.py-sandboxes(5): unsupported substitution "${A-B}": expected ${NAME} or ${NAME:-default}`,
		`.py-sandboxes(6): unsupported substitution "${A:B}": expected ${NAME} or ${NAME:-default}`,
	)
	// Nesting too deep in a file: an error, not a crash.
	deep := "ignore=" + strings.Repeat("${A:-", 10_000) + strings.Repeat("}", 10_000)
	e.wantErrs(deep, ".py-sandboxes(1): substitution nested more than 32 levels deep")
	// The key is never substituted.
	e.wantErrs("${KEY}=x", ".py-sandboxes(1): Invalid rule '${KEY}=x': unknown key '${KEY}'")
}

// TestSubstituteBounded checks that a value built by repeating a long variable is
// refused rather than allowed to grow without bound.
func TestSubstituteBounded(t *testing.T) {
	env := substEnv("BIG=" + strings.Repeat("x", 100_000))
	if v, err := substitute(strings.Repeat("${BIG}", 10), env); err != nil || len(v) != 1_000_000 {
		t.Errorf("10 copies: len %d, %v", len(v), err)
	}
	want := "substitution gives a value longer than 1048576 bytes"
	for _, in := range []string{
		strings.Repeat("${BIG}", 11),
		strings.Repeat("${BIG}", 100_000),
		"${UNSET:-" + strings.Repeat("${BIG}", 11) + "}",
		"${" + strings.Repeat("${BIG}", 11) + "}",
	} {
		if _, err := substitute(in, env); err == nil || err.Error() != want {
			t.Errorf("substitute(%.20q...) error = %v, want %q", in, err, want)
		}
	}
}
