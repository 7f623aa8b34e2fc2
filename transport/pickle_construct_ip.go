package transport

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"strings"
)

// maxIPText bounds an address, network or interface given as text (the longest
// valid one, an IPv6 interface with a zone, is far shorter).
const maxIPText = 128

func constructIP(g *globalRef, args []any) (any, error) {
	if err := nargs(args, 1, 1); err != nil {
		return nil, err
	}
	if s, ok := args[0].(string); ok && len(s) > maxIPText {
		return nil, fmt.Errorf("%.40q... (%d bytes) is not an IP address", s, len(s))
	}
	switch g.entry {
	case entIPv4Address, entIPv6Address:
		return ipAddr(args[0], g.entry == entIPv4Address)
	}
	s, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("expected a str, got %s", pyTypeName(args[0]))
	}
	v4 := g.entry == entIPv4Network || g.entry == entIPv4Interface
	iface := g.entry == entIPv4Interface || g.entry == entIPv6Interface
	return ipPrefix(s, v4, iface)
}

func ipAddr(v any, v4 bool) (netip.Addr, error) {
	switch x := v.(type) {
	case int64, *big.Int, bool:
		n, _ := asBig(x)
		bits := 128
		if v4 {
			bits = 32
		}
		if n.Sign() < 0 || n.BitLen() > bits {
			return netip.Addr{}, errors.New("address integer out of range")
		}
		if v4 {
			var b [4]byte
			n.FillBytes(b[:])
			return netip.AddrFrom4(b), nil
		}
		var b [16]byte
		n.FillBytes(b[:])
		return netip.AddrFrom16(b), nil
	case []byte:
		switch {
		case v4 && len(x) == 4:
			return netip.AddrFrom4([4]byte(x)), nil
		case !v4 && len(x) == 16:
			return netip.AddrFrom16([16]byte(x)), nil
		}
		return netip.Addr{}, errors.New("packed address of the wrong length")
	case string:
		a, err := netip.ParseAddr(x)
		if err != nil {
			return netip.Addr{}, err
		}
		if a.Is4() != v4 {
			return netip.Addr{}, fmt.Errorf("%q is not an IPv%s address", x, map[bool]string{true: "4", false: "6"}[v4])
		}
		return a, nil
	}
	return netip.Addr{}, fmt.Errorf("address is a %s", pyTypeName(v))
}

func ipPrefix(s string, v4, iface bool) (IPPrefix, error) {
	if !strings.Contains(s, "/") {
		if v4 {
			s += "/32"
		} else {
			s += "/128"
		}
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return IPPrefix{}, err
	}
	if p.Addr().Is4() != v4 {
		return IPPrefix{}, fmt.Errorf("%q has the wrong IP version", s)
	}
	if !iface && p.Masked() != p {
		return IPPrefix{}, fmt.Errorf("%q has host bits set", s)
	}
	return IPPrefix{Prefix: p, Interface: iface}, nil
}
