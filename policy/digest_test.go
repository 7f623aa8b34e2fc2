package policy

import (
	"net/netip"
	"slices"
	"sort"
	"time"
)

// policyDigest is what a policy decides, without provenance: two policies with equal
// digests grant the same things.
type policyDigest struct {
	Environ   []string
	Exposes   []string // "mode path", sorted
	Ignores   []string // "abs|rel pattern", load order
	Net       []netDigest
	Pins      map[string][]string
	Imports   importDigest
	API       map[string]bool // registered function and category -> allowed
	Eval      evalDigest
	Control   controlDigest
	Providers map[string][]string // provider -> "name=value"
}

type netDigest struct {
	Action, Protos, Dir, Network, Host string
	Any                                bool
	Prefixes, Ports                    []string
}

type importDigest struct {
	Declared, All bool
	Modules       []string
}

type evalDigest struct {
	State    string
	Profiles map[string]evalProfileDigest
}

type evalProfileDigest struct {
	Syntax, Call, Attribute, Import, Magic [2][]string
	Namespace                              string
	Timeout                                time.Duration
	Limits                                 [5]int64
	MaxLeakedThreads                       int
}

type controlDigest struct {
	PySandbox, Guard bool
	OSSandbox        string
	Learn            string
	Locked           bool
	ResultMode       ResultMode
}

func digest(p *Policy) policyDigest {
	d := policyDigest{Environ: p.Environ(), Pins: map[string][]string{}, API: map[string]bool{}, Providers: map[string][]string{}}
	for _, e := range p.Exposes() {
		d.Exposes = append(d.Exposes, e.Mode.String()+" "+e.Path)
	}
	sort.Strings(d.Exposes)
	for _, ig := range p.Ignores() {
		kind := "rel "
		if ig.Absolute {
			kind = "abs "
		}
		d.Ignores = append(d.Ignores, kind+ig.Pattern)
	}
	if n := p.Network(); n != nil {
		for _, r := range n.Rules() {
			nd := netDigest{Action: r.Action.String(), Protos: r.Protos.String(), Dir: r.Dir.String(),
				Network: r.Network, Host: r.Host, Any: r.Any}
			for _, x := range r.Prefixes {
				nd.Prefixes = append(nd.Prefixes, x.String())
			}
			for _, x := range r.Ports {
				nd.Ports = append(nd.Ports, x.String())
			}
			d.Net = append(d.Net, nd)
		}
		for h, as := range n.Pins() {
			d.Pins[h] = addrStrings(as)
		}
	}
	im := p.Imports()
	d.Imports = importDigest{Declared: im.Declared(), All: im.All(), Modules: im.Modules()}
	for name := range APIRegistry() {
		ok, _, _ := p.APIAllowed(name)
		d.API[name] = ok
	}
	for _, c := range APICategories() {
		ok, _ := p.API().Category(c)
		d.API["category "+c] = ok
	}
	ev := p.Eval()
	d.Eval = evalDigest{State: ev.State().String(), Profiles: map[string]evalProfileDigest{}}
	for _, name := range ev.Names() {
		pr, _ := ev.Profile(name)
		set := func(s NameSet) [2][]string {
			a, b := s.Expanded()
			return [2][]string{a, b}
		}
		d.Eval.Profiles[name] = evalProfileDigest{
			Syntax: set(pr.Syntax), Call: set(pr.Call), Attribute: set(pr.Attribute),
			Import: set(pr.Import), Magic: set(pr.Magic), Namespace: pr.Namespace, Timeout: pr.Timeout,
			Limits:           [5]int64{pr.MaxIterations, pr.MaxCallDepth, pr.MaxDepth, pr.MaxNodes, pr.MaxAlloc},
			MaxLeakedThreads: pr.MaxLeakedThreads,
		}
	}
	d.Control.PySandbox, _ = p.PySandbox()
	d.Control.Guard, _ = p.RemoteResultGuard()
	d.Control.OSSandbox, _ = p.OSSandbox()
	d.Control.Learn, _ = p.Learn()
	d.Control.Locked = p.Locked() != nil
	d.Control.ResultMode, _ = p.RemoteResultMode()
	for _, prov := range Providers {
		for _, pp := range p.ProviderParams(prov) {
			d.Providers[prov] = append(d.Providers[prov], pp.Name+"="+pp.Value)
		}
	}
	return d
}

func addrStrings(as []netip.Addr) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return slices.Clip(out)
}
