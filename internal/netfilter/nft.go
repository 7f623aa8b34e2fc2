package netfilter

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"github.com/pysandboxes/pysandboxes/policy"
)

// This file installs the ruleset with netlink (github.com/google/nftables): one
// batch, which the kernel applies atomically or not at all.

var hooks = map[string]*nftables.ChainHook{
	"output":      nftables.ChainHookOutput,
	"input":       nftables.ChainHookInput,
	"prerouting":  nftables.ChainHookPrerouting,
	"postrouting": nftables.ChainHookPostrouting,
}

// conn returns an nftables connection to the network namespace open as nsFD, or
// to the calling thread's when nsFD < 0.
func conn(nsFD int) (*nftables.Conn, error) {
	if nsFD < 0 {
		return nftables.New()
	}
	return nftables.New(nftables.WithNetNSFd(nsFD))
}

// install adds the table to the network namespace open as nsFD (the calling
// thread's when nsFD < 0), in one batch.
func (rs *ruleset) install(nsFD int) error {
	c, err := conn(nsFD)
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := c.CreateTable(&nftables.Table{Name: tableName, Family: nftables.TableFamilyINet})
	var setID uint32
	for ci := range rs.chains {
		ch := &rs.chains[ci]
		pol := nftables.ChainPolicyAccept
		if ch.drop {
			pol = nftables.ChainPolicyDrop
		}
		typ := nftables.ChainTypeFilter
		if ch.typ == "nat" {
			typ = nftables.ChainTypeNAT
		}
		nc := c.AddChain(&nftables.Chain{
			Name: ch.name, Table: t, Type: typ, Hooknum: hooks[ch.hook],
			Priority: nftables.ChainPriorityRef(nftables.ChainPriority(ch.priority)), Policy: &pol,
		})
		for ri := range ch.rules {
			exprs, err := ch.rules[ri].exprs(c, t, &setID)
			if err != nil {
				return fmt.Errorf("nftables: chain %s, rule %q: %w", ch.name, ch.rules[ri].text(), err)
			}
			r := &nftables.Rule{Table: t, Chain: nc, Exprs: exprs}
			if cm := ch.rules[ri].comment; cm != "" {
				r.UserData = userdata.AppendString(nil, userdata.TypeComment, cm)
			}
			c.AddRule(r)
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: installing table inet %s: %w", tableName, err)
	}
	return nil
}

// removeTable deletes the table from the network namespace open as nsFD. A table
// that is not there is not an error.
func removeTable(nsFD int) error {
	c, err := conn(nsFD)
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	c.DelTable(&nftables.Table{Name: tableName, Family: nftables.TableFamilyINet})
	if err := c.Flush(); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("nftables: removing table inet %s: %w", tableName, err)
	}
	return nil
}

// hasTable reports whether the namespace open as nsFD holds the table.
func hasTable(nsFD int) (bool, error) {
	c, err := conn(nsFD)
	if err != nil {
		return false, err
	}
	ts, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, err
	}
	for _, t := range ts {
		if t.Name == tableName {
			return true, nil
		}
	}
	return false, nil
}

// ipsDstNAT is IPS_DST_NAT of nf_conntrack_common.h.
const ipsDstNAT = 1 << 5

func u32(v uint32) []byte { return binaryutil.NativeEndian.PutUint32(v) }

// ifname returns an interface name as the kernel compares it (16 bytes, NUL padded).
func ifname(n string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, n)
	return b
}

// exprs returns the netlink expressions of the rule. Anonymous sets it needs are
// added to the batch of c.
func (r *nrule) exprs(c *nftables.Conn, t *nftables.Table, setID *uint32) ([]expr.Any, error) {
	var e []expr.Any
	if r.ctState != 0 {
		e = append(e,
			&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: u32(r.ctState), Xor: u32(0)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: u32(0)})
	}
	if r.ctDNAT {
		e = append(e,
			&expr.Ct{Register: 1, Key: expr.CtKeySTATUS},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: u32(ipsDstNAT), Xor: u32(0)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: u32(0)})
	}
	if r.oifLo {
		e = append(e, &expr.Meta{Key: expr.MetaKeyOIF, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: u32(1)})
	}
	if r.iifLo {
		e = append(e, &expr.Meta{Key: expr.MetaKeyIIF, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: u32(1)})
	}
	if r.iifname != "" {
		e = append(e, &expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(r.iifname)})
	}
	if r.oifname != "" {
		e = append(e, &expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(r.oifname)})
	}
	if r.fam != famAny {
		nf := byte(unix.NFPROTO_IPV4)
		if r.fam == famIPv6 {
			nf = unix.NFPROTO_IPV6
		}
		e = append(e, &expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{nf}})
	}
	if r.saddr != nil || r.daddr != nil {
		if r.fam == famAny {
			return nil, errors.New("an address match needs a family")
		}
	}
	for _, m := range []struct {
		ps  []netip.Prefix
		src bool
	}{{r.saddr, true}, {r.daddr, false}} {
		if m.ps == nil {
			continue
		}
		off, n := uint32(16), uint32(4)
		if m.src {
			off = 12
		}
		if r.fam == famIPv6 {
			off, n = 24, 16
			if m.src {
				off = 8
			}
		}
		e = append(e, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n})
		ae, err := addrMatch(c, t, setID, m.ps, r.fam)
		if err != nil {
			return nil, err
		}
		e = append(e, ae...)
	}
	if r.proto != 0 {
		var l4 byte = unix.IPPROTO_TCP
		if r.proto == policy.UDP {
			l4 = unix.IPPROTO_UDP
		}
		e = append(e, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{l4}})
	}
	if r.dport != nil {
		if r.proto == 0 {
			return nil, errors.New("a port match needs a protocol")
		}
		e = append(e, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2})
		pe, err := portMatch(c, t, setID, r.dport)
		if err != nil {
			return nil, err
		}
		e = append(e, pe...)
	}
	switch r.verdict {
	case vAccept:
		e = append(e, &expr.Verdict{Kind: expr.VerdictAccept})
	case vDrop:
		e = append(e, &expr.Verdict{Kind: expr.VerdictDrop})
	case vReset:
		if r.proto != policy.TCP {
			return nil, errors.New("a TCP reset needs the TCP protocol")
		}
		e = append(e, &expr.Reject{Type: unix.NFT_REJECT_TCP_RST})
	case vDNAT:
		nf := uint32(unix.NFPROTO_IPV4)
		if r.natTo.Is6() {
			nf = unix.NFPROTO_IPV6
		}
		e = append(e,
			&expr.Immediate{Register: 1, Data: r.natTo.AsSlice()},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: nf, RegAddrMin: 1})
	case vMasq:
		e = append(e, &expr.Masq{})
	default:
		return nil, fmt.Errorf("no statement (%d)", r.verdict)
	}
	return e, nil
}

// addrMatch matches register 1 (an address of fam) against the prefixes: a
// comparison for one address, a mask and a comparison for one network, an
// interval set lookup for more.
func addrMatch(c *nftables.Conn, t *nftables.Table, setID *uint32, ps []netip.Prefix, fam family) ([]expr.Any, error) {
	if len(ps) == 1 {
		p := ps[0].Masked()
		if p.IsSingleIP() {
			return []expr.Any{&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Addr().AsSlice()}}, nil
		}
		mask := netip.PrefixFrom(p.Addr(), p.Bits())
		m := maskBytes(mask)
		return []expr.Any{
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: uint32(len(m)), Mask: m, Xor: make([]byte, len(m))},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Addr().AsSlice()},
		}, nil
	}
	iv := mergePrefixes(ps)
	zero := netip.IPv4Unspecified()
	kt := nftables.TypeIPAddr
	if fam == famIPv6 {
		zero, kt = netip.IPv6Unspecified(), nftables.TypeIP6Addr
	}
	var elems []nftables.SetElement
	if iv[0].lo != zero {
		elems = append(elems, nftables.SetElement{Key: zero.AsSlice(), IntervalEnd: true})
	}
	for _, v := range iv {
		elems = append(elems, nftables.SetElement{Key: v.lo.AsSlice()})
		if next := v.hi.Next(); next.IsValid() {
			elems = append(elems, nftables.SetElement{Key: next.AsSlice(), IntervalEnd: true})
		}
	}
	return lookup(c, t, setID, kt, elems)
}

// portMatch matches register 1 (a port, big endian) against the ranges.
func portMatch(c *nftables.Conn, t *nftables.Table, setID *uint32, rs []policy.PortRange) ([]expr.Any, error) {
	be := func(p uint16) []byte { return binary.BigEndian.AppendUint16(nil, p) }
	if len(rs) == 1 {
		if rs[0].Lo == rs[0].Hi {
			return []expr.Any{&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: be(rs[0].Lo)}}, nil
		}
		return []expr.Any{&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: be(rs[0].Lo), ToData: be(rs[0].Hi)}}, nil
	}
	var elems []nftables.SetElement
	if rs[0].Lo != 0 {
		elems = append(elems, nftables.SetElement{Key: be(0), IntervalEnd: true})
	}
	for _, r := range rs {
		elems = append(elems, nftables.SetElement{Key: be(r.Lo)})
		if r.Hi < 65535 {
			elems = append(elems, nftables.SetElement{Key: be(r.Hi + 1), IntervalEnd: true})
		}
	}
	return lookup(c, t, setID, nftables.TypeInetService, elems)
}

// lookup adds an anonymous constant interval set to the batch and returns the
// lookup of register 1 in it.
func lookup(c *nftables.Conn, t *nftables.Table, setID *uint32, kt nftables.SetDatatype, elems []nftables.SetElement) ([]expr.Any, error) {
	*setID++
	s := &nftables.Set{
		Table: t, ID: *setID, Name: "__set%d", Anonymous: true, Constant: true, Interval: true,
		KeyType: kt, KeyByteOrder: binaryutil.BigEndian,
	}
	if err := c.AddSet(s, elems); err != nil {
		return nil, err
	}
	return []expr.Any{&expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID}}, nil
}

// maskBytes returns the network mask of p.
func maskBytes(p netip.Prefix) []byte {
	n := p.Addr().BitLen() / 8
	m := make([]byte, n)
	for i := 0; i < p.Bits(); i++ {
		m[i/8] |= 0x80 >> (i % 8)
	}
	return m
}
