package evalguard

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"
)

// appendMarshal writes v in CPython's marshal format (version 4 reads it), which
// the checker decodes in C without importing anything. Only plain data: nil, bool,
// int, int64, float64, string (valid UTF-8), []byte, []any and map[string]any.
func appendMarshal(b []byte, v any, depth int) ([]byte, error) {
	if depth > 32 {
		return nil, fmt.Errorf("evalguard: marshal: nesting deeper than 32")
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
	case float64:
		b = append(b, 'g')
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(x)), nil
	case string:
		if !utf8.ValidString(x) {
			return nil, fmt.Errorf("evalguard: marshal: invalid UTF-8 string")
		}
		b = append(b, 'u')
		b = binary.LittleEndian.AppendUint32(b, uint32(len(x)))
		return append(b, x...), nil
	case []byte:
		b = append(b, 's')
		b = binary.LittleEndian.AppendUint32(b, uint32(len(x)))
		return append(b, x...), nil
	case []any:
		b = append(b, '[')
		b = binary.LittleEndian.AppendUint32(b, uint32(len(x)))
		var err error
		for _, it := range x {
			if b, err = appendMarshal(b, it, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		var err error
		for _, k := range keys {
			if b, err = appendMarshal(b, k, depth+1); err != nil {
				return nil, err
			}
			if b, err = appendMarshal(b, x[k], depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, '0'), nil
	}
	return nil, fmt.Errorf("evalguard: marshal: unsupported type %T", v)
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
		u = -u
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
