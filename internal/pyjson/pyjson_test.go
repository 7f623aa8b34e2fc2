package pyjson

import (
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

var pythons = []string{"/usr/bin/python3", "/root/.pyenv/versions/3.12.1/bin/python3.12", "/root/.pyenv/versions/3.13.0/bin/python3.13"}

// TestToJSON runs the encoder in each CPython found and decodes its text with
// encoding/json: control characters, quotes, backslashes, non-ASCII text, lone
// surrogates (escaped, so the text encodes to UTF-8 strictly), non-finite
// floats (null), nesting deeper than the recursion limit, dict keys that are
// not strings, and other objects (the string of their repr).
func TestToJSON(t *testing.T) {
	prog := Source() + `
import sys
deep = []
cur = deep
for _ in range(5000):
    nxt = []
    cur.append(nxt)
    cur = nxt
cases = [
    'a"b\\c\x00\x1f\n\u00e9\u4e2d\U0001f600',
    'x\ud800y\udfff',
    [1, -2, 10**30, 1.5, float('nan'), float('inf'), float('-inf'), True, False, None],
    (1, (2,)),
    {'k': {'n': [1, {}]}, 3: 'three', None: []},
    object,
    deep,
]
for c in cases:
    sys.stdout.buffer.write(to_json(c).encode('utf-8') + b'\n')
assert _json is to_json
`
	want := []any{
		"a\"b\\c\x00\x1f\n\u00e9\u4e2d\U0001f600",
		"x\ufffdy\ufffd",
		[]any{1.0, -2.0, 1e30, 1.5, nil, nil, nil, true, false, nil},
		[]any{1.0, []any{2.0}},
		map[string]any{"k": map[string]any{"n": []any{1.0, map[string]any{}}}, "3": "three", "None": []any{}},
		"<class 'object'>",
	}
	ran := 0
	for _, py := range pythons {
		if _, err := os.Stat(py); err != nil {
			continue
		}
		ran++
		out, err := exec.Command(py, "-I", "-S", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", py, err, out)
		}
		lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		if len(lines) != len(want)+1 {
			t.Fatalf("%s: %d lines, want %d: %s", py, len(lines), len(want)+1, out)
		}
		if !strings.Contains(lines[1], `\ud800`) || !strings.Contains(lines[1], `\udfff`) {
			t.Errorf("%s: lone surrogates not escaped: %s", py, lines[1])
		}
		for i, w := range want {
			var got any
			if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
				t.Fatalf("%s: case %d: %v: %s", py, i, err, lines[i])
			}
			if !reflect.DeepEqual(got, w) {
				t.Errorf("%s: case %d: got %#v, want %#v", py, i, got, w)
			}
		}
		var deep any
		if err := json.Unmarshal([]byte(lines[len(want)]), &deep); err != nil {
			t.Fatalf("%s: the deep list: %v", py, err)
		}
		depth := 0
		for l, ok := deep.([]any); ok && len(l) > 0; l, ok = l[0].([]any) {
			depth++
		}
		if depth != 5000 {
			t.Errorf("%s: the deep list is %d deep, want 5000", py, depth)
		}
	}
	if ran == 0 {
		t.Skip("no CPython interpreter (" + strings.Join(pythons, ", ") + ")")
	}
}

// TestAppend: the encoder follows the module's text.
func TestAppend(t *testing.T) {
	s := Append("x = 1")
	if !strings.HasPrefix(s, "x = 1\n") || !strings.HasSuffix(s, Source()) || !strings.Contains(Source(), "def to_json(") {
		t.Fatalf("Append: %q", s[:40])
	}
}
