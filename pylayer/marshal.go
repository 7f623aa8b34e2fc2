package pylayer

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"unicode/utf8"
)

// The configuration travels to the child in Python's marshal format, which the
// interpreter decodes in C without importing anything (json would cost the child
// ~18 ms of imports, more than the whole start-up budget of the layer). Only plain
// data is written: None, bool, int, float, str, bytes, list, tuple, dict and
// frozenset.
// Values are built from the types below.

// pyTuple is written as a Python tuple.
type pyTuple []any

// pyFrozenset is written as a Python frozenset of strings.
type pyFrozenset []string

// pyDict is written as a Python dict with string keys, in sorted key order (the
// encoding is deterministic).
type pyDict map[string]any

// pyBytes is written as Python bytes.
type pyBytes []byte

const marshalMaxDepth = 64

// marshalValue encodes v.
func marshalValue(v any) ([]byte, error) {
	var b []byte
	return appendMarshal(b, v, 0)
}

func appendMarshal(b []byte, v any, depth int) ([]byte, error) {
	if depth > marshalMaxDepth {
		return nil, fmt.Errorf("pylayer: marshal: nesting deeper than %d", marshalMaxDepth)
	}
	switch x := v.(type) {
	case nil:
		return append(b, 'N'), nil
	case bool:
		if x {
			return append(b, 'T'), nil
		}
		return append(b, 'F'), nil
	case int:
		return appendInt(b, int64(x)), nil
	case int64:
		return appendInt(b, x), nil
	case uint16:
		return appendInt(b, int64(x)), nil
	case uint32:
		return appendInt(b, int64(x)), nil
	case uint64:
		if x > math.MaxInt64 {
			return nil, fmt.Errorf("pylayer: marshal: integer %d too large", x)
		}
		return appendInt(b, int64(x)), nil
	case float64:
		b = append(b, 'g')
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(x)), nil
	case string:
		return appendStr(b, x), nil
	case map[string]any:
		return appendMarshal(b, pyDict(x), depth)
	case pyBytes:
		b = append(b, 's')
		b = binary.LittleEndian.AppendUint32(b, uint32(len(x)))
		return append(b, x...), nil
	case []string:
		b = append(b, '[')
		b = binary.LittleEndian.AppendUint32(b, uint32(len(x)))
		for _, s := range x {
			b = appendStr(b, s)
		}
		return b, nil
	case []any:
		b = append(b, '[')
		b = binary.LittleEndian.AppendUint32(b, uint32(len(x)))
		return appendItems(b, x, depth)
	case pyTuple:
		b = append(b, '(')
		b = binary.LittleEndian.AppendUint32(b, uint32(len(x)))
		return appendItems(b, x, depth)
	case pyFrozenset:
		b = append(b, '>')
		b = binary.LittleEndian.AppendUint32(b, uint32(len(x)))
		for _, s := range x {
			b = appendStr(b, s)
		}
		return b, nil
	case pyDict:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = append(b, '{')
		var err error
		for _, k := range keys {
			b = appendStr(b, k)
			if b, err = appendMarshal(b, x[k], depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, '0'), nil
	}
	return nil, fmt.Errorf("pylayer: marshal: unsupported type %T", v)
}

func appendItems(b []byte, items []any, depth int) ([]byte, error) {
	var err error
	for _, it := range items {
		if b, err = appendMarshal(b, it, depth+1); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func appendInt(b []byte, x int64) []byte {
	if x >= math.MinInt32 && x <= math.MaxInt32 {
		b = append(b, 'i')
		return binary.LittleEndian.AppendUint32(b, uint32(int32(x)))
	}
	// TYPE_LONG: sign*ndigits, then 15-bit digits, least significant first.
	neg := x < 0
	u := uint64(x)
	if neg {
		u = uint64(-x)
	}
	var digits []uint16
	for u > 0 {
		digits = append(digits, uint16(u&0x7fff))
		u >>= 15
	}
	n := int32(len(digits))
	if neg {
		n = -n
	}
	b = append(b, 'l')
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	for _, d := range digits {
		b = binary.LittleEndian.AppendUint16(b, d)
	}
	return b
}

// appendStr writes a str. Bytes that are not valid UTF-8 (a file name in another
// encoding) become the lone surrogates U+DC80..U+DCFF, as os.fsdecode makes them
// (marshal decodes with "surrogatepass").
func appendStr(b []byte, s string) []byte {
	enc := []byte(s)
	if !utf8.ValidString(s) {
		enc = enc[:0:0]
		for i := 0; i < len(s); {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size <= 1 {
				c := 0xDC00 + rune(s[i])
				enc = append(enc, byte(0xE0|c>>12), byte(0x80|(c>>6)&0x3F), byte(0x80|c&0x3F))
				i++
				continue
			}
			enc = append(enc, s[i:i+size]...)
			i += size
		}
	}
	b = append(b, 'u')
	b = binary.LittleEndian.AppendUint32(b, uint32(len(enc)))
	return append(b, enc...)
}
