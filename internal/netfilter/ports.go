package netfilter

import (
	"math/bits"
	"slices"

	"github.com/pysandboxes/pysandboxes/policy"
)

// portSet is a set of ports (0-65535).
type portSet [1024]uint64

// rangeMask calls fn with each word index of [lo, hi] and the mask of its bits.
func rangeMask(lo, hi uint16, fn func(w int, mask uint64)) {
	for w := int(lo) >> 6; w <= int(hi)>>6; w++ {
		m := ^uint64(0)
		if w == int(lo)>>6 {
			m &= ^uint64(0) << (lo & 63)
		}
		if w == int(hi)>>6 {
			m &= ^uint64(0) >> (63 - hi&63)
		}
		fn(w, m)
	}
}

func (s *portSet) addRange(lo, hi uint16) {
	rangeMask(lo, hi, func(w int, m uint64) { s[w] |= m })
}

func (s *portSet) removeRange(lo, hi uint16) {
	rangeMask(lo, hi, func(w int, m uint64) { s[w] &^= m })
}

func (s *portSet) add(rs []policy.PortRange) {
	for _, r := range rs {
		s.addRange(r.Lo, r.Hi)
	}
}

func (s *portSet) has(p int) bool { return s[p>>6]&(1<<(p&63)) != 0 }

func (s *portSet) empty() bool {
	for _, w := range s {
		if w != 0 {
			return false
		}
	}
	return true
}

// count returns the number of ports in the set.
func (s *portSet) count() int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

// ranges returns the set as sorted, disjoint, non-adjacent inclusive ranges.
func (s *portSet) ranges() []policy.PortRange {
	var out []policy.PortRange
	for p := 0; p <= 65535; p++ {
		if s[p>>6] == 0 {
			p |= 63
			continue
		}
		if !s.has(p) {
			continue
		}
		lo := p
		for p+1 <= 65535 {
			if p&63 == 63 && p+64 <= 65535 && s[(p+1)>>6] == ^uint64(0) {
				p += 64
				continue
			}
			if !s.has(p + 1) {
				break
			}
			p++
		}
		out = append(out, policy.PortRange{Lo: uint16(lo), Hi: uint16(p)})
	}
	return out
}

// mergePorts returns rs sorted and merged (overlapping or adjacent ranges joined).
func mergePorts(rs []policy.PortRange) []policy.PortRange {
	in := slices.Clone(rs)
	slices.SortFunc(in, func(a, b policy.PortRange) int { return int(a.Lo) - int(b.Lo) })
	var out []policy.PortRange
	for _, r := range in {
		if n := len(out); n > 0 && int(r.Lo) <= int(out[n-1].Hi)+1 {
			out[n-1].Hi = max(out[n-1].Hi, r.Hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

// allPorts reports whether merged ranges cover every port.
func allPorts(merged []policy.PortRange) bool {
	return len(merged) == 1 && merged[0].Lo == 0 && merged[0].Hi == 65535
}
