package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/pysandboxes/pysandboxes/transport"
)

// maxJSONDepth bounds the nesting of a JSON argument and of a printed result.
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

// resultJSON converts a value decoded by transport into one encoding/json
// prints: bytes as base64, tuples, sets and deques as arrays, big ints as
// numbers, dicts with string keys as objects (in order) and other dicts as
// arrays of [key, value] pairs, dates and times in ISO 8601, a timedelta as
// seconds, Decimal as a number when finite, NaN and infinities as the strings
// "NaN", "Infinity" and "-Infinity", the other types as strings.
func resultJSON(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := writeJSON(&buf, v, 0); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeJSON(w *bytes.Buffer, v any, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("result nested more than %d levels", maxJSONDepth)
	}
	plain := func(x any) error {
		b, err := json.Marshal(x)
		if err != nil {
			return err
		}
		w.Write(b)
		return nil
	}
	list := func(items []any) error {
		w.WriteByte('[')
		for i, x := range items {
			if i > 0 {
				w.WriteByte(',')
			}
			if err := writeJSON(w, x, depth+1); err != nil {
				return err
			}
		}
		w.WriteByte(']')
		return nil
	}
	pairs := func(ps []transport.Pair) error {
		allStrings := true
		for _, p := range ps {
			if _, ok := p.Key.(string); !ok {
				allStrings = false
				break
			}
		}
		if !allStrings {
			items := make([]any, len(ps))
			for i, p := range ps {
				items[i] = transport.Tuple{p.Key, p.Value}
			}
			return list(items)
		}
		w.WriteByte('{')
		for i, p := range ps {
			if i > 0 {
				w.WriteByte(',')
			}
			if err := plain(p.Key); err != nil {
				return err
			}
			w.WriteByte(':')
			if err := writeJSON(w, p.Value, depth+1); err != nil {
				return err
			}
		}
		w.WriteByte('}')
		return nil
	}
	switch x := v.(type) {
	case nil:
		w.WriteString("null")
	case bool, int64, string:
		return plain(x)
	case *big.Int:
		w.WriteString(x.String())
	case float64:
		switch {
		case math.IsNaN(x):
			w.WriteString(`"NaN"`)
		case math.IsInf(x, 1):
			w.WriteString(`"Infinity"`)
		case math.IsInf(x, -1):
			w.WriteString(`"-Infinity"`)
		default:
			return plain(x)
		}
	case complex128:
		w.WriteString(`{"real":`)
		if err := writeJSON(w, real(x), depth+1); err != nil {
			return err
		}
		w.WriteString(`,"imag":`)
		if err := writeJSON(w, imag(x), depth+1); err != nil {
			return err
		}
		w.WriteByte('}')
	case []byte:
		return plain(base64.StdEncoding.EncodeToString(x))
	case transport.ByteArray:
		return plain(base64.StdEncoding.EncodeToString(x))
	case []any:
		return list(x)
	case transport.Tuple:
		return list(x)
	case transport.Set:
		return list(x)
	case transport.FrozenSet:
		return list(x)
	case transport.Deque:
		return list(x.Items)
	case transport.Dict:
		return pairs(x)
	case transport.OrderedDict:
		return pairs(x)
	case transport.Counter:
		return pairs(x)
	case transport.Decimal:
		s := string(x)
		if _, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(strings.ToLower(s), "naif") {
			w.WriteString(s)
			return nil
		}
		return plain(s)
	case *big.Rat:
		return plain(x.RatString())
	case transport.UUID:
		return plain(x.String())
	case transport.Path:
		return plain(x.Path)
	case netip.Addr:
		return plain(x.String())
	case transport.IPPrefix:
		return plain(x.Prefix.String())
	case transport.TimeDelta:
		d := float64(x.Days)*86400 + float64(x.Seconds) + float64(x.Microseconds)/1e6
		return plain(d)
	case transport.Date:
		return plain(fmt.Sprintf("%04d-%02d-%02d", x.Year, x.Month, x.Day))
	case transport.Time:
		return plain(isoClock(x.Hour, x.Minute, x.Second, x.Microsecond) + isoZone(x.TZ))
	case transport.DateTime:
		return plain(fmt.Sprintf("%04d-%02d-%02dT", x.Year, x.Month, x.Day) +
			isoClock(x.Hour, x.Minute, x.Second, x.Microsecond) + isoZone(x.TZ))
	case transport.Range:
		return plain(map[string]int64{"start": x.Start, "stop": x.Stop, "step": x.Step})
	case transport.Object:
		w.WriteString(`{"__class__":`)
		if err := plain(x.Module + "." + x.Name); err != nil {
			return err
		}
		w.WriteString(`,"args":`)
		if err := writeJSON(w, x.Args, depth+1); err != nil {
			return err
		}
		w.WriteString(`,"state":`)
		if err := writeJSON(w, x.State, depth+1); err != nil {
			return err
		}
		w.WriteByte('}')
	case transport.Global:
		return plain(map[string]string{"__global__": x.Module + "." + x.Name})
	default:
		return fmt.Errorf("a result of type %T cannot be printed as JSON", v)
	}
	return nil
}

func isoClock(h, m, s, us int) string {
	t := fmt.Sprintf("%02d:%02d:%02d", h, m, s)
	if us != 0 {
		t += fmt.Sprintf(".%06d", us)
	}
	return t
}

// isoZone is the ISO 8601 offset of a time zone: "+01:00"; a zoneinfo zone,
// whose offset is not known without the tz database, as "[Europe/Paris]".
func isoZone(tz transport.TZInfo) string {
	switch z := tz.(type) {
	case transport.TimeZone:
		off := z.Offset
		sign := "+"
		if off < 0 {
			sign, off = "-", -off
		}
		s := fmt.Sprintf("%s%02d:%02d", sign, int(off/time.Hour), int(off%time.Hour/time.Minute))
		if rest := off % time.Minute; rest != 0 {
			s += fmt.Sprintf(":%02d", int(rest/time.Second))
			if us := rest % time.Second; us != 0 {
				s += fmt.Sprintf(".%06d", int(us/time.Microsecond))
			}
		}
		return s
	case transport.ZoneInfo:
		return "[" + z.Key + "]"
	}
	return ""
}
