package policy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// defaultHostsFile is read when Options.HostsFile is "".
const defaultHostsFile = "/etc/hosts"

// maxHostsSize bounds the part of the hosts file that is read.
const maxHostsSize = 16 << 20

// builtinHosts answers for the loopback names when the hosts file does not list them.
var builtinHosts = map[string][]netip.Addr{
	"localhost":     {netip.AddrFrom4([4]byte{127, 0, 0, 1})},
	"ip6-localhost": {netip.IPv6Loopback()},
	"ip6-loopback":  {netip.IPv6Loopback()},
}

// retryDelays are the waits before each new try of a lookup that failed with a
// transient error (a *net.DNSError with IsTemporary or IsTimeout): two retries, after
// 0.2 s then 0.4 s.
var retryDelays = []time.Duration{200 * time.Millisecond, 400 * time.Millisecond}

// retryWait waits d or until ctx is done (Options.wait replaces it in tests).
func retryWait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// errNoAddress reports a lookup that succeeded with an empty answer.
var errNoAddress = errors.New("no address")

// dnsState is the per-load resolution state: the hosts file, read once when the first
// host name shows up, and every answer (or failure), so a name is resolved once
// however many rules name it. The zero value is ready to use.
type dnsState struct {
	hostsRead bool
	hosts     map[string][]netip.Addr
	cache     map[string]dnsAnswer
}

type dnsAnswer struct {
	addrs []netip.Addr
	err   error
}

// HostError reports a host name of a net= rule that did not resolve. It is the Err
// of the ConfigError of a DENY rule (and the cause quoted in the warning of a dropped
// ALLOW rule).
type HostError struct {
	// Host is the name as queried (lower-case).
	Host string
	// Attempts is how many times the resolver was asked (1 to 3).
	Attempts int
	// Err is the resolver's error, usually a *net.DNSError.
	Err error
}

// Error renders the cause without the resolver's address, e.g. "no such host" or
// "server misbehaving (3 attempts)".
func (e *HostError) Error() string {
	msg := e.Err.Error()
	var de *net.DNSError
	if errors.As(e.Err, &de) {
		msg = de.Err
		if de.IsNotFound {
			msg = "no such host"
		}
	}
	if e.Attempts > 1 {
		msg += " (" + strconv.Itoa(e.Attempts) + " attempts)"
	}
	return msg
}

// Unwrap returns the resolver's error.
func (e *HostError) Unwrap() error { return e.Err }

// hostKey is the pin-table key of a host name: lower-case, no trailing dot.
func hostKey(s string) string { return strings.ToLower(strings.TrimSuffix(s, ".")) }

// validHostName accepts an ASCII host name as RFC 1123 defines it: at most 253
// characters (a trailing dot aside), labels of 1 to 63 letters, digits and hyphens
// that neither start nor end with a hyphen, and a last label that is not all digits
// (so a mistyped IPv4 address is not taken for a name).
func validHostName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			c := s[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
			continue
		}
		label := s[start:i]
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		if i == len(s) && strings.Trim(label, "0123456789") == "" {
			return false
		}
		start = i + 1
	}
	return true
}

// resolveHost returns the addresses of a host name of a net= rule: from the hosts
// file, else from the built-in loopback names, else from the resolver (transient
// failures retried). Answers are cached for the load; an interrupted lookup is not.
// Addresses come back without zone, IPv4-mapped ones as IPv4, deduplicated, in the
// order of the answer.
func (ld *loader) resolveHost(r Rule, name string) ([]netip.Addr, error) {
	st := &ld.netState.dns
	query := strings.ToLower(name)
	if a, ok := st.cache[query]; ok {
		return a.addrs, a.err
	}
	if !st.hostsRead {
		st.hostsRead = true
		st.hosts = ld.readHosts(r.Ref)
	}
	ctx := ld.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	key := hostKey(name)
	var ans dnsAnswer
	source := "hosts file"
	if a, ok := st.hosts[key]; ok {
		ans.addrs = a
	} else if a, ok := builtinHosts[key]; ok {
		ans.addrs, source = a, "built-in"
	} else {
		source = "resolver"
		res := ld.opts.Resolver
		if res == nil {
			res = net.DefaultResolver
		}
		ans.addrs, ans.err = lookupHost(ctx, res, query, ld.opts.wait)
		if isCanceled(ctx, ans.err) {
			return nil, ans.err
		}
	}
	if ans.err == nil {
		ld.debug("net: host name resolved", "host", query, "addrs", ans.addrs, "source", source)
	}
	if st.cache == nil {
		st.cache = map[string]dnsAnswer{}
	}
	st.cache[query] = ans
	return ans.addrs, ans.err
}

// lookupHost asks the resolver for every address of host, retrying transient
// failures after each of retryDelays. A failure is a *HostError.
func lookupHost(ctx context.Context, res *net.Resolver, host string, wait func(context.Context, time.Duration) error) ([]netip.Addr, error) {
	if wait == nil {
		wait = retryWait
	}
	for attempt := 1; ; attempt++ {
		addrs, err := res.LookupNetIP(ctx, "ip", host)
		if err == nil {
			out := canonAddrs(addrs)
			if len(out) > 0 {
				return out, nil
			}
			err = errNoAddress
		}
		if ctx.Err() != nil || attempt > len(retryDelays) || !transient(err) {
			return nil, &HostError{Host: host, Attempts: attempt, Err: err}
		}
		if werr := wait(ctx, retryDelays[attempt-1]); werr != nil {
			return nil, &HostError{Host: host, Attempts: attempt, Err: werr}
		}
	}
}

// transient reports a resolver error worth retrying: temporary or timed out, and not
// a name that does not exist.
func transient(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de) && !de.IsNotFound && (de.IsTemporary || de.IsTimeout)
}

// isCanceled reports a failure caused by the end of the load's context.
func isCanceled(ctx context.Context, err error) bool {
	return err != nil && ctx != nil && ctx.Err() != nil
}

// canonAddrs drops zones, unmaps IPv4-mapped addresses, drops invalid ones and
// duplicates, keeping the order.
func canonAddrs(in []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, 0, len(in))
	for _, a := range in {
		if a = canonAddr(a); a.IsValid() && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// readHosts reads the hosts file. A missing file is an empty one; an unreadable
// file is reported as a warning on the rule that first needed it.
func (ld *loader) readHosts(ref Ref) map[string][]netip.Addr {
	path := ld.opts.HostsFile
	if path == "" {
		path = defaultHostsFile
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		ld.debug("net: no hosts file", "file", path)
		return nil
	}
	if err != nil {
		ld.warn(ref, "cannot read the hosts file: %v; host names are resolved by the resolver only", err)
		return nil
	}
	defer f.Close()
	hosts, err := parseHosts(io.LimitReader(f, maxHostsSize))
	if err != nil {
		ld.warn(ref, "cannot read the hosts file: %v; host names are resolved by the resolver only", err)
		return nil
	}
	return hosts
}

// parseHosts reads the /etc/hosts format: "address name [alias...]" lines, '#'
// comments, IPv4 and IPv6 addresses. Names are keyed by hostKey; a name listed on
// several lines gets every address, in file order, without duplicates. Lines whose
// address does not parse are skipped.
func parseHosts(r io.Reader) (map[string][]netip.Addr, error) {
	hosts := map[string][]netip.Addr{}
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if f := strings.Fields(line); len(f) >= 2 {
			if a, perr := netip.ParseAddr(f[0]); perr == nil {
				a = canonAddr(a)
				for _, name := range f[1:] {
					k := hostKey(name)
					if !slices.Contains(hosts[k], a) {
						hosts[k] = append(hosts[k], a)
					}
				}
			}
		}
		if err == io.EOF {
			return hosts, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
