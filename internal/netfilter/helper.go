package netfilter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pysandboxes/pysandboxes/internal/netif"
	"github.com/pysandboxes/pysandboxes/policy"
)

// This file is the unprivileged path. A host process without CAP_SYS_ADMIN cannot
// setns(2) into a sandbox's network namespace (the kernel wants CAP_SYS_ADMIN in
// the caller's own user namespace too), and a multithreaded process cannot join
// the sandbox's user namespace, where it would have that capability. So the host
// binary is re-executed as a helper: a cgo constructor (helper_cgo.go) joins the
// sandbox's user and network namespaces before the Go runtime starts, and the
// package's init runs the job read from stdin there, with every capability of the
// sandbox's user namespace (which the host's user owns): the same checks, sysctls
// and table as the privileged path, then it exits.

// helperMarker is the helper's argv[0] (the constructor compares it).
const helperMarker = "pysandboxes-netfilter"

// helperTimeout bounds one run of the helper beyond the caller's context.
const helperTimeout = 10 * time.Second

func init() {
	if len(os.Args) >= 3 && os.Args[0] == helperMarker {
		os.Exit(helperMain(os.Args[2], os.Stdin, os.Stdout))
	}
}

// helperJob is what the helper is asked to do.
type helperJob struct {
	// Op is "setup" (check the namespace, lo up, sysctls, table), "remove" (the
	// table) or "probe" (install and remove a small table).
	Op            string      `json:"op"`
	Egress        bool        `json:"egress,omitempty"`
	RouteLocalnet bool        `json:"route_localnet,omitempty"`
	Chains        []wireChain `json:"chains,omitempty"`
}

type helperResult struct {
	Err string `json:"err,omitempty"`
}

type wireChain struct {
	Name     string     `json:"name"`
	Type     string     `json:"type"`
	Hook     string     `json:"hook"`
	Priority int        `json:"priority"`
	Drop     bool       `json:"drop,omitempty"`
	Rules    []wireRule `json:"rules"`
}

type wireRule struct {
	CtState uint32             `json:"ct_state,omitempty"`
	CtDNAT  bool               `json:"ct_dnat,omitempty"`
	OifLo   bool               `json:"oif_lo,omitempty"`
	IifLo   bool               `json:"iif_lo,omitempty"`
	Iifname string             `json:"iifname,omitempty"`
	Oifname string             `json:"oifname,omitempty"`
	Fam     family             `json:"fam,omitempty"`
	Proto   policy.Proto       `json:"proto,omitempty"`
	Saddr   []netip.Prefix     `json:"saddr,omitempty"`
	Daddr   []netip.Prefix     `json:"daddr,omitempty"`
	Dport   []policy.PortRange `json:"dport,omitempty"`
	Verdict verdict            `json:"verdict"`
	NatTo   netip.Addr         `json:"nat_to,omitzero"`
	Comment string             `json:"comment,omitempty"`
}

func (rs *ruleset) wire() []wireChain {
	out := make([]wireChain, len(rs.chains))
	for i, c := range rs.chains {
		w := wireChain{Name: c.name, Type: c.typ, Hook: c.hook, Priority: c.priority, Drop: c.drop}
		for _, r := range c.rules {
			w.Rules = append(w.Rules, wireRule{r.ctState, r.ctDNAT, r.oifLo, r.iifLo, r.iifname, r.oifname, r.fam, r.proto,
				r.saddr, r.daddr, r.dport, r.verdict, r.natTo, r.comment})
		}
		out[i] = w
	}
	return out
}

func unwire(ws []wireChain) ruleset {
	var rs ruleset
	for _, w := range ws {
		if _, ok := hooks[w.Hook]; !ok {
			return ruleset{}
		}
		c := chain{name: w.Name, typ: w.Type, hook: w.Hook, priority: w.Priority, drop: w.Drop}
		for _, r := range w.Rules {
			c.rules = append(c.rules, nrule{r.CtState, r.CtDNAT, r.OifLo, r.IifLo, r.Iifname, r.Oifname, r.Fam, r.Proto,
				r.Saddr, r.Daddr, r.Dport, r.Verdict, r.NatTo, r.Comment})
		}
		rs.chains = append(rs.chains, c)
	}
	return rs
}

// helperMain runs one job in the namespaces the constructor joined (netPath is
// the network namespace it was asked to join) and reports on out.
func helperMain(netPath string, in io.Reader, out io.Writer) int {
	err := helperRun(netPath, in)
	var res helperResult
	if err != nil {
		res.Err = err.Error()
	}
	b, _ := json.Marshal(res)
	out.Write(append(b, '\n'))
	return 0
}

func helperRun(netPath string, in io.Reader) error {
	// The constructor must have moved the process (a build without cgo has none).
	var want, have unix.Stat_t
	if err := unix.Stat(netPath, &want); err != nil {
		return err
	}
	if err := unix.Stat("/proc/thread-self/ns/net", &have); err != nil {
		return err
	}
	if want.Dev != have.Dev || want.Ino != have.Ino {
		return errors.New("the helper did not join the sandbox's network namespace (the host binary was built without cgo)")
	}
	var job helperJob
	if err := json.NewDecoder(io.LimitReader(in, 16<<20)).Decode(&job); err != nil {
		return fmt.Errorf("reading the job: %w", err)
	}
	switch job.Op {
	case "setup":
		if err := prepareHere(job.Egress, job.RouteLocalnet); err != nil {
			return err
		}
		if !job.Egress {
			return nil
		}
		rs := unwire(job.Chains)
		if len(rs.chains) == 0 {
			return errors.New("the job has no valid chain")
		}
		return rs.install(-1)
	case "remove":
		return removeTable(-1)
	case "probe":
		probe := probeRuleset()
		if err := probe.install(-1); err != nil {
			return err
		}
		return removeTable(-1)
	}
	return fmt.Errorf("unknown job %q", job.Op)
}

// prepareHere checks the calling thread's namespace and sets it up: lo up and,
// with egress, the sysctls the tap interface needs.
func prepareHere(egress, routeLocalnet bool) error {
	if err := checkFresh(); err != nil {
		return err
	}
	if err := netif.Up("lo"); err != nil {
		return fmt.Errorf("bringing lo up: %w", err)
	}
	if !egress {
		return nil
	}
	// The tap interface gets no IPv6 (no link-local address, no router
	// solicitation): the egress network is IPv4 only.
	if err := writeSysctl("net/ipv6/conf/default/disable_ipv6", "1", true); err != nil {
		return err
	}
	if routeLocalnet {
		// 127.0.0.1 traffic redirected to the gateway, and forwarded traffic
		// redirected to 127.0.0.1, crosses the tap interface.
		if err := writeSysctl("net/ipv4/conf/all/route_localnet", "1", false); err != nil {
			return err
		}
	}
	return nil
}

// runHelper runs a job in the sandbox's namespaces through the helper.
func runHelper(ctx context.Context, userPath, netPath string, job helperJob) error {
	in, err := json.Marshal(job)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, helperTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/exe", userPath, netPath)
	cmd.Args[0] = helperMarker
	cmd.Env = []string{}
	cmd.Stdin = bytes.NewReader(in)
	out := &tailBuffer{max: 64 << 10}
	errb := &tailBuffer{max: 4096}
	cmd.Stdout, cmd.Stderr = out, errb
	runErr := cmd.Run()
	var res helperResult
	if jerr := json.Unmarshal([]byte(out.String()), &res); jerr != nil {
		// The constructor reports its own failures on stderr, in the same shape.
		if jerr2 := json.Unmarshal([]byte(errb.String()), &res); jerr2 != nil || res.Err == "" {
			return fmt.Errorf("the namespace helper failed: %v: %s", runErr, errb)
		}
	}
	if res.Err != "" {
		return errors.New(res.Err)
	}
	if runErr != nil {
		return fmt.Errorf("the namespace helper: %w", runErr)
	}
	return nil
}

// probeRuleset is the small table Available installs to check nftables.
func probeRuleset() ruleset {
	return ruleset{chains: []chain{{name: "output", typ: "filter", hook: "output", priority: -150, drop: true,
		rules: []nrule{{oifLo: true, verdict: vAccept}, {ctState: ctEstablished, verdict: vAccept}}}}}
}
