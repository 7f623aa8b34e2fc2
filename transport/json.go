package transport

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// MaxJSONDepth bounds the nesting JSON converts: a deeper value (or one that
// contains itself) is an error wrapping ErrBudget. It is MaxWalkDepth, so that
// every value Unpickle returns with the default budgets converts.
const MaxJSONDepth = MaxWalkDepth

// JSONError is the error of JSON: where in the value (Path, e.g.
// `value[1]["x"]`), its Go type and why.
type JSONError struct {
	Path   string
	Type   string
	Reason string
	// Err is ErrBudget (nested deeper than MaxJSONDepth), ErrUnsupported (a
	// type JSON has no form for: a channel, a function...), or the error of
	// encoding/json for a type handed to it.
	Err error
}

// Error is "transport: json: PATH: REASON".
func (e *JSONError) Error() string { return "transport: json: " + e.Path + ": " + e.Reason }

// Unwrap returns the cause.
func (e *JSONError) Unwrap() error { return e.Err }

// JSON converts a value of the mapping (what Unpickle returns, and what Pickle
// accepts) to JSON, one form per Python type, the same whatever its position:
//
//	Python                       JSON
//	None, bool, str              null, true/false, a string
//	int (any size)               a number, every digit
//	float                        a number as Python's repr writes it (1.0, 1e+16, 1.5e-05);
//	                             NaN and the infinities as the strings "NaN", "Infinity", "-Infinity"
//	complex                      {"real": float, "imag": float}
//	bytes, bytearray             a string, base64 (standard alphabet, padded)
//	list, tuple, set, frozenset,
//	deque                        an array (a set in its decoded order)
//	dict, OrderedDict, Counter   an object, in order, when every key is a str; otherwise an
//	                             array of [key, value] pairs (a key converted like any value)
//	Decimal                      a string: str(d) ("1.50", "-1.5E+3", "NaN")
//	Fraction                     a string: str(f) ("3/4", "2")
//	UUID                         a string, 8-4-4-4-12
//	pathlib paths                a string: str(path)
//	ipaddress values             a string: str(value) ("10.0.0.0/8", "::ffff:1.2.3.4")
//	date, time, datetime         a string, ISO 8601 as isoformat() writes it ("2024-02-29",
//	                             "10:30:00.000001+05:30", "2024-02-29T10:30:00+00:00"); a zoneinfo
//	                             zone, whose offset needs the tz database, as a suffix "[Europe/Paris]"
//	timedelta                    a number of seconds, exact ("-86399.999999", "3600")
//	timezone                     a string, its offset ("+05:30")
//	zoneinfo.ZoneInfo            a string, its key
//	range                        {"start": int, "stop": int, "step": int}
//	Object (objects mode)        {"__class__": "module.Name", "args": [...], "state": ...}, plus
//	                             "kwargs", "listitems", "dictitems" when not empty
//	Global (objects mode)        {"__global__": "module.Name"}
//
// Strings are UTF-8, with the escapes JSON needs (quotes, backslashes, control
// characters, U+2028, U+2029); a lone surrogate (which Python strs may hold)
// is written as its \uXXXX escape, and invalid UTF-8 as U+FFFD. HTML
// characters are not escaped (json.Marshal escapes them when it calls a
// MarshalJSON method; an Encoder with SetEscapeHTML(false) does not).
//
// The Go conveniences of PickleWith convert as the Python value they encode
// (ints, float32, any slice as an array, []byte as base64, maps with string keys
// as objects in sorted key order); a pointer converts as what it points to. Any
// other type, and a type with its own MarshalJSON or MarshalText, is handed to
// encoding/json.
//
// The container types (Tuple, Dict, Set...) and the value types implement
// json.Marshaler with this conversion, so that json.Marshal of a structure that
// holds them works; encoding/json alone cannot marshal a bare float NaN or a
// complex128 (nor a []any holding one), which JSON can.
//
// The work is linear in the size of the JSON written. For a decoded value that
// size is bounded by the decoder's MaxExpanded budget (a value shared through the
// memo counts each time it is written).
func JSON(v any) ([]byte, error) {
	w := jsonWriter{}
	if err := w.value(v, 0); err != nil {
		return nil, jsonSeg(err, "value")
	}
	return w.buf, nil
}

// MarshalJSON implements json.Marshaler (see JSON).
func (t Tuple) MarshalJSON() ([]byte, error) { return JSON(t) }

// MarshalJSON implements json.Marshaler (see JSON).
func (d Dict) MarshalJSON() ([]byte, error) { return JSON(d) }

// MarshalJSON implements json.Marshaler (see JSON).
func (d OrderedDict) MarshalJSON() ([]byte, error) { return JSON(d) }

// MarshalJSON implements json.Marshaler (see JSON).
func (d Counter) MarshalJSON() ([]byte, error) { return JSON(d) }

// MarshalJSON implements json.Marshaler (see JSON).
func (s Set) MarshalJSON() ([]byte, error) { return JSON(s) }

// MarshalJSON implements json.Marshaler (see JSON).
func (s FrozenSet) MarshalJSON() ([]byte, error) { return JSON(s) }

// MarshalJSON implements json.Marshaler (see JSON).
func (d Deque) MarshalJSON() ([]byte, error) { return JSON(d) }

// MarshalJSON implements json.Marshaler (see JSON).
func (d Date) MarshalJSON() ([]byte, error) { return JSON(d) }

// MarshalJSON implements json.Marshaler (see JSON).
func (t Time) MarshalJSON() ([]byte, error) { return JSON(t) }

// MarshalJSON implements json.Marshaler (see JSON).
func (t DateTime) MarshalJSON() ([]byte, error) { return JSON(t) }

// MarshalJSON implements json.Marshaler (see JSON).
func (t TimeDelta) MarshalJSON() ([]byte, error) { return JSON(t) }

// MarshalJSON implements json.Marshaler (see JSON).
func (z TimeZone) MarshalJSON() ([]byte, error) { return JSON(z) }

// MarshalJSON implements json.Marshaler (see JSON).
func (z ZoneInfo) MarshalJSON() ([]byte, error) { return JSON(z) }

// MarshalJSON implements json.Marshaler (see JSON).
func (u UUID) MarshalJSON() ([]byte, error) { return JSON(u) }

// MarshalJSON implements json.Marshaler (see JSON).
func (p Path) MarshalJSON() ([]byte, error) { return JSON(p) }

// MarshalJSON implements json.Marshaler (see JSON).
func (p IPPrefix) MarshalJSON() ([]byte, error) { return JSON(p) }

// MarshalJSON implements json.Marshaler (see JSON).
func (r Range) MarshalJSON() ([]byte, error) { return JSON(r) }

// MarshalJSON implements json.Marshaler (see JSON).
func (o Object) MarshalJSON() ([]byte, error) { return JSON(o) }

// MarshalJSON implements json.Marshaler (see JSON).
func (g Global) MarshalJSON() ([]byte, error) { return JSON(g) }

type jsonWriter struct {
	buf []byte
}

// jsonSeg prefixes the path of a *JSONError with seg (paths are built only on
// error).
func jsonSeg(err error, seg string) error {
	if je, ok := err.(*JSONError); ok {
		je.Path = seg + je.Path
	}
	return err
}

func (w *jsonWriter) value(v any, depth int) error {
	if depth > MaxJSONDepth {
		return &JSONError{Type: fmt.Sprintf("%T", v), Err: ErrBudget,
			Reason: fmt.Sprintf("nested deeper than %d (does the value contain itself?)", MaxJSONDepth)}
	}
	switch x := v.(type) {
	case nil:
		w.buf = append(w.buf, "null"...)
	case bool:
		w.buf = strconv.AppendBool(w.buf, x)
	case int64:
		w.buf = strconv.AppendInt(w.buf, x, 10)
	case *big.Int:
		if x == nil {
			w.buf = append(w.buf, "null"...)
			break
		}
		w.buf = x.Append(w.buf, 10)
	case float64:
		w.buf = appendPyFloat(w.buf, x, 64)
	case complex128:
		w.complex(real(x), imag(x), 64)
	case string:
		w.buf = appendJSONString(w.buf, x)
	case []byte:
		w.base64(x)
	case ByteArray:
		w.base64(x)
	case Decimal:
		w.buf = appendJSONString(w.buf, string(x))
	case big.Int:
		w.buf = x.Append(w.buf, 10)
	case big.Rat:
		w.buf = appendJSONString(w.buf, x.RatString())
	case *big.Rat:
		if x == nil {
			w.buf = append(w.buf, "null"...)
			break
		}
		w.buf = appendJSONString(w.buf, x.RatString())
	case UUID:
		w.buf = appendJSONString(w.buf, x.String())
	case Path:
		w.buf = appendJSONString(w.buf, x.Path)
	case netip.Addr:
		w.buf = appendJSONString(w.buf, x.String())
	case netip.Prefix:
		w.buf = appendJSONString(w.buf, x.String())
	case IPPrefix:
		w.buf = appendJSONString(w.buf, x.Prefix.String())
	case Date:
		w.buf = appendJSONString(w.buf, isoDate(x.Year, x.Month, x.Day))
	case Time:
		w.buf = appendJSONString(w.buf, isoClock(x.Hour, x.Minute, x.Second, x.Microsecond)+isoZone(x.TZ))
	case DateTime:
		w.buf = appendJSONString(w.buf, isoDate(x.Year, x.Month, x.Day)+"T"+
			isoClock(x.Hour, x.Minute, x.Second, x.Microsecond)+isoZone(x.TZ))
	case TimeDelta:
		w.buf = appendSeconds(w.buf, x)
	case TimeZone:
		w.buf = appendJSONString(w.buf, isoOffset(x.Offset))
	case ZoneInfo:
		w.buf = appendJSONString(w.buf, x.Key)
	case Range:
		w.buf = append(w.buf, `{"start":`...)
		w.buf = strconv.AppendInt(w.buf, x.Start, 10)
		w.buf = append(w.buf, `,"stop":`...)
		w.buf = strconv.AppendInt(w.buf, x.Stop, 10)
		w.buf = append(w.buf, `,"step":`...)
		w.buf = strconv.AppendInt(w.buf, x.Step, 10)
		w.buf = append(w.buf, '}')
	case Object:
		return w.object(&x, depth)
	case Global:
		w.buf = append(w.buf, `{"__global__":`...)
		w.buf = appendJSONString(w.buf, x.Module+"."+x.Name)
		w.buf = append(w.buf, '}')
	default:
		if items, ok := Items(v); ok {
			return w.list(items, depth)
		}
		if ps, ok := Pairs(v); ok {
			return w.pairs(ps, depth)
		}
		return w.reflected(v, depth)
	}
	return nil
}

func (w *jsonWriter) list(items []any, depth int) error {
	w.buf = append(w.buf, '[')
	for i, it := range items {
		if i > 0 {
			w.buf = append(w.buf, ',')
		}
		if err := w.value(it, depth+1); err != nil {
			return jsonSeg(err, "["+strconv.Itoa(i)+"]")
		}
	}
	w.buf = append(w.buf, ']')
	return nil
}

// pairs writes a dict: an object when every key is a str, else an array of
// [key, value] pairs.
func (w *jsonWriter) pairs(ps []Pair, depth int) error {
	strKeys := true
	for _, p := range ps {
		if _, ok := p.Key.(string); !ok {
			strKeys = false
			break
		}
	}
	if strKeys {
		w.buf = append(w.buf, '{')
		for i, p := range ps {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			k := p.Key.(string)
			w.buf = appendJSONString(w.buf, k)
			w.buf = append(w.buf, ':')
			if err := w.value(p.Value, depth+1); err != nil {
				return jsonSeg(err, "["+strconv.Quote(k)+"]")
			}
		}
		w.buf = append(w.buf, '}')
		return nil
	}
	w.buf = append(w.buf, '[')
	for i, p := range ps {
		if i > 0 {
			w.buf = append(w.buf, ',')
		}
		w.buf = append(w.buf, '[')
		if err := w.value(p.Key, depth+2); err != nil {
			return jsonSeg(err, fmt.Sprintf("[%v](key)", p.Key))
		}
		w.buf = append(w.buf, ',')
		if err := w.value(p.Value, depth+2); err != nil {
			return jsonSeg(err, fmt.Sprintf("[%v]", p.Key))
		}
		w.buf = append(w.buf, ']')
	}
	w.buf = append(w.buf, ']')
	return nil
}

func (w *jsonWriter) object(o *Object, depth int) error {
	w.buf = append(w.buf, `{"__class__":`...)
	w.buf = appendJSONString(w.buf, o.Module+"."+o.Name)
	w.buf = append(w.buf, `,"args":`...)
	if err := w.list(o.Args, depth); err != nil {
		return jsonSeg(err, ".args")
	}
	w.buf = append(w.buf, `,"state":`...)
	if err := w.value(o.State, depth+1); err != nil {
		return jsonSeg(err, ".state")
	}
	if len(o.Kwargs) > 0 {
		w.buf = append(w.buf, `,"kwargs":`...)
		if err := w.pairs(o.Kwargs, depth); err != nil {
			return jsonSeg(err, ".kwargs")
		}
	}
	if len(o.ListItems) > 0 {
		w.buf = append(w.buf, `,"listitems":`...)
		if err := w.list(o.ListItems, depth); err != nil {
			return jsonSeg(err, ".listitems")
		}
	}
	if len(o.DictItems) > 0 {
		w.buf = append(w.buf, `,"dictitems":`...)
		if err := w.pairs(o.DictItems, depth); err != nil {
			return jsonSeg(err, ".dictitems")
		}
	}
	w.buf = append(w.buf, '}')
	return nil
}

func (w *jsonWriter) complex(re, im float64, bits int) {
	w.buf = append(w.buf, `{"real":`...)
	w.buf = appendPyFloat(w.buf, re, bits)
	w.buf = append(w.buf, `,"imag":`...)
	w.buf = appendPyFloat(w.buf, im, bits)
	w.buf = append(w.buf, '}')
}

func (w *jsonWriter) base64(b []byte) {
	w.buf = append(w.buf, '"')
	w.buf = base64.StdEncoding.AppendEncode(w.buf, b)
	w.buf = append(w.buf, '"')
}

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// reflected converts the Go conveniences (other int and float types, slices,
// maps with string keys, pointers) and hands anything else to encoding/json.
func (w *jsonWriter) reflected(v any, depth int) error {
	rv := reflect.ValueOf(v)
	t := rv.Type()
	if t.Implements(jsonMarshalerType) || t.Implements(textMarshalerType) {
		return w.marshal(v)
	}
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		w.buf = strconv.AppendInt(w.buf, rv.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		w.buf = strconv.AppendUint(w.buf, rv.Uint(), 10)
	case reflect.Float32:
		w.buf = appendPyFloat(w.buf, rv.Float(), 32)
	case reflect.Float64:
		w.buf = appendPyFloat(w.buf, rv.Float(), 64)
	case reflect.Complex64:
		c := rv.Complex()
		w.complex(real(c), imag(c), 32)
	case reflect.Complex128:
		c := rv.Complex()
		w.complex(real(c), imag(c), 64)
	case reflect.Bool:
		w.buf = strconv.AppendBool(w.buf, rv.Bool())
	case reflect.String:
		w.buf = appendJSONString(w.buf, rv.String())
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			w.buf = append(w.buf, "null"...)
			return nil
		}
		return w.value(rv.Elem().Interface(), depth+1)
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			w.base64(rv.Bytes())
			return nil
		}
		w.buf = append(w.buf, '[')
		for i := range rv.Len() {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			if err := w.value(rv.Index(i).Interface(), depth+1); err != nil {
				return jsonSeg(err, "["+strconv.Itoa(i)+"]")
			}
		}
		w.buf = append(w.buf, ']')
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return w.marshal(v)
		}
		keys := rv.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int {
			if a.String() < b.String() {
				return -1
			}
			if a.String() > b.String() {
				return 1
			}
			return 0
		})
		w.buf = append(w.buf, '{')
		for i, k := range keys {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.buf = appendJSONString(w.buf, k.String())
			w.buf = append(w.buf, ':')
			if err := w.value(rv.MapIndex(k).Interface(), depth+1); err != nil {
				return jsonSeg(err, "["+strconv.Quote(k.String())+"]")
			}
		}
		w.buf = append(w.buf, '}')
	case reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return &JSONError{Type: t.String(), Err: ErrUnsupported, Reason: fmt.Sprintf("a %s has no JSON form", t)}
	default:
		return w.marshal(v)
	}
	return nil
}

// marshal hands v to encoding/json.
func (w *jsonWriter) marshal(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return &JSONError{Type: fmt.Sprintf("%T", v), Err: err, Reason: err.Error()}
	}
	w.buf = append(w.buf, b...)
	return nil
}

// appendPyFloat writes f as Python's repr does: the shortest digits that read
// back as f, positional when the decimal exponent is from -4 to 15 (always with
// a fraction: 1.0), scientific otherwise (1e+16, 1.5e-05). NaN and the
// infinities, which JSON has no number for, are strings.
func appendPyFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	var scratch [32]byte
	e := strconv.AppendFloat(scratch[:0], f, 'e', -1, bits)
	exp := 0
	for i := len(e) - 1; i >= 0; i-- {
		if e[i] == 'e' {
			exp, _ = strconv.Atoi(string(e[i+1:]))
			break
		}
	}
	if exp < -4 || exp >= 16 {
		return append(b, e...)
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, 'f', -1, bits)
	for _, c := range b[start:] {
		if c == '.' {
			return b
		}
	}
	return append(b, ".0"...)
}

// appendSeconds writes a timedelta as its exact number of seconds.
func appendSeconds(b []byte, d TimeDelta) []byte {
	// days*86400 + seconds fits an int64 (|days| <= 999999999), microseconds
	// are 0..999999 (normalised) but are not trusted to be.
	us := int64(d.Microseconds)
	secs := int64(d.Days)*86400 + int64(d.Seconds) + us/1_000_000
	us %= 1_000_000
	if us < 0 {
		secs--
		us += 1_000_000
	}
	// value = secs + us/1e6; written with the sign of the whole.
	if secs < 0 && us > 0 {
		b = append(b, '-')
		secs = -secs - 1
		us = 1_000_000 - us
	} else if secs < 0 {
		b = append(b, '-')
		secs = -secs
	}
	b = strconv.AppendInt(b, secs, 10)
	if us > 0 {
		frac := fmt.Sprintf("%06d", us)
		for frac[len(frac)-1] == '0' {
			frac = frac[:len(frac)-1]
		}
		b = append(b, '.')
		b = append(b, frac...)
	}
	return b
}

func isoDate(y, m, d int) string { return fmt.Sprintf("%04d-%02d-%02d", y, m, d) }

func isoClock(h, m, s, us int) string {
	t := fmt.Sprintf("%02d:%02d:%02d", h, m, s)
	if us != 0 {
		t += fmt.Sprintf(".%06d", us)
	}
	return t
}

// isoZone is the ISO 8601 offset of a time zone ("+01:00"); a zoneinfo zone,
// whose offset is not known without the tz database, is "[Europe/Paris]".
func isoZone(tz TZInfo) string {
	switch z := tz.(type) {
	case TimeZone:
		return isoOffset(z.Offset)
	case ZoneInfo:
		return "[" + z.Key + "]"
	}
	return ""
}

// isoOffset writes an offset as Python's isoformat does: ±HH:MM, then :SS and
// .ffffff when they are not zero.
func isoOffset(off time.Duration) string {
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
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s as a JSON string: UTF-8, with the escapes JSON
// needs, U+2028 and U+2029 escaped (for JavaScript), a lone surrogate encoded
// in 3 bytes (a Python str's) as its \uXXXX escape, other invalid UTF-8 as
// \ufffd.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	esc := func(i, n int, r rune) {
		b = append(b, s[start:i]...)
		b = append(b, '\\', 'u', hexDigits[r>>12&0xF], hexDigits[r>>8&0xF], hexDigits[r>>4&0xF], hexDigits[r&0xF])
		start = i + n
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			var short byte
			switch c {
			case '"', '\\':
				short = c
			case '\n':
				short = 'n'
			case '\r':
				short = 'r'
			case '\t':
				short = 't'
			case '\b':
				short = 'b'
			case '\f':
				short = 'f'
			}
			if short != 0 {
				b = append(b, s[start:i]...)
				b = append(b, '\\', short)
				start = i + 1
			} else {
				esc(i, 1, rune(c))
			}
			i++
			continue
		}
		if c == 0xED && i+2 < len(s) && s[i+1] >= 0xA0 && s[i+1] <= 0xBF && s[i+2]&0xC0 == 0x80 {
			esc(i, 3, rune(c&0x0F)<<12|rune(s[i+1]&0x3F)<<6|rune(s[i+2]&0x3F))
			i += 3
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			esc(i, 1, utf8.RuneError)
		case r == '\u2028' || r == '\u2029':
			esc(i, n, r)
		}
		i += n
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
