package transport

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unsafe"
)

// keyer computes, for a hashable value, a string that two values share exactly when
// Python finds them equal (the dict/set identity of a key). Composite keys (tuples,
// frozensets) are built from the interned ids of their elements, and an identity
// longer than longKey is replaced by its interned id, so that a key stays short
// however the value nests or shares. The identity of a long value (a long str or
// bytes, a big int, a tuple...) is kept by the address of its data: a value shared
// through the memo is hashed once, however many times it is met.
type keyer struct {
	intern   map[string]int
	nan      int
	maxDepth int
	pow10    map[int64]*big.Int  // read-only once made: never mutate
	cache    map[cacheRef]string // identities of long values, by address
	// charge accounts the growth of the tables (nil: not accounted).
	charge func(int) error
}

// cacheRef is the address, length and kind of a value whose identity is cached.
type cacheRef struct {
	p    unsafe.Pointer
	n    int
	kind byte
}

// longKey is the length beyond which an identity is interned (and the size of a
// value beyond which its identity is cached by address).
const longKey = 64

func newKeyer(maxDepth int) *keyer {
	return &keyer{intern: map[string]int{}, maxDepth: maxDepth}
}

var errUnhashable = errors.New("unhashable")

type unhashableError struct{ typ string }

func (e *unhashableError) Error() string { return "unhashable type: '" + e.typ + "'" }
func (e *unhashableError) Unwrap() error { return errUnhashable }

func (kr *keyer) account(n int) error {
	if kr.charge == nil {
		return nil
	}
	return kr.charge(n)
}

// num interns k and returns its number.
func (kr *keyer) num(k string) (int, error) {
	n, ok := kr.intern[k]
	if !ok {
		if err := kr.account(mapEntry + allocSize(len(k))); err != nil {
			return 0, err
		}
		n = len(kr.intern)
		kr.intern[k] = n
	}
	return n, nil
}

func (kr *keyer) id(k string) (string, error) {
	n, err := kr.num(k)
	if err != nil {
		return "", err
	}
	return strconv.Itoa(n), nil
}

// short returns s, or "#" and its interned number when it is longer than longKey.
func (kr *keyer) short(s string) (string, error) {
	if len(s) <= longKey {
		return s, nil
	}
	n, err := kr.num(s)
	if err != nil {
		return "", err
	}
	return "#" + strconv.Itoa(n), nil
}

// cached returns the (short) identity of the value at p (n bytes, of this kind),
// computed by build the first time only.
func (kr *keyer) cached(p unsafe.Pointer, n int, kind byte, build func() (string, error)) (string, error) {
	ref := cacheRef{p, n, kind}
	if s, ok := kr.cache[ref]; ok {
		return s, nil
	}
	if err := kr.account(mapEntry + allocSize(n+16)); err != nil {
		return "", err
	}
	s, err := build()
	if err != nil {
		return "", err
	}
	if s, err = kr.short(s); err != nil {
		return "", err
	}
	if kr.cache == nil {
		kr.cache = map[cacheRef]string{}
	}
	kr.cache[ref] = s
	return s, nil
}

// strID is a string as part of a key: itself when short, its interned id otherwise.
func (kr *keyer) strID(s string) (string, error) {
	if len(s) <= longKey {
		return s, nil
	}
	return kr.cached(unsafe.Pointer(unsafe.StringData(s)), len(s), 'S', func() (string, error) { return s, nil })
}

func intKey(b *big.Int) string { return "i" + b.Text(16) }

func ratKey(r *big.Rat) string {
	if r.IsInt() {
		return intKey(r.Num())
	}
	return "q" + r.Num().Text(16) + "/" + r.Denom().Text(16)
}

func (kr *keyer) floatKey(f float64) string {
	switch {
	case math.IsNaN(f):
		kr.nan++
		return "nan" + strconv.Itoa(kr.nan)
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case f == math.Trunc(f) && math.Abs(f) < 1<<62:
		return "i" + strconv.FormatInt(int64(f), 16)
	}
	return ratKey(new(big.Rat).SetFloat64(f))
}

// decimalKeyLimit bounds the digits and exponents for which a Decimal's key is its
// exact rational value (so Decimal("1E+3") == 1000 and Decimal("0.5") == 0.5);
// beyond it the key is the normalised decimal itself, and equality with an int,
// float or Fraction of that size is not detected. It keeps the cost of a key small
// (the rational is reduced by a GCD, quadratic in its digits).
const decimalKeyLimit = 400

func (kr *keyer) decimalKey(s Decimal) (string, error) {
	d, err := parseDecimal(string(s))
	if err != nil {
		return "", err
	}
	switch d.special {
	case decInf:
		if d.neg {
			return "-inf", nil
		}
		return "inf", nil
	case decNaN:
		kr.nan++
		return "nan" + strconv.Itoa(kr.nan), nil
	case decSNaN:
		return "", errors.New("cannot hash a signaling NaN value")
	}
	coef := strings.TrimRight(d.coef, "0")
	if coef == "" {
		return "i0", nil
	}
	exp := d.exp + int64(len(d.coef)-len(coef))
	if exp > decimalKeyLimit || exp < -decimalKeyLimit || len(coef) > decimalKeyLimit {
		sign := ""
		if d.neg {
			sign = "-"
		}
		return "D" + sign + coef + "e" + strconv.FormatInt(exp, 10), nil
	}
	n, _ := new(big.Int).SetString(coef, 10)
	if d.neg {
		n.Neg(n)
	}
	p := kr.pow10[abs64(exp)]
	if p == nil {
		p = new(big.Int).Exp(big.NewInt(10), big.NewInt(abs64(exp)), nil)
		if kr.pow10 == nil {
			kr.pow10 = map[int64]*big.Int{}
		}
		kr.pow10[abs64(exp)] = p
	}
	if exp >= 0 {
		return intKey(n.Mul(n, p)), nil
	}
	return ratKey(new(big.Rat).SetFrac(n, new(big.Int).Set(p))), nil
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// key returns the identity string of a hashable value; an unhashable value is an
// error wrapping errUnhashable.
func (kr *keyer) key(v any, depth int) (string, error) {
	s, err := kr.ident(v, depth)
	if err != nil {
		return "", err
	}
	return kr.short(s)
}

func (kr *keyer) ident(v any, depth int) (string, error) {
	if depth > kr.maxDepth {
		return "", errDepth
	}
	switch x := v.(type) {
	case nil:
		return "N", nil
	case bool:
		if x {
			return "i1", nil
		}
		return "i0", nil
	case int64:
		return "i" + strconv.FormatInt(x, 16), nil
	case int:
		return "i" + strconv.FormatInt(int64(x), 16), nil
	case *big.Int:
		if x.BitLen() <= 4*longKey {
			return intKey(x), nil
		}
		return kr.cached(unsafe.Pointer(x), 0, 'i', func() (string, error) { return intKey(x), nil })
	case float64:
		return kr.floatKey(x), nil
	case complex128:
		if imag(x) == 0 {
			return kr.floatKey(real(x)), nil
		}
		return "c" + kr.floatKey(real(x)) + "|" + kr.floatKey(imag(x)), nil
	case string:
		if len(x) <= longKey {
			return "s" + x, nil
		}
		return kr.cached(unsafe.Pointer(unsafe.StringData(x)), len(x), 's', func() (string, error) { return "s" + x, nil })
	case []byte:
		if len(x) <= longKey {
			return "b" + string(x), nil
		}
		return kr.cached(unsafe.Pointer(unsafe.SliceData(x)), len(x), 'b', func() (string, error) { return "b" + string(x), nil })
	case Decimal:
		if len(x) <= 32 {
			return kr.decimalKey(x)
		}
		return kr.cached(unsafe.Pointer(unsafe.StringData(string(x))), len(x), 'D', func() (string, error) { return kr.decimalKey(x) })
	case *big.Rat:
		if x.Num().BitLen()+x.Denom().BitLen() <= 4*longKey {
			return ratKey(x), nil
		}
		return kr.cached(unsafe.Pointer(x), 0, 'q', func() (string, error) { return ratKey(x), nil })
	case Date:
		return fmt.Sprintf("a%d-%d-%d", x.Year, x.Month, x.Day), nil
	case DateTime:
		switch tz := x.TZ.(type) {
		case nil:
			return fmt.Sprintf("d%d-%d-%d %d:%d:%d.%d", x.Year, x.Month, x.Day, x.Hour, x.Minute, x.Second, x.Microsecond), nil
		case TimeZone:
			us := (daysFromCivil(x.Year, x.Month, x.Day)*86400+int64(x.Hour*3600+x.Minute*60+x.Second))*1e6 + int64(x.Microsecond)
			return "D" + strconv.FormatInt(us-tz.Offset.Microseconds(), 16), nil
		case ZoneInfo:
			k, err := kr.strID(tz.Key)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("Z%q %d-%d-%d %d:%d:%d.%d", k, x.Year, x.Month, x.Day, x.Hour, x.Minute, x.Second, x.Microsecond), nil
		}
	case Time:
		us := int64(x.Hour*3600+x.Minute*60+x.Second)*1e6 + int64(x.Microsecond)
		switch tz := x.TZ.(type) {
		case nil:
			return "t" + strconv.FormatInt(us, 16), nil
		case TimeZone:
			return "T" + strconv.FormatInt(us-tz.Offset.Microseconds(), 16), nil
		case ZoneInfo:
			k, err := kr.strID(tz.Key)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("Tz%q %x", k, us), nil
		}
	case TimeDelta:
		return fmt.Sprintf("td%d,%d,%d", x.Days, x.Seconds, x.Microseconds), nil
	case TimeZone:
		return "tz" + strconv.FormatInt(x.Offset.Microseconds(), 16), nil
	case ZoneInfo:
		k, err := kr.strID(x.Key)
		return "zi" + k, err
	case UUID:
		return "u" + string(x[:]), nil
	case *uuidNode:
		if !x.set {
			return "", errors.New("uuid.UUID hashed before its state is set")
		}
		return "u" + string(x.val[:]), nil
	case Path:
		if len(x.Path) <= longKey {
			return pathKey(x), nil
		}
		return kr.cached(unsafe.Pointer(unsafe.StringData(x.Path)), len(x.Path), byte(len(x.Flavour)), func() (string, error) { return pathKey(x), nil })
	case netip.Addr:
		if x.Is4() {
			return "a4" + x.String(), nil
		}
		return "a6" + x.String(), nil
	case IPPrefix:
		k := "n"
		if x.Interface {
			k = "if"
		}
		if x.Prefix.Addr().Is4() {
			return k + "4" + x.Prefix.String(), nil
		}
		return k + "6" + x.Prefix.String(), nil
	case Range:
		switch n := x.Len(); n {
		case 0:
			return "r0", nil
		case 1:
			return "r1," + strconv.FormatInt(x.Start, 16), nil
		default:
			return fmt.Sprintf("r%x,%x,%x", n, x.Start, x.Step), nil
		}
	case Global:
		return kr.globalKey(x.Module, x.Name)
	case *globalRef:
		return kr.globalKey(x.module, x.name)
	case Tuple:
		return kr.seqKey(x, depth)
	case *tupleNode:
		return kr.seqKey(x.items, depth)
	case FrozenSet:
		return kr.setKey(x, depth)
	case *frozenNode:
		return kr.setKey(x.items, depth)
	case *objNode:
		// Objects hash by identity (object.__hash__).
		return fmt.Sprintf("o%p", x), nil
	case Object:
		// A decoded Object has no identity left: equal when built alike.
		k, err := kr.seqKey(append([]any{x.Module, x.Name, x.New, x.State}, x.Args...), depth)
		if err != nil {
			return "", err
		}
		return "o" + k, nil
	}
	// Go conveniences the encoder accepts (int32, uint64, float32, named strings...).
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return kr.ident(rv.Int(), depth)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return kr.ident(new(big.Int).SetUint64(rv.Uint()), depth)
	case reflect.Float32, reflect.Float64:
		return kr.floatKey(rv.Float()), nil
	case reflect.Complex64, reflect.Complex128:
		return kr.ident(rv.Complex(), depth)
	case reflect.String:
		return kr.ident(rv.String(), depth)
	}
	return "", &unhashableError{pyTypeName(v)}
}

func pathKey(x Path) string {
	if x.Flavour.Windows() {
		return "pw" + strings.ToLower(x.Path)
	}
	return "pp" + x.Path
}

func (kr *keyer) globalKey(module, name string) (string, error) {
	m, err := kr.strID(module)
	if err != nil {
		return "", err
	}
	n, err := kr.strID(name)
	if err != nil {
		return "", err
	}
	return "g" + m + "\x00" + n, nil
}

// seqKey is the identity of a tuple: its elements' ids in order. A tuple's key is
// cached by the address of its array (shared by a tuple node and its public
// Tuple), so that a shared tuple is keyed once.
func (kr *keyer) seqKey(items []any, depth int) (string, error) {
	if len(items) == 0 {
		return "t", nil
	}
	return kr.cached(unsafe.Pointer(unsafe.SliceData(items)), len(items), 't', func() (string, error) {
		var b strings.Builder
		b.WriteString("t")
		for _, e := range items {
			k, err := kr.key(e, depth+1)
			if err != nil {
				return "", err
			}
			id, err := kr.id(k)
			if err != nil {
				return "", err
			}
			b.WriteString(id)
			b.WriteByte(',')
		}
		return b.String(), nil
	})
}

// setKey is the identity of a frozenset: its distinct elements' ids, sorted.
func (kr *keyer) setKey(items []any, depth int) (string, error) {
	if len(items) == 0 {
		return "F", nil
	}
	return kr.cached(unsafe.Pointer(unsafe.SliceData(items)), len(items), 'F', func() (string, error) {
		if err := kr.account(allocSize(8 * len(items))); err != nil {
			return "", err
		}
		ids := make([]int, 0, len(items))
		for _, e := range items {
			k, err := kr.key(e, depth+1)
			if err != nil {
				return "", err
			}
			n, err := kr.num(k)
			if err != nil {
				return "", err
			}
			ids = append(ids, n)
		}
		slices.Sort(ids)
		ids = slices.Compact(ids)
		var b strings.Builder
		b.WriteString("F")
		for _, n := range ids {
			b.WriteString(strconv.Itoa(n))
			b.WriteByte(',')
		}
		return b.String(), nil
	})
}

// daysFromCivil returns the number of days from 1970-01-01 to the given date of the
// proleptic Gregorian calendar.
func daysFromCivil(y, m, d int) int64 {
	yy := int64(y)
	if m <= 2 {
		yy--
	}
	era := yy / 400
	if yy < 0 && yy%400 != 0 {
		era--
	}
	yoe := yy - era*400
	mp := (int64(m) + 9) % 12
	doy := (153*mp+2)/5 + int64(d) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// pyTypeName names the Python type of a decoded (or internal) value, for messages.
func pyTypeName(v any) string {
	switch x := v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case int, int64, *big.Int:
		return "int"
	case float64:
		return "float"
	case complex128:
		return "complex"
	case string:
		return "str"
	case []byte:
		return "bytes"
	case ByteArray:
		return "bytearray"
	case []any, *listNode:
		return "list"
	case Tuple, *tupleNode:
		return "tuple"
	case Dict:
		return "dict"
	case OrderedDict:
		return "collections.OrderedDict"
	case Counter:
		return "collections.Counter"
	case *dictNode:
		return x.kind.String()
	case Set, *setNode:
		return "set"
	case FrozenSet, *frozenNode:
		return "frozenset"
	case Deque, *dequeNode:
		return "collections.deque"
	case Date:
		return "datetime.date"
	case Time:
		return "datetime.time"
	case DateTime:
		return "datetime.datetime"
	case TimeDelta:
		return "datetime.timedelta"
	case TimeZone:
		return "datetime.timezone"
	case ZoneInfo:
		return "zoneinfo.ZoneInfo"
	case Decimal:
		return "decimal.Decimal"
	case *big.Rat:
		return "fractions.Fraction"
	case UUID, *uuidNode:
		return "uuid.UUID"
	case Path:
		return "pathlib." + string(x.Flavour)
	case netip.Addr:
		if x.Is4() {
			return "ipaddress.IPv4Address"
		}
		return "ipaddress.IPv6Address"
	case IPPrefix:
		return "ipaddress prefix"
	case Range:
		return "range"
	case *objNode:
		return x.module + "." + x.name
	case *globalRef:
		return "type"
	}
	return fmt.Sprintf("%T", v)
}
