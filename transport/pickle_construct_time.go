package transport

import (
	"errors"
	"fmt"
	"math/big"
	"time"
)

func constructTime(g *globalRef, args []any) (any, error) {
	switch g.entry {
	case entDate:
		if err := nargs(args, 1, 1); err != nil {
			return nil, err
		}
		b, ok := args[0].([]byte)
		if !ok || len(b) != 4 {
			return nil, errors.New("expected the 4-byte pickled state")
		}
		y, m, dd := int(b[0])<<8|int(b[1]), int(b[2]), int(b[3])
		if err := checkDate(y, m, dd); err != nil {
			return nil, err
		}
		return Date{y, m, dd}, nil
	case entTime:
		if err := nargs(args, 1, 2); err != nil {
			return nil, err
		}
		b, ok := args[0].([]byte)
		if !ok || len(b) != 6 {
			return nil, errors.New("expected the 6-byte pickled state")
		}
		var tz TZInfo
		if len(args) == 2 {
			var err error
			if tz, err = asTZ(args[1]); err != nil {
				return nil, err
			}
		}
		t := Time{Hour: int(b[0] & 0x7f), Minute: int(b[1]), Second: int(b[2]),
			Microsecond: int(b[3])<<16 | int(b[4])<<8 | int(b[5]), Fold: int(b[0] >> 7), TZ: tz}
		if err := checkClock(t.Hour, t.Minute, t.Second, t.Microsecond); err != nil {
			return nil, err
		}
		return t, nil
	case entDateTime:
		if err := nargs(args, 1, 2); err != nil {
			return nil, err
		}
		b, ok := args[0].([]byte)
		if !ok || len(b) != 10 {
			return nil, errors.New("expected the 10-byte pickled state")
		}
		var tz TZInfo
		if len(args) == 2 {
			var err error
			if tz, err = asTZ(args[1]); err != nil {
				return nil, err
			}
		}
		t := DateTime{Year: int(b[0])<<8 | int(b[1]), Month: int(b[2] & 0x7f), Day: int(b[3]),
			Hour: int(b[4]), Minute: int(b[5]), Second: int(b[6]),
			Microsecond: int(b[7])<<16 | int(b[8])<<8 | int(b[9]), Fold: int(b[2] >> 7), TZ: tz}
		if err := checkDate(t.Year, t.Month, t.Day); err != nil {
			return nil, err
		}
		if err := checkClock(t.Hour, t.Minute, t.Second, t.Microsecond); err != nil {
			return nil, err
		}
		return t, nil
	case entTimeDelta:
		if err := nargs(args, 0, 3); err != nil {
			return nil, err
		}
		// timedelta's bounds (999999999 days) fit 128 bits in any unit; CPython
		// pickles the normalised small ints.
		var v [3]*big.Int
		for i := range v {
			v[i] = new(big.Int)
			if i < len(args) {
				n, err := asSmallBig(args[i], 128, "timedelta argument")
				if err != nil {
					return nil, err
				}
				v[i].Set(n)
			}
		}
		return normTimeDelta(v[0], v[1], v[2])
	case entTimeZone:
		if err := nargs(args, 1, 2); err != nil {
			return nil, err
		}
		td, ok := args[0].(TimeDelta)
		if !ok {
			return nil, fmt.Errorf("offset is a %s, not a timedelta", pyTypeName(args[0]))
		}
		us := (int64(td.Days)*86400+int64(td.Seconds))*1e6 + int64(td.Microseconds)
		if us <= -86400e6 || us >= 86400e6 {
			return nil, errors.New("offset must be strictly between -timedelta(hours=24) and timedelta(hours=24)")
		}
		tz := TimeZone{Offset: time.Duration(us) * time.Microsecond}
		if len(args) == 2 {
			name, ok := args[1].(string)
			if !ok {
				return nil, errors.New("timezone name must be a str")
			}
			tz.Name = name
		}
		return tz, nil
	}
	// ZoneInfo, ZoneInfo._unpickle
	lo, hi := 1, 1
	if g.entry == entZoneUnpickle {
		lo, hi = 2, 2
	}
	if err := nargs(args, lo, hi); err != nil {
		return nil, err
	}
	key, ok := args[0].(string)
	if !ok {
		return nil, errors.New("zone key must be a str")
	}
	return ZoneInfo{Key: key}, nil
}

func asTZ(v any) (TZInfo, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case TimeZone:
		return x, nil
	case ZoneInfo:
		return x, nil
	}
	return nil, fmt.Errorf("tzinfo is a %s", pyTypeName(v))
}

var daysIn = [13]int{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

func daysInMonth(y, m int) int {
	if m == 2 && y%4 == 0 && (y%100 != 0 || y%400 == 0) {
		return 29
	}
	return daysIn[m]
}

func checkDate(y, m, dd int) error {
	if y < 1 || y > 9999 || m < 1 || m > 12 || dd < 1 || dd > daysInMonth(y, m) {
		return fmt.Errorf("invalid date %04d-%02d-%02d", y, m, dd)
	}
	return nil
}

func checkClock(h, mi, s, us int) error {
	if h > 23 || mi > 59 || s > 59 || us > 999999 {
		return fmt.Errorf("invalid time %02d:%02d:%02d.%06d", h, mi, s, us)
	}
	return nil
}

var (
	bigDayUS = big.NewInt(86400e6)
	bigSecUS = big.NewInt(1e6)
)

// normTimeDelta normalises (days, seconds, microseconds) as timedelta() does.
func normTimeDelta(days, secs, us *big.Int) (TimeDelta, error) {
	total := new(big.Int).Mul(days, bigDayUS)
	total.Add(total, new(big.Int).Mul(secs, bigSecUS))
	total.Add(total, us)
	dd, rem := new(big.Int).DivMod(total, bigDayUS, new(big.Int))
	if !dd.IsInt64() || dd.Int64() > 999999999 || dd.Int64() < -999999999 {
		return TimeDelta{}, errors.New("days out of range")
	}
	r := rem.Int64()
	return TimeDelta{Days: int(dd.Int64()), Seconds: int(r / 1e6), Microseconds: int(r % 1e6)}, nil
}
