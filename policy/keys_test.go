package policy

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestKeys: every key Keys and LegacyKeys list is one the loader accepts (a
// rule with it is never refused as an unknown key), each once, and a key
// outside them is refused as unknown.
func TestKeys(t *testing.T) {
	keys := Keys()
	if len(keys) < 20 || keys[0] != "env" || !slices.Contains(keys, "eval-max-leaked-threads") || !slices.Contains(keys, "remote-result-guard") {
		t.Errorf("Keys() = %q", keys)
	}
	all := append(slices.Clone(keys), LegacyKeys()...)
	seen := map[string]bool{}
	for _, k := range all {
		if seen[k] {
			t.Errorf("key %q listed twice", k)
		}
		seen[k] = true
		if k != strings.ToLower(k) || strings.ContainsAny(k, "=. ") {
			t.Errorf("key %q is not a plain lower-case key", k)
		}
		if msg := ruleMessage(t, k+"=x"); strings.Contains(msg, "unknown key") || strings.Contains(msg, "unknown eval key") {
			t.Errorf("the loader refuses the key %q of Keys: %s", k, msg)
		}
	}
	for _, k := range []string{"expose", "exec", "eval-nope", "python", "net-rule"} {
		if msg := ruleMessage(t, k+"=x"); !strings.Contains(msg, "unknown key '"+k+"'") && !strings.Contains(msg, "unknown eval key '"+k+"'") {
			t.Errorf("%s=x: %q, want an unknown key", k, msg)
		}
	}
	// Keys is a copy.
	Keys()[0] = "changed"
	LegacyKeys()[0] = "changed"
	if Keys()[0] != "env" || LegacyKeys()[0] != "set-env" {
		t.Error("Keys or LegacyKeys shares its slice")
	}
}

// ruleMessage returns the message of the first error of a one-rule policy
// ("" when it loads).
func ruleMessage(t *testing.T, rule string) string {
	t.Helper()
	e := newCoreEnv(t)
	e.args = []string{rule}
	_, err := e.parse("")
	var ce ConfigErrors
	if !errors.As(err, &ce) || len(ce) == 0 {
		return ""
	}
	return ce[0].Msg
}

// TestUnknownKeySuggestion: a typo of a key is answered with the key meant,
// the narrower grant first on a tie; a word far from every key is not.
func TestUnknownKeySuggestion(t *testing.T) {
	for _, c := range []struct{ rule, want string }{
		{"expose-r=/tmp", "Invalid rule 'expose-r=/tmp': unknown key 'expose-r'; did you mean 'expose-ro'?"},
		{"expsoe-rw=/tmp", "Invalid rule 'expsoe-rw=/tmp': unknown key 'expsoe-rw'; did you mean 'expose-rw'?"},
		{"python-imprt=json", "Invalid rule 'python-imprt=json': unknown key 'python-imprt'; did you mean 'python-import'?"},
		{"PY-SANDBOX=false", "Invalid rule 'PY-SANDBOX=false': unknown key 'PY-SANDBOX'; did you mean 'py-sandbox'?"},
		{"remote-result-guards=true", "Invalid rule 'remote-result-guards=true': unknown key 'remote-result-guards'; did you mean 'remote-result-guard'?"},
		{"ignroe=*.key", "Invalid rule 'ignroe=*.key': unknown key 'ignroe'; did you mean 'ignore'?"},
		{"binds=a,a", "Invalid rule 'binds=a,a': unknown key 'binds'"},
		{"zzz=1", "Invalid rule 'zzz=1': unknown key 'zzz'"},
		{strings.Repeat("k", 100) + "=1", "Invalid rule '" + strings.Repeat("k", 100) + "=1': unknown key '" + strings.Repeat("k", 100) + "'"},
		{"landlok.unix-sockets=allow", "Invalid rule 'landlok.unix-sockets=allow': unknown provider 'landlok'; did you mean 'landlock.unix-sockets'?"},
	} {
		if diff := cmp.Diff(c.want, ruleMessage(t, c.rule)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.rule, diff)
		}
	}
}

// BenchmarkUnknownKeys parses a 256 KiB file of lines with unknown keys of
// various lengths (the suggestions' cost).
func BenchmarkUnknownKeys(b *testing.B) {
	var sb strings.Builder
	for i := 0; sb.Len() < 256<<10; i++ {
		sb.WriteString(strings.Repeat("k", 1+i%30) + "x=\n")
	}
	data := []byte(sb.String())
	opts := &Options{Dir: "/", Home: "/", Env: []string{}, Logger: slog.New(slog.DiscardHandler)}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(context.Background(), "", data, opts); err == nil {
			b.Fatal("no error")
		}
	}
}
