package netfilter

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pysandboxes/pysandboxes/policy"
)

// TestPortSetAgainstNaive checks the word-wise set operations against a plain
// per-port model.
func TestPortSetAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var s portSet
		var naive [65536]bool
		var added []policy.PortRange
		for range 1 + r.IntN(6) {
			lo := uint16(r.IntN(65536))
			hi := lo + uint16(r.IntN(int(65535-lo)+1)/(1+r.IntN(100)))
			if r.IntN(5) == 0 {
				hi = 65535
			}
			if r.IntN(3) == 0 {
				s.removeRange(lo, hi)
				for p := int(lo); p <= int(hi); p++ {
					naive[p] = false
				}
			} else {
				s.addRange(lo, hi)
				added = append(added, policy.PortRange{Lo: lo, Hi: hi})
				for p := int(lo); p <= int(hi); p++ {
					naive[p] = true
				}
			}
		}
		var want []policy.PortRange
		n := 0
		for p := 0; p <= 65535; p++ {
			if !naive[p] {
				continue
			}
			n++
			if k := len(want); k > 0 && int(want[k-1].Hi) == p-1 {
				want[k-1].Hi = uint16(p)
			} else {
				want = append(want, policy.PortRange{Lo: uint16(p), Hi: uint16(p)})
			}
		}
		if diff := cmp.Diff(want, s.ranges()); diff != "" {
			t.Fatalf("ranges (-want +got):\n%s", diff)
		}
		if s.count() != n || s.empty() != (n == 0) {
			t.Fatalf("count %d empty %v, want %d", s.count(), s.empty(), n)
		}
		var u portSet
		u.add(added)
		if diff := cmp.Diff(u.ranges(), mergePorts(added)); diff != "" {
			t.Fatalf("mergePorts (-set +merge):\n%s", diff)
		}
	}
}
