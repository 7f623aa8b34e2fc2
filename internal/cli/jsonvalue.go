package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"

	"github.com/pysandboxes/pysandboxes/transport"
)

// maxJSONDepth bounds the nesting of a JSON argument.
const maxJSONDepth = 200

// decodeJSONArg decodes one command-line argument, a JSON text, into the Go
// value sent to Python: null → None, true/false → bool, an integer → int
// (arbitrary precision), another number → float, a string → str, an array →
// list, an object → dict (in the order written).
func decodeJSONArg(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	v, err := decodeJSONValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("extra data after the JSON value")
	}
	return v, nil
}

func decodeJSONValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("nested more than %d levels", maxJSONDepth)
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
		return jsonNumber(t)
	case json.Delim:
		switch t {
		case '[':
			list := []any{}
			for dec.More() {
				v, err := decodeJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			_, err := dec.Token() // ]
			return list, err
		case '{':
			d := transport.Dict{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				// A repeated key keeps its last value, as Python's json does.
				replaced := false
				for i := range d {
					if d[i].Key == k {
						d[i].Value, replaced = v, true
						break
					}
				}
				if !replaced {
					d = append(d, transport.Pair{Key: k, Value: v})
				}
			}
			_, err := dec.Token() // }
			return d, err
		}
	}
	return nil, fmt.Errorf("unexpected %v", tok)
}

func jsonNumber(n json.Number) (any, error) {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
		if len(s) > 4300 { // CPython's own limit on int digits
			return nil, fmt.Errorf("integer of %d digits (at most 4300)", len(s))
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

// resultJSON converts a value decoded by transport into JSON: transport.JSON,
// the library's one conversion (bytes as base64, tuples, sets and deques as
// arrays, big ints as numbers, dicts with string keys as objects in order and
// other dicts as arrays of [key, value] pairs, dates and times in ISO 8601, a
// timedelta as seconds, NaN and infinities as strings, Decimal, Fraction, UUID,
// paths and addresses as strings).
func resultJSON(v any) (json.RawMessage, error) {
	return transport.JSON(v)
}
