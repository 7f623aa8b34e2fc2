package policy

// STUB: replaced by the net= implementation.

import "net/netip"

type Action uint8

const (
	Allow Action = iota + 1
	Deny
)

type Proto uint8

const (
	TCP Proto = 1 << iota
	UDP
	AnyProto = TCP | UDP
)

type Direction uint8

const (
	In Direction = 1 << iota
	Out
	Both = In | Out
)

type PortRange struct{ Lo, Hi uint16 }

type NetRule struct {
	Rule
	Action   Action
	Protos   Proto
	Network  string
	Host     string
	Prefixes []netip.Prefix
	Ports    []PortRange
	Dir      Direction
}

type Network struct {
	rules []NetRule
	pins  map[string][]netip.Addr
}

type netLoad struct{}

func (p *Policy) Network() *Network { return p.net }

func (ld *loader) netRule(r Rule) {}
func (ld *loader) finishNet()     {}
