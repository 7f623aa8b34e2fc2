// Package pymarshal writes plain data in CPython's marshal format (version 4
// and later read it), which an interpreter decodes in C without importing
// anything: how the host hands a configuration or an input to a Python child
// whose start-up cannot afford json's imports (the Python layer's
// configuration, the eval guard's checker, the zygote's setup).
//
// Only plain data is written, by its Go type:
//
//	Go                                   Python
//	nil, bool                            None, bool
//	int, int64, uint16, uint32, uint64   int (beyond int64: refused)
//	float64                              float
//	string                               str
//	[]byte, Bytes                        bytes
//	[]any, []string                      list
//	Tuple                                tuple
//	FrozenSet                            frozenset of str
//	map[string]any, Dict                 dict with str keys, in sorted key order
//
// The encoding is deterministic (same value, same bytes), so that it can key a
// cache. It is not a decoder: nothing here reads marshal data.
package pymarshal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"
)

// Tuple is written as a Python tuple.
type Tuple []any

// FrozenSet is written as a Python frozenset of str.
type FrozenSet []string

// Dict is written as a Python dict with str keys, in sorted key order.
type Dict map[string]any

// Bytes is written as Python bytes (as []byte is).
type Bytes []byte

// MaxDepth bounds the nesting of a value (containers around its deepest part).
const MaxDepth = 64

// Errors of Append (errors.Is).
var (
	// ErrUnsupported: a Go type outside the table above, an integer outside
	// int64, or (Encoder.StrictUTF8) a string that is not valid UTF-8.
	ErrUnsupported = errors.New("pymarshal: value not supported")
	// ErrTooDeep: a value nested deeper than MaxDepth (or containing itself).
	ErrTooDeep = errors.New("pymarshal: value nested too deep")
)

// An Encoder writes values. The zero Encoder writes a string that is not valid
// UTF-8 (a file name in another encoding) with its bad bytes as the lone
// surrogates U+DC80..U+DCFF, as os.fsdecode decodes them (marshal reads a str
// with "surrogatepass").
type Encoder struct {
	// StrictUTF8 refuses such a string instead (ErrUnsupported): for text that
	// must reach Python exactly as Go holds it.
	StrictUTF8 bool
}

// Marshal is Encoder{}.Append(nil, v).
func Marshal(v any) ([]byte, error) { return Encoder{}.Append(nil, v) }

// Append appends the marshal encoding of v to b.
func (e Encoder) Append(b []byte, v any) ([]byte, error) {
	return e.value(b, v, 0)
}

func (e Encoder) value(b []byte, v any, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return nil, fmt.Errorf("%w: deeper than %d", ErrTooDeep, MaxDepth)
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
			return nil, fmt.Errorf("%w: integer %d beyond int64", ErrUnsupported, x)
		}
		return appendInt(b, int64(x)), nil
	case float64:
		b = append(b, 'g')
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(x)), nil
	case string:
		return e.str(b, x)
	case []byte:
		return appendSized(b, 's', len(x), x...), nil
	case Bytes:
		return appendSized(b, 's', len(x), x...), nil
	case []string:
		return e.strs(appendSized(b, '[', len(x)), x)
	case FrozenSet:
		return e.strs(appendSized(b, '>', len(x)), x)
	case []any:
		return e.items(appendSized(b, '[', len(x)), x, depth)
	case Tuple:
		return e.items(appendSized(b, '(', len(x)), x, depth)
	case map[string]any:
		return e.dict(b, x, depth)
	case Dict:
		return e.dict(b, x, depth)
	}
	return nil, fmt.Errorf("%w: Go type %T", ErrUnsupported, v)
}

// appendSized writes a type code, a 4-byte count and data.
func appendSized(b []byte, code byte, n int, data ...byte) []byte {
	b = append(b, code)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	return append(b, data...)
}

func (e Encoder) items(b []byte, items []any, depth int) ([]byte, error) {
	var err error
	for _, it := range items {
		if b, err = e.value(b, it, depth+1); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (e Encoder) strs(b []byte, ss []string) ([]byte, error) {
	var err error
	for _, s := range ss {
		if b, err = e.str(b, s); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (e Encoder) dict(b []byte, m map[string]any, depth int) ([]byte, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	var err error
	for _, k := range keys {
		if b, err = e.str(b, k); err != nil {
			return nil, err
		}
		if b, err = e.value(b, m[k], depth+1); err != nil {
			return nil, err
		}
	}
	return append(b, '0'), nil
}

// appendInt writes TYPE_INT, or TYPE_LONG beyond 32 bits: sign*ndigits, then
// 15-bit digits, least significant first.
func appendInt(b []byte, x int64) []byte {
	if x >= math.MinInt32 && x <= math.MaxInt32 {
		b = append(b, 'i')
		return binary.LittleEndian.AppendUint32(b, uint32(int32(x)))
	}
	u := uint64(x)
	if x < 0 {
		u = -u
	}
	var digits [5]uint16 // 64 bits need 5 digits of 15
	n := 0
	for ; u > 0; n++ {
		digits[n] = uint16(u & 0x7fff)
		u >>= 15
	}
	count := int32(n)
	if x < 0 {
		count = -count
	}
	b = append(b, 'l')
	b = binary.LittleEndian.AppendUint32(b, uint32(count))
	for _, d := range digits[:n] {
		b = binary.LittleEndian.AppendUint16(b, d)
	}
	return b
}

// str writes a str (TYPE_UNICODE).
func (e Encoder) str(b []byte, s string) ([]byte, error) {
	if utf8.ValidString(s) {
		b = appendSized(b, 'u', len(s))
		return append(b, s...), nil
	}
	if e.StrictUTF8 {
		return nil, fmt.Errorf("%w: a string that is not valid UTF-8 (%.40q)", ErrUnsupported, s)
	}
	enc := make([]byte, 0, len(s)+len(s)/2)
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
	return appendSized(b, 'u', len(enc), enc...), nil
}
