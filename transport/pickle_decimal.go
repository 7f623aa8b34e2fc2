package transport

import (
	"fmt"
	"strings"
)

type decSpecial uint8

const (
	decFinite decSpecial = iota
	decInf
	decNaN
	decSNaN
)

type decParsed struct {
	neg     bool
	special decSpecial
	coef    string // digits without leading zeros ("0" for zero); a NaN's payload ("" if none)
	exp     int64
}

// parseDecimal parses what decimal.Decimal(str) accepts (ASCII digits only).
func parseDecimal(s string) (decParsed, error) {
	var p decParsed
	bad := fmt.Errorf("invalid literal for Decimal: %q", s)
	s = strings.TrimSpace(s)
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		p.neg = s[0] == '-'
		s = s[1:]
	}
	ls := strings.ToLower(s)
	switch {
	case ls == "inf" || ls == "infinity":
		p.special = decInf
		return p, nil
	case strings.HasPrefix(ls, "nan") || strings.HasPrefix(ls, "snan"):
		p.special = decNaN
		payload := s[3:]
		if ls[0] == 's' {
			p.special, payload = decSNaN, s[4:]
		}
		digits, ok := cleanDigits(payload, true)
		if !ok {
			return p, bad
		}
		p.coef = strings.TrimLeft(digits, "0")
		return p, nil
	}
	mant, expPart := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, expPart = s[:i], s[i+1:]
		if expPart == "" {
			return p, bad
		}
	}
	intPart, frac := mant, ""
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		intPart, frac = mant[:i], mant[i+1:]
	}
	id, ok1 := cleanDigits(intPart, true)
	fd, ok2 := cleanDigits(frac, true)
	if !ok1 || !ok2 || id+fd == "" {
		return p, bad
	}
	if expPart != "" {
		neg := false
		if expPart[0] == '+' || expPart[0] == '-' {
			neg = expPart[0] == '-'
			expPart = expPart[1:]
		}
		ed, ok := cleanDigits(expPart, false)
		if !ok {
			return p, bad
		}
		ed = strings.TrimLeft(ed, "0")
		if len(ed) > 18 {
			return p, fmt.Errorf("Decimal exponent out of range: %q", s)
		}
		for _, c := range ed {
			p.exp = p.exp*10 + int64(c-'0')
		}
		if neg {
			p.exp = -p.exp
		}
	}
	p.exp -= int64(len(fd))
	p.coef = strings.TrimLeft(id+fd, "0")
	if p.coef == "" {
		p.coef = "0"
	}
	return p, nil
}

// cleanDigits removes the underscores Python allows between digits; ok is false for
// anything else than ASCII digits (or an empty string when emptyOK is false).
func cleanDigits(s string, emptyOK bool) (string, bool) {
	if s == "" {
		return "", emptyOK
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			b.WriteByte(c)
		case c == '_' && i > 0 && i+1 < len(s) && s[i-1] != '_' && s[i+1] >= '0' && s[i+1] <= '9':
		default:
			return "", false
		}
	}
	return b.String(), true
}

// String is Python's str(Decimal) (to-scientific-string).
func (p decParsed) String() string {
	sign := ""
	if p.neg {
		sign = "-"
	}
	switch p.special {
	case decInf:
		return sign + "Infinity"
	case decNaN:
		return sign + "NaN" + p.coef
	case decSNaN:
		return sign + "sNaN" + p.coef
	}
	c := p.coef
	left := p.exp + int64(len(c))
	var dot int64 = 1
	if p.exp <= 0 && left > -6 {
		dot = left
	}
	var intPart, frac string
	switch {
	case dot <= 0:
		intPart, frac = "0", "."+strings.Repeat("0", int(-dot))+c
	case dot >= int64(len(c)):
		intPart = c + strings.Repeat("0", int(dot-int64(len(c))))
	default:
		intPart, frac = c[:dot], "."+c[dot:]
	}
	exp := ""
	if left != dot {
		exp = fmt.Sprintf("E%+d", left-dot)
	}
	return sign + intPart + frac + exp
}
