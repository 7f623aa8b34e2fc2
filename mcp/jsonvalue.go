package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
	"unicode"

	"github.com/pysandboxes/pysandboxes/transport"
)

// maxJSONDepth bounds the nesting of the names of eval_python.
const maxJSONDepth = 200

// maxIntDigits is CPython's own limit on the digits of an int converted from a
// string (sys.get_int_max_str_digits).
const maxIntDigits = 4300

// decodeNames decodes the names of eval_python, a JSON object, into the values
// sent to Python: null → None, true/false → bool, an integer → int (any size),
// another number → float, a string → str, an array → list, an object → dict
// (in the order written; a repeated key keeps its last value, as Python's json
// does). The error names the place ("names.rows[2]").
func decodeNames(raw []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeJSONValue(dec, 0, "names")
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("names: extra data after the JSON value")
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

func decodeJSONValue(dec *json.Decoder, depth int, where string) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("%s: nested more than %d levels", where, maxJSONDepth)
	}
	tok, err := dec.Token()
	if err == io.EOF {
		return nil, fmt.Errorf("%s: no JSON value", where)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	switch t := tok.(type) {
	case nil, bool, string:
		return t, nil
	case json.Number:
		v, err := jsonNumber(t)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		return v, nil
	case json.Delim:
		switch t {
		case '[':
			list := []any{}
			for dec.More() {
				v, err := decodeJSONValue(dec, depth+1, where+"["+strconv.Itoa(len(list))+"]")
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			if _, err := dec.Token(); err != nil { // ]
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			return list, nil
		case '{':
			d := transport.Dict{}
			index := map[string]int{} // a repeated key replaces in place, in linear time
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("%s: %w", where, err)
				}
				k, _ := kt.(string)
				v, err := decodeJSONValue(dec, depth+1, where+"."+shortKey(k))
				if err != nil {
					return nil, err
				}
				if i, ok := index[k]; ok {
					d[i].Value = v
					continue
				}
				index[k] = len(d)
				d = append(d, transport.Pair{Key: k, Value: v})
			}
			if _, err := dec.Token(); err != nil { // }
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			return d, nil
		}
	}
	return nil, fmt.Errorf("%s: unexpected %v", where, tok)
}

// shortKey is a key as an error names it: bounded, quoted when it is not an
// identifier.
func shortKey(k string) string {
	if len(k) > 40 {
		k = k[:40] + "..."
	}
	if isIdentifier(k) {
		return k
	}
	return strconv.Quote(k)
}

func jsonNumber(n json.Number) (any, error) {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
		if len(strings.TrimPrefix(s, "-")) > maxIntDigits {
			return nil, fmt.Errorf("integer of %d digits (at most %d)", len(strings.TrimPrefix(s, "-")), maxIntDigits)
		}
		b, ok := new(big.Int).SetString(s, 10)
		if !ok {
			return nil, fmt.Errorf("bad number %.40s", s)
		}
		return b, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("number %.40s out of range", s)
	}
	return f, nil
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
