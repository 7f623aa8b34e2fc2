package transport

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestParseJSONAgainstCPython: ParseJSON gives the value json.loads gives (the
// oracle pickles what json.loads returned; both sides are compared decoded).
func TestParseJSONAgainstCPython(t *testing.T) {
	texts := []string{
		`null`, `true`, `false`, `0`, `-7`, `9223372036854775807`, `9223372036854775808`,
		`-123456789012345678901234567890`, `1.5`, `-0.0`, `1e300`, `1E-5`, `"é\u00e9\ud83d\ude00"`,
		`[]`, `{}`, `[1, [2, [3, {"a": null}]]]`, ` {"b": 1, "a": 2, "b": 3} `,
		`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,` +
			`"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k3":"again","k17":"last"}`,
		`"` + strings.Repeat("x", 300) + `"`, strings.Repeat("9", 4300),
	}
	in, err := json.Marshal(texts)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(pythonExe(t), "-c", `
import json, pickle, sys
for s in json.loads(sys.stdin.read()):
    p = pickle.dumps(json.loads(s), protocol=5)
    sys.stdout.write(p.hex() + "\n")
`)
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	lines := strings.Fields(string(out))
	if len(lines) != len(texts) {
		t.Fatalf("oracle gave %d values for %d texts", len(lines), len(texts))
	}
	for i, text := range texts {
		got, err := ParseJSON([]byte(text))
		if err != nil {
			t.Errorf("ParseJSON(%.40q): %v", text, err)
			continue
		}
		want := mustUnpickle(t, mustHex(t, lines[i]), nil)
		if a, b := repr(normalize(got, false)), repr(normalize(want, false)); a != b {
			t.Errorf("ParseJSON(%.40q) differs from json.loads: %s", text, reprDiff(a, b))
		}
	}
}

func TestParseJSONErrors(t *testing.T) {
	for _, c := range []struct {
		text, want string
		budget     bool
	}{
		{"", "no JSON value", false},
		{"1 2", "extra data", false},
		{"{bad", "invalid character", false},
		{"[1,", "", false},
		{strings.Repeat("[", MaxParseJSONDepth+2) + strings.Repeat("]", MaxParseJSONDepth+2), "nested more than", true},
		{strings.Repeat("9", 4301), "4301 digits", true},
		{"-" + strings.Repeat("9", 4301), "4301 digits", true},
		{"1e999", "out of range", false},
	} {
		v, err := ParseJSON([]byte(c.text))
		if err == nil {
			t.Errorf("ParseJSON(%.40q) = %v; want an error", c.text, v)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "transport: json: ") {
			t.Errorf("ParseJSON(%.40q): %v; want %q", c.text, err, c.want)
		}
		if errors.Is(err, ErrBudget) != c.budget {
			t.Errorf("ParseJSON(%.40q): %v; ErrBudget %v, want %v", c.text, err, !c.budget, c.budget)
		}
	}
	// At the limit it parses.
	deep := strings.Repeat("[", MaxParseJSONDepth+1) + strings.Repeat("]", MaxParseJSONDepth+1)
	if _, err := ParseJSON([]byte(deep)); err != nil {
		t.Errorf("nested %d: %v", MaxParseJSONDepth+1, err)
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzParseJSON: any text parses or fails with an error, never panics; what
// parses converts back with JSON to a text that parses to the same value, and
// Pickle encodes it.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`null`, `[1, "a", {"b": [true, 1.5e3]}]`, `{"a": 1, "a": 2}`, `-0`, `1e400`,
		`123456789012345678901234567890`, `"\ud800"`, `[[[[]]]]`, `{"x": {"y": {}}}`, `"\u0000"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseJSON(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "transport: json: ") {
				t.Fatalf("error without the package's prefix: %v", err)
			}
			return
		}
		out, err := JSON(v)
		if err != nil {
			t.Fatalf("JSON of parsed %s: %v", repr(v), err)
		}
		back, err := ParseJSON(out)
		if err != nil {
			t.Fatalf("JSON %q of parsed %q does not parse: %v", out, data, err)
		}
		if a, b := repr(normalize(v, false)), repr(normalize(back, false)); a != b {
			t.Fatalf("ParseJSON(JSON(v)) differs: %s", reprDiff(a, b))
		}
		if _, err := Pickle(v); err != nil {
			t.Fatalf("parsed %s does not pickle: %v", repr(v), err)
		}
	})
}

// TestParseJSONAtNamesThePlace: an error names where in the value it arises,
// from the name given, keys quoted when they are not plain words.
func TestParseJSONAtNamesThePlace(t *testing.T) {
	for _, c := range []struct{ text, name, want string }{
		{`{"rows": [1, 2, 1e999]}`, "names", "names.rows[2]: number 1e999 out of range"},
		{`{"a b": {"c": [` + strings.Repeat("9", 4301) + `]}}`, "names", `names."a b".c[0]: budget exceeded: integer of 4301 digits`},
		{`[[1], [2, ` + strings.Repeat("[", MaxParseJSONDepth) + `]`, "", "[1][1]"},
		{`1 2`, "x", "x: extra data after the JSON value"},
	} {
		_, err := ParseJSONAt([]byte(c.text), c.name)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseJSONAt(%.60q, %q) = %v, want an error naming %q", c.text, c.name, err, c.want)
		}
	}
	if _, err := ParseJSONAt([]byte(`{"a": `+strings.Repeat("9", 4301)+`}`), "n"); !errors.Is(err, ErrBudget) {
		t.Errorf("digits past the limit: %v, want ErrBudget", err)
	}
}
