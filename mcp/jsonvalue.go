package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"unicode"

	"github.com/pysandboxes/pysandboxes/transport"
)

// decodeNames decodes the names of eval_python, a JSON object, into the values
// sent to Python: null → None, true/false → bool, an integer → int (any size),
// another number → float, a string → str, an array → list, an object → dict
// (in the order written; a repeated key keeps its last value, as Python's json
// does). The error names the place ("names.rows[2]").
func decodeNames(raw []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	v, err := transport.ParseJSONAt(raw, "names")
	if err != nil {
		return nil, err
	}
	d, ok := v.(transport.Dict)
	if !ok {
		return nil, errors.New("names: not a JSON object")
	}
	m := make(map[string]any, len(d))
	for _, p := range d {
		k := p.Key.(string)
		if !isIdentifier(k) {
			return nil, fmt.Errorf("names: %s is not a Python identifier", strconv.Quote(k))
		}
		m[k] = p.Value
	}
	return m, nil
}

// isIdentifier reports whether s looks like a Python identifier: letters,
// digits and underscores, not starting with a digit (the evaluation checks the
// exact rule again).
func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', unicode.IsLetter(c):
		case unicode.IsDigit(c) && i > 0:
		default:
			return false
		}
	}
	return true
}
