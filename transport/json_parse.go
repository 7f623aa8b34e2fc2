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
	"unicode"
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
	v, err := ParseJSONAt(data, "")
	if err != nil {
		return nil, fmt.Errorf("transport: json: %w", err)
	}
	return v, nil
}

// ParseJSONAt is ParseJSON for a text that stands for a named thing: its
// errors name the place in the value where they arise, from name ("names",
// "names.rows[2]", `names."a b"`). With name "" they name the place from the
// value's root ("rows[2]"), and an error at the root names none.
func ParseJSONAt(data []byte, name string) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseJSONValue(dec, 0, name)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, at(name, errors.New("extra data after the JSON value"))
	}
	return v, nil
}

// at prefixes err (nil: nil) with the place where, if any.
func at(where string, err error) error {
	if where == "" || err == nil {
		return err
	}
	return fmt.Errorf("%s: %w", where, err)
}

// jsonKey is an object's key as a place names it: bounded, quoted unless it is
// made of letters, digits and underscores.
func jsonKey(k string) string {
	if len(k) > 40 {
		k = k[:40] + "..."
	}
	plain := k != ""
	for _, c := range k {
		if c != '_' && !unicode.IsLetter(c) && !unicode.IsDigit(c) {
			plain = false
			break
		}
	}
	if plain {
		return k
	}
	return strconv.Quote(k)
}

func parseJSONValue(dec *json.Decoder, depth int, where string) (any, error) {
	if depth > MaxParseJSONDepth {
		return nil, at(where, fmt.Errorf("%w: nested more than %d levels", ErrBudget, MaxParseJSONDepth))
	}
	tok, err := dec.Token()
	if err == io.EOF {
		return nil, at(where, errors.New("no JSON value"))
	}
	if err != nil {
		return nil, at(where, err)
	}
	switch t := tok.(type) {
	case nil, bool, string:
		return t, nil
	case json.Number:
		v, err := parseJSONNumber(t)
		return v, at(where, err)
	case json.Delim:
		switch t {
		case '[':
			list := []any{}
			for dec.More() {
				v, err := parseJSONValue(dec, depth+1, where+"["+strconv.Itoa(len(list))+"]")
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			if _, err := dec.Token(); err != nil { // ]
				return nil, at(where, err)
			}
			return list, nil
		case '{':
			d := Dict{}
			var index map[string]int // a key's place, once the object is long
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, at(where, err)
				}
				k, _ := kt.(string)
				sub := jsonKey(k)
				if where != "" {
					sub = where + "." + sub
				}
				v, err := parseJSONValue(dec, depth+1, sub)
				if err != nil {
					return nil, err
				}
				i := -1
				if index != nil {
					if j, ok := index[k]; ok {
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
				if index == nil && len(d) > 16 {
					index = make(map[string]int, len(d))
					for j, p := range d {
						index[p.Key.(string)] = j
					}
				} else if index != nil {
					index[k] = len(d) - 1
				}
			}
			if _, err := dec.Token(); err != nil { // }
				return nil, at(where, err)
			}
			return d, nil
		}
	}
	return nil, at(where, fmt.Errorf("unexpected %v", tok))
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
