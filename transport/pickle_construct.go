package transport

import (
	"errors"
	"fmt"
	"math"
	"math/big"
)

// construct calls a data type of the table on its arguments (in Go), by family.
// Each costs what it reads from its arguments (they may be shared values, met many
// times): a copy or a parse of n bytes charges n bytes or more, and an argument
// that could make it work more than linearly (a big int given to float(),
// timedelta or Fraction) is bounded first.
func (d *decoder) construct(g *globalRef, args []any) (v any, err error) {
	switch g.entry {
	case entComplex, entRange, entDecimal, entFraction:
		v, err = d.constructNumber(g, args)
	case entSet, entFrozenSet, entOrderedDict, entCounter, entDeque:
		return d.constructCollection(g, args) // charged as built
	case entBytes, entByteArray, entCodecsEncode, entGetattr:
		v, err = d.constructBytes(g, args)
	case entDate, entTime, entDateTime, entTimeDelta, entTimeZone, entZoneInfo, entZoneUnpickle:
		v, err = constructTime(g, args)
	case entPurePosixPath, entPosixPath, entPureWindowsPath, entWindowsPath:
		v, err = d.constructPath(g, args)
	case entIPv4Address, entIPv6Address, entIPv4Network, entIPv6Network, entIPv4Interface, entIPv6Interface:
		v, err = constructIP(g, args)
	case entUUID:
		return nil, errors.New("uuid.UUID is built by NEWOBJ and BUILD")
	default:
		return nil, fmt.Errorf("internal: unknown entry %d", g.entry)
	}
	if err != nil {
		return nil, err
	}
	if _, isRef := v.(*globalRef); !isRef {
		if err := d.charge(boxSize(v)); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func nargs(args []any, lo, hi int) error {
	if len(args) < lo || len(args) > hi {
		if lo == hi {
			return fmt.Errorf("takes %d arguments, got %d", lo, len(args))
		}
		return fmt.Errorf("takes %d to %d arguments, got %d", lo, hi, len(args))
	}
	return nil
}

func asBig(v any) (*big.Int, error) {
	switch x := v.(type) {
	case bool:
		if x {
			return big.NewInt(1), nil
		}
		return big.NewInt(0), nil
	case int64:
		return big.NewInt(x), nil
	case *big.Int:
		return x, nil
	}
	return nil, fmt.Errorf("expected an int, got %s", pyTypeName(v))
}

// asSmallBig is asBig for an argument that must fit bits bits (checked before any
// arithmetic, so that an aliased huge int costs nothing).
func asSmallBig(v any, bits int, what string) (*big.Int, error) {
	n, err := asBig(v)
	if err != nil {
		return nil, err
	}
	if n.BitLen() > bits {
		return nil, fmt.Errorf("%s out of range", what)
	}
	return n, nil
}

func asInt64(v any) (int64, error) {
	n, err := asBig(v)
	if err != nil {
		return 0, err
	}
	if !n.IsInt64() {
		return 0, errors.New("integer out of range")
	}
	return n.Int64(), nil
}

func asFloat(v any) (float64, error) {
	if f, ok := v.(float64); ok {
		return f, nil
	}
	n, err := asBig(v)
	if err != nil {
		return 0, fmt.Errorf("expected a number, got %s", pyTypeName(v))
	}
	if n.BitLen() > 1024 {
		return 0, errors.New("int too large to convert to float")
	}
	f, _ := new(big.Float).SetInt(n).Float64()
	if math.IsInf(f, 0) {
		return 0, errors.New("int too large to convert to float")
	}
	return f, nil
}

// iterItems returns the items of an iterable argument (list, tuple, set, frozenset,
// deque), snapshotted as a Python constructor would (a charged copy; set and
// frozenset items may still hold duplicates).
func (d *decoder) iterItems(v any) ([]any, error) {
	var items []any
	switch x := v.(type) {
	case *listNode:
		items = x.items
	case *tupleNode:
		items = x.items
	case *setNode:
		items = x.items
	case *frozenNode:
		items = x.items
	case *dequeNode:
		x.trim(true)
		items = x.items
	default:
		return nil, fmt.Errorf("expected a list or tuple, got %s", pyTypeName(v))
	}
	out, err := d.newItems(len(items))
	if err != nil {
		return nil, err
	}
	for i, e := range items {
		ref(e)
		out[i] = e
	}
	return out, nil
}

// maxFractionBits bounds a Fraction's numerator and denominator: reducing the
// fraction (a GCD) is quadratic in their size.
const maxFractionBits = 8192

// maxDecimalIntBits bounds an int given to Decimal (CPython's str(int) limit of
// 4300 digits): its decimal conversion is more than linear.
const maxDecimalIntBits = 14300

func (d *decoder) constructNumber(g *globalRef, args []any) (any, error) {
	switch g.entry {
	case entComplex:
		if err := nargs(args, 0, 2); err != nil {
			return nil, err
		}
		var re, im float64
		var err error
		if len(args) > 0 {
			if re, err = asFloat(args[0]); err != nil {
				return nil, err
			}
		}
		if len(args) > 1 {
			if im, err = asFloat(args[1]); err != nil {
				return nil, err
			}
		}
		return complex(re, im), nil
	case entRange:
		if err := nargs(args, 1, 3); err != nil {
			return nil, err
		}
		var v [3]int64
		for i, a := range args {
			n, err := asInt64(a)
			if err != nil {
				return nil, fmt.Errorf("range bound: %w (bounds beyond int64 are not supported)", err)
			}
			v[i] = n
		}
		switch len(args) {
		case 1:
			return Range{0, v[0], 1}, nil
		case 2:
			return Range{v[0], v[1], 1}, nil
		}
		if v[2] == 0 {
			return nil, errors.New("range() arg 3 must not be zero")
		}
		return Range{v[0], v[1], v[2]}, nil
	case entDecimal:
		if err := nargs(args, 1, 1); err != nil {
			return nil, err
		}
		switch x := args[0].(type) {
		case string:
			// The parse copies the digits.
			if err := d.transient(allocSize(len(x))); err != nil {
				return nil, err
			}
			p, err := parseDecimal(x)
			if err != nil {
				return nil, err
			}
			return Decimal(p.String()), nil
		case int64, *big.Int:
			n, err := asSmallBig(x, maxDecimalIntBits, "integer given to Decimal")
			if err != nil {
				return nil, err
			}
			return Decimal(n.String()), nil
		}
		return nil, fmt.Errorf("expected a str, got %s", pyTypeName(args[0]))
	}
	// Fraction
	if err := nargs(args, 1, 2); err != nil {
		return nil, err
	}
	num, err := asSmallBig(args[0], maxFractionBits, "Fraction numerator")
	if err != nil {
		return nil, err
	}
	den := big.NewInt(1)
	if len(args) == 2 {
		if den, err = asSmallBig(args[1], maxFractionBits, "Fraction denominator"); err != nil {
			return nil, err
		}
	}
	if den.Sign() == 0 {
		return nil, errors.New("zero denominator")
	}
	return new(big.Rat).SetFrac(new(big.Int).Set(num), new(big.Int).Set(den)), nil
}

func (d *decoder) constructCollection(g *globalRef, args []any) (any, error) {
	switch g.entry {
	case entSet, entFrozenSet:
		if err := nargs(args, 0, 1); err != nil {
			return nil, err
		}
		var items []any
		if len(args) == 1 {
			var err error
			if items, err = d.iterItems(args[0]); err != nil {
				return nil, err
			}
			defer d.credit(allocSize(len(items) * ifaceSize))
		}
		if g.entry == entSet {
			return d.newSet(items)
		}
		return d.newFrozen(items)
	case entOrderedDict, entCounter:
		if err := nargs(args, 0, 1); err != nil {
			return nil, err
		}
		kind := kindOrderedDict
		if g.entry == entCounter {
			kind = kindCounter
		}
		if err := d.charge(sizeDict); err != nil {
			return nil, err
		}
		n := &dictNode{finState: finState{off: int32(d.opPos), refs: 1, kind: kind}}
		if len(args) == 1 {
			src, ok := args[0].(*dictNode)
			if !ok {
				return nil, fmt.Errorf("expected a dict, got %s", pyTypeName(args[0]))
			}
			if len(src.pairs) > 0 {
				ps, err := d.growPairs(nil, len(src.pairs))
				if err != nil {
					return nil, err
				}
				for _, p := range src.pairs {
					ref(p.Key)
					ref(p.Value)
				}
				n.pairs = append(ps, src.pairs...)
			}
		}
		return n, nil
	}
	// deque
	if err := nargs(args, 0, 2); err != nil {
		return nil, err
	}
	if err := d.charge(sizeDeque); err != nil {
		return nil, err
	}
	n := &dequeNode{finState: finState{off: int32(d.opPos), refs: 1}}
	if len(args) == 2 && args[1] != nil {
		m, err := asInt64(args[1])
		if err != nil || m < 0 || m > math.MaxInt32 {
			return nil, errors.New("maxlen must be a non-negative int")
		}
		n.maxLen = int(m)
		n.flags |= flagBounded
	}
	if len(args) > 0 {
		items, err := d.iterItems(args[0])
		if err != nil {
			return nil, err
		}
		n.items = items
		n.trim(true)
	}
	return n, nil
}

func (d *decoder) constructBytes(g *globalRef, args []any) (any, error) {
	switch g.entry {
	case entBytes, entByteArray:
		if err := nargs(args, 0, 1); err != nil {
			return nil, err
		}
		var src []byte
		if len(args) == 1 {
			switch x := args[0].(type) {
			case []byte:
				src = x
			case ByteArray:
				src = x
			default:
				return nil, fmt.Errorf("expected bytes, got %s", pyTypeName(x))
			}
		}
		b := make([]byte, len(src)) // charged by construct (boxSize)
		copy(b, src)
		if g.entry == entByteArray {
			return ByteArray(b), nil
		}
		return b, nil
	case entGetattr:
		if len(args) == 2 {
			if c, ok := args[0].(*globalRef); ok && c.entry == entZoneInfo && args[1] == "_unpickle" {
				if err := d.charge(sizeGlobal); err != nil {
					return nil, err
				}
				return &globalRef{module: "zoneinfo", name: "ZoneInfo._unpickle", entry: entZoneUnpickle}, nil
			}
		}
		return nil, &forbiddenUse{`getattr(zoneinfo.ZoneInfo, "_unpickle")`}
	}
	// _codecs.encode
	if len(args) != 2 || (args[1] != "latin1" && args[1] != "latin-1") {
		return nil, &forbiddenUse{`encode(str, "latin1")`}
	}
	s, ok := args[0].(string)
	if !ok {
		return nil, &forbiddenUse{`encode(str, "latin1")`}
	}
	// At most len(s) bytes, charged before they are made (construct charges the
	// value's exact size again).
	if err := d.charge(allocSize(len(s))); err != nil {
		return nil, err
	}
	defer d.credit(allocSize(len(s)))
	b := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff { // a lone surrogate ranges as U+FFFD: refused too
			return nil, errors.New("'latin-1' codec can't encode character")
		}
		b = append(b, byte(r))
	}
	return b, nil
}
