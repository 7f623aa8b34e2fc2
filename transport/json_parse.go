package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
)

// MaxParseJSONDepth bounds the nesting ParseJSON accepts.
const MaxParseJSONDepth = 200

// maxIntDigits is CPython's own limit on the digits of an int read from text
// (sys.get_int_max_str_digits).
const maxIntDigits = 4300

// ParseJSON decodes one JSON text into the value Python's json.loads gives, in
// the mapping (what Pickle encodes): null → nil, true/false → bool, an integer →
// int64 or *big.Int (at most 4300 digits, as CPython), another number →
// float64, a string → string, an array → []any, an object → Dict in the order
// written (a repeated key keeps its first place and its last value, as
// json.loads does). The text is strict JSON: where json.loads reads NaN,
// Infinity or a number beyond float range (as inf), ParseJSON gives an error. A
// text nested deeper than MaxParseJSONDepth, or an integer of more digits, is an
// error wrapping ErrBudget; anything after the value but white space is an error.
func ParseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseJSONValue(dec, 0)
	if err != nil {
		return nil, fmt.Errorf("transport: json: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("transport: json: extra data after the JSON value")
	}
	return v, nil
}

func parseJSONValue(dec *json.Decoder, depth int) (any, error) {
	if depth > MaxParseJSONDepth {
		return nil, fmt.Errorf("%w: nested more than %d levels", ErrBudget, MaxParseJSONDepth)
	}
	tok, err := dec.Token()
	if err == io.EOF {
		return nil, errors.New("no JSON value")
	}
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case nil, bool, string:
		return t, nil
	case json.Number:
		return parseJSONNumber(t)
	case json.Delim:
		switch t {
		case '[':
			list := []any{}
			for dec.More() {
				v, err := parseJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			_, err := dec.Token() // ]
			return list, err
		case '{':
			d := Dict{}
			var at map[string]int // a key's place, once the object is long
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := parseJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				i := -1
				if at != nil {
					if j, ok := at[k]; ok {
						i = j
					}
				} else {
					for j := range d {
						if d[j].Key == k {
							i = j
							break
						}
					}
				}
				if i >= 0 {
					d[i].Value = v
					continue
				}
				d = append(d, Pair{Key: k, Value: v})
				if at == nil && len(d) > 16 {
					at = make(map[string]int, len(d))
					for j, p := range d {
						at[p.Key.(string)] = j
					}
				} else if at != nil {
					at[k] = len(d) - 1
				}
			}
			_, err := dec.Token() // }
			return d, err
		}
	}
	return nil, fmt.Errorf("unexpected %v", tok)
}

func parseJSONNumber(n json.Number) (any, error) {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
		if digits := len(strings.TrimPrefix(s, "-")); digits > maxIntDigits {
			return nil, fmt.Errorf("%w: integer of %d digits (at most %d)", ErrBudget, digits, maxIntDigits)
		}
		b, ok := new(big.Int).SetString(s, 10)
		if !ok {
			return nil, fmt.Errorf("bad number %s", s)
		}
		return b, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("number %s out of range", s)
	}
	return f, nil
}
