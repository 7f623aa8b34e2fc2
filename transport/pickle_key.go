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
)

// keyer computes, for a hashable value, a string that two values share exactly when
// Python finds them equal (the dict/set identity of a key). Composite keys (tuples,
// frozensets) are built from the interned ids of their elements, so a key stays
// short however the value nests or shares.
type keyer struct {
	intern   map[string]int
	nan      int
	maxDepth int
	pow10    map[int64]*big.Int // read-only once made: never mutate
}

func newKeyer(maxDepth int) *keyer {
	return &keyer{intern: map[string]int{}, maxDepth: maxDepth}
}

var errUnhashable = errors.New("unhashable")

type unhashableError struct{ typ string }

func (e *unhashableError) Error() string { return "unhashable type: '" + e.typ + "'" }
func (e *unhashableError) Unwrap() error { return errUnhashable }

func (kr *keyer) id(k string) string {
	n, ok := kr.intern[k]
	if !ok {
		n = len(kr.intern)
		kr.intern[k] = n
	}
	return strconv.Itoa(n)
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

// decimalKeyLimit bounds the exponents for which a Decimal's key is its exact
// rational value (so Decimal("1E+3") == 1000); beyond it the key is the normalised
// decimal itself, and equality with an int or Fraction of that size is not detected.
const decimalKeyLimit = 4300

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
		return intKey(x), nil
	case float64:
		return kr.floatKey(x), nil
	case complex128:
		if imag(x) == 0 {
			return kr.floatKey(real(x)), nil
		}
		return "c" + kr.floatKey(real(x)) + "|" + kr.floatKey(imag(x)), nil
	case string:
		return "s" + x, nil
	case []byte:
		return "b" + string(x), nil
	case Decimal:
		return kr.decimalKey(x)
	case *big.Rat:
		return ratKey(x), nil
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
			return fmt.Sprintf("Z%q %d-%d-%d %d:%d:%d.%d", tz.Key, x.Year, x.Month, x.Day, x.Hour, x.Minute, x.Second, x.Microsecond), nil
		}
	case Time:
		us := int64(x.Hour*3600+x.Minute*60+x.Second)*1e6 + int64(x.Microsecond)
		switch tz := x.TZ.(type) {
		case nil:
			return "t" + strconv.FormatInt(us, 16), nil
		case TimeZone:
			return "T" + strconv.FormatInt(us-tz.Offset.Microseconds(), 16), nil
		case ZoneInfo:
			return fmt.Sprintf("Tz%q %x", tz.Key, us), nil
		}
	case TimeDelta:
		return fmt.Sprintf("td%d,%d,%d", x.Days, x.Seconds, x.Microseconds), nil
	case TimeZone:
		return "tz" + strconv.FormatInt(x.Offset.Microseconds(), 16), nil
	case ZoneInfo:
		return "zi" + x.Key, nil
	case UUID:
		return "u" + string(x[:]), nil
	case *uuidNode:
		if !x.set {
			return "", errors.New("uuid.UUID hashed before its state is set")
		}
		return "u" + string(x.val[:]), nil
	case Path:
		if x.Flavour.Windows() {
			return "pw" + strings.ToLower(x.Path), nil
		}
		return "pp" + x.Path, nil
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
		return "g" + x.Module + "\x00" + x.Name, nil
	case *globalRef:
		return "g" + x.module + "\x00" + x.name, nil
	case Tuple:
		return kr.seqKey("t", x, depth)
	case *tupleNode:
		if x.key == "" {
			k, err := kr.seqKey("t", x.items, depth)
			if err != nil {
				return "", err
			}
			x.key = k
		}
		return x.key, nil
	case FrozenSet:
		return kr.setKey(x, depth)
	case *frozenNode:
		if x.key == "" {
			k, err := kr.setKey(x.items, depth)
			if err != nil {
				return "", err
			}
			x.key = k
		}
		return x.key, nil
	case *objNode:
		// Objects hash by identity (object.__hash__).
		return fmt.Sprintf("o%p", x), nil
	case Object:
		// A decoded Object has no identity left: equal when built alike.
		k, err := kr.seqKey("o"+x.Module+"\x00"+x.Name+"\x00", append([]any{x.New, x.State}, x.Args...), depth)
		if err != nil {
			return "", err
		}
		return k, nil
	}
	// Go conveniences the encoder accepts (int32, uint64, float32, named strings...).
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return kr.key(rv.Int(), depth)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return kr.key(new(big.Int).SetUint64(rv.Uint()), depth)
	case reflect.Float32, reflect.Float64:
		return kr.floatKey(rv.Float()), nil
	case reflect.Complex64, reflect.Complex128:
		return kr.key(rv.Complex(), depth)
	case reflect.String:
		return "s" + rv.String(), nil
	}
	return "", &unhashableError{pyTypeName(v)}
}

func (kr *keyer) seqKey(prefix string, items []any, depth int) (string, error) {
	var b strings.Builder
	b.WriteString(prefix)
	for _, e := range items {
		k, err := kr.key(e, depth+1)
		if err != nil {
			return "", err
		}
		b.WriteString(kr.id(k))
		b.WriteByte(',')
	}
	return b.String(), nil
}

func (kr *keyer) setKey(items []any, depth int) (string, error) {
	ids := make([]int, 0, len(items))
	for _, e := range items {
		k, err := kr.key(e, depth+1)
		if err != nil {
			return "", err
		}
		kr.id(k)
		ids = append(ids, kr.intern[k])
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
