package wrapper

import (
	"fmt"
	"strings"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/hostview"
	"github.com/pysandboxes/pysandboxes/internal/netfilter"
	"github.com/pysandboxes/pysandboxes/policy"
)

// NetCapabilities are claimed when the network filter works here: traffic
// filtered by protocol, address or network, port and direction, UDP by port.
const NetCapabilities = driver.CapNetHosts | driver.CapUDP

// NetPlan is the network of a policy with net= rules (nil without any: the
// sandbox has a network namespace of its own with loopback only).
type NetPlan struct {
	// Filter is the network filter (package internal/netfilter) compiled from
	// the rules: the hosts file and resolver of the sandbox, and the filter to
	// set up in its namespace.
	Filter *netfilter.Filter
	// Setup: the filter must be set up in the sandbox's namespace before the
	// program runs (some rule lets traffic leave, or forwards a port into it).
	Setup bool
	// Resolver is the address of the resolver the sandbox queries over UDP
	// ("" when it names none, or asks over TCP: "options use-vc").
	Resolver string
}

// networkFiles are shown read-only when a net= rule allows traffic: the
// resolver's configuration (the hosts file and resolv.conf come from the
// network filter) and the CA certificate stores (never their private key
// directories).
var networkFiles = []string{
	"/etc/nsswitch.conf", "/etc/gai.conf", "/etc/host.conf",
	"/etc/ssl/certs", "/etc/ssl/cert.pem", "/etc/ssl/openssl.cnf",
	"/etc/ca-certificates", "/etc/ca-certificates.conf", "/usr/share/ca-certificates",
	"/etc/pki/ca-trust", "/etc/pki/tls/certs", "/etc/pki/tls/cert.pem", "/etc/pki/tls/openssl.cnf", "/usr/share/pki",
}

// PlanNetwork translates the net= rules. Without a rule there is no plan: the
// sandbox's own network namespace has loopback only, and nothing outside is
// reachable. With rules, the network filter compiles them; a rule it cannot
// serve is an error naming its file(line); a policy whose rules let traffic
// out, or forward ports in, needs the filter to work here (netErr is why it
// does not: then each rule that allows traffic is an error).
func PlanNetwork(n *policy.Network, netErr error) (*NetPlan, []error) {
	if n.Empty() {
		return nil, nil
	}
	f, err := netfilter.Compile(n)
	if err != nil {
		return nil, []error{err}
	}
	np := &NetPlan{Filter: f, Setup: f.Egress() || len(f.Forwards()) > 0, Resolver: udpResolver(f.ResolvConf())}
	if np.Setup && netErr != nil {
		var errs []error
		for _, r := range n.Rules() {
			if r.Action == policy.Allow && len(r.Ports) > 0 {
				errs = append(errs, fmt.Errorf("%s: the network filter cannot work here, so this rule cannot be enforced: %w", hostview.RuleRef(r.Rule), netErr))
			}
		}
		if len(errs) == 0 {
			errs = append(errs, fmt.Errorf("the network filter cannot work here: %w", netErr))
		}
		return nil, errs
	}
	return np, nil
}

// udpResolver is the resolver a resolv.conf names, when it is queried over UDP
// (no "options use-vc").
func udpResolver(rc []byte) string {
	var addr string
	for _, l := range strings.Split(string(rc), "\n") {
		if v, ok := strings.CutPrefix(l, "nameserver "); ok {
			addr = strings.TrimSpace(v)
		}
		if strings.HasPrefix(l, "options ") && strings.Contains(l, "use-vc") {
			return ""
		}
	}
	return addr
}
