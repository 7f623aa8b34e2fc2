package mcp

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeNames: any bytes give names or an error naming the place, never
// a panic; every name is a Python identifier.
func FuzzDecodeNames(f *testing.F) {
	for _, s := range []string{
		`{"a": 1, "b": [1.5, true, null, "x"], "c": {"z": 1, "a": 2}}`,
		`{"n": 123456789012345678901234567890, "m": -0, "f": 1e400}`,
		`{"a": {"a": {"a": [[[[[]]]]]}}}`, `[1]`, `{"not-a-name": 1}`, `{"a": 1} 2`, `{"a":`, `null`, ``,
		`{"a": "\ud800"}`, `{"a": 1, "a": 2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		names, err := decodeNames(b)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error")
			}
			return
		}
		for k := range names {
			if !isIdentifier(k) {
				t.Fatalf("%q is not an identifier", k)
			}
		}
	})
}

// FuzzDecodeArgs: the arguments of eval_python, checked against the schema
// then decoded, never panic.
func FuzzDecodeArgs(f *testing.F) {
	ts := mustSchema(evalPythonInputSchema)
	for _, s := range []string{
		`{"source": "1+1"}`, `{"source": "a", "names": {"a": 1e999}}`, `{"source": 1}`, `{"source": "a", "mode": "run"}`,
		`{"source": "a", "extra": 1}`, `[]`, `{"source": "a"} {}`, `{"source": "a", "names": {"a": -1e999}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var in evalInput
		if err := ts.decodeArgs(json.RawMessage(b), &in); err != nil {
			return
		}
		if _, err := decodeNames(in.Names); err != nil {
			return
		}
	})
}
