package policy

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testDNS is a minimal DNS server on 127.0.0.1 (UDP) speaking the wire format by
// hand: it answers A and AAAA questions from a table, NXDOMAIN for unknown names,
// and SERVFAIL for the first queries of a "flaky" name. Tests point a pure-Go
// net.Resolver at it, so the resolver's real code path runs and no query ever
// leaves the loopback interface.
type testDNS struct {
	conn *net.UDPConn
	done chan struct{}

	mu      sync.Mutex
	records map[string][]netip.Addr // lower-case name without trailing dot
	fail    map[string]int          // SERVFAIL for the next N queries of the name
	queries map[string]int          // queries received per name
}

// startDNS serves records (name -> addresses) until the test ends.
func startDNS(t testing.TB, records map[string][]string) *testDNS {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	s := &testDNS{
		conn:    conn,
		done:    make(chan struct{}),
		records: map[string][]netip.Addr{},
		fail:    map[string]int{},
		queries: map[string]int{},
	}
	for name, addrs := range records {
		for _, a := range addrs {
			s.records[name] = append(s.records[name], netip.MustParseAddr(a))
		}
	}
	go s.serve()
	t.Cleanup(func() {
		conn.Close()
		<-s.done
	})
	return s
}

// resolver returns a pure-Go resolver whose every query goes to s, whatever
// /etc/resolv.conf names.
func (s *testDNS) resolver() *net.Resolver {
	addr := s.conn.LocalAddr().String()
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", addr)
		},
	}
}

// failNext makes the next n queries of name fail with SERVFAIL.
func (s *testDNS) failNext(name string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[name] = n
}

// count returns the number of queries received for name.
func (s *testDNS) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[name]
}

// total returns the number of queries received.
func (s *testDNS) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.queries {
		n += c
	}
	return n
}

func (s *testDNS) serve() {
	defer close(s.done)
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFromUDP(buf)
		if err != nil {
			return
		}
		if resp := s.answer(buf[:n]); resp != nil {
			_, _ = s.conn.WriteToUDP(resp, from)
		}
	}
}

const (
	dnsTypeA    = 1
	dnsTypeAAAA = 28
	rcodeOK     = 0
	rcodeFail   = 2 // SERVFAIL
	rcodeNX     = 3 // NXDOMAIN
)

// answer builds the response to one query, or nil for a packet to ignore.
func (s *testDNS) answer(q []byte) []byte {
	if len(q) < 12 || q[2]&0x80 != 0 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil // not a query with exactly one question
	}
	// Question name: a sequence of length-prefixed labels (no compression in a query).
	var labels []string
	i := 12
	for {
		if i >= len(q) {
			return nil
		}
		l := int(q[i])
		i++
		if l == 0 {
			break
		}
		if l&0xC0 != 0 || i+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[i:i+l]))
		i += l
	}
	if i+4 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i : i+2])
	question := q[12 : i+4]
	name := strings.ToLower(strings.Join(labels, "."))

	s.mu.Lock()
	s.queries[name]++
	rcode := rcodeOK
	var answers []netip.Addr
	if s.fail[name] > 0 {
		s.fail[name]--
		rcode = rcodeFail
	} else if addrs, ok := s.records[name]; !ok {
		rcode = rcodeNX
	} else {
		for _, a := range addrs {
			if (qtype == dnsTypeA) == a.Is4() && (qtype == dnsTypeA || qtype == dnsTypeAAAA) {
				answers = append(answers, a)
			}
		}
	}
	s.mu.Unlock()

	resp := make([]byte, 12, 512)
	copy(resp[0:2], q[0:2]) // ID
	// QR, the query's opcode and RD, AA, RA, RCODE.
	flags := uint16(0x8000) | binary.BigEndian.Uint16(q[2:4])&0x7900 | 0x0400 | 0x0080 | uint16(rcode)
	binary.BigEndian.PutUint16(resp[2:4], flags)
	binary.BigEndian.PutUint16(resp[4:6], 1)
	binary.BigEndian.PutUint16(resp[6:8], uint16(len(answers)))
	resp = append(resp, question...)
	for _, a := range answers {
		typ, data := uint16(dnsTypeA), a.AsSlice()
		if a.Is6() {
			typ = dnsTypeAAAA
		}
		resp = append(resp, 0xC0, 12) // pointer to the question's name
		resp = binary.BigEndian.AppendUint16(resp, typ)
		resp = binary.BigEndian.AppendUint16(resp, 1) // class IN
		resp = binary.BigEndian.AppendUint32(resp, 60)
		resp = binary.BigEndian.AppendUint16(resp, uint16(len(data)))
		resp = append(resp, data...)
	}
	return resp
}

// stubWaits replaces the retry wait for the test and returns the waits asked for.
// onWait runs at each wait (for example to heal a flaky name).
func stubWaits(e *netEnv, onWait func()) *[]time.Duration {
	var waits []time.Duration
	e.wait = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		if onWait != nil {
			onWait()
		}
		return ctx.Err()
	}
	return &waits
}

// netEnv is the setting of a net= test: a directory, a hosts file and a DNS server.
type netEnv struct {
	dir   string
	hosts string
	dns   *testDNS
	wait  func(context.Context, time.Duration) error
}

func newNetEnv(t testing.TB, hosts string, records map[string][]string) *netEnv {
	t.Helper()
	dir := t.TempDir()
	e := &netEnv{dir: dir, hosts: filepath.Join(dir, "hosts"), dns: startDNS(t, records)}
	if err := os.WriteFile(e.hosts, []byte(hosts), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *netEnv) opts() *Options {
	return &Options{Dir: e.dir, Home: filepath.Join(e.dir, "home"), Env: []string{}, HostsFile: e.hosts, Resolver: e.dns.resolver(),
		Logger: slog.New(slog.DiscardHandler), wait: e.wait}
}

// parse loads text as the rule file .py-sandboxes of the test directory.
func (e *netEnv) parse(ctx context.Context, text string) (*Policy, error) {
	return Parse(ctx, filepath.Join(e.dir, DefaultName), []byte(text), e.opts())
}

func (e *netEnv) mustParse(t testing.TB, text string) *Policy {
	t.Helper()
	p, err := e.parse(context.Background(), text)
	if err != nil {
		t.Fatalf("Parse(%q): %v", text, err)
	}
	return p
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func warnings(p *Policy) []string {
	var out []string
	for _, w := range p.Warnings() {
		out = append(out, w.String())
	}
	return out
}

var addrCmp = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })
var prefixCmp = cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })

const testHosts = `# test hosts file
127.0.0.1	localhost
::1	localhost ip6-localhost ip6-loopback   # both loopbacks

10.1.1.1   Multi.Example.TEST  alias.test
10.1.1.2   multi.example.test
::ffff:10.1.1.3 mapped.test
10.1.1.1   multi.example.test
fe80::1%lo zoned.test
not-an-address broken.test
2001:db8::5 v6only.test
`

func TestDNSHostsFile(t *testing.T) {
	e := newNetEnv(t, testHosts, nil)
	p := e.mustParse(t, strings.Join([]string{
		"net=ALLOW|tcp|multi.example.test|443|OUT",
		"net=ALLOW|tcp|ALIAS.test.|443|OUT",
		"net=ALLOW|tcp|localhost|8000|IN",
		"net=ALLOW|udp|mapped.test|53|OUT",
		"net=ALLOW|udp|zoned.test|53|OUT",
		"net=DENY|*|v6only.test|*|OUT",
	}, "\n"))
	if e.dns.total() != 0 {
		t.Errorf("the resolver was asked %d times; the hosts file answers every name", e.dns.total())
	}
	wantPins := map[string][]netip.Addr{
		"multi.example.test": addrs("10.1.1.1", "10.1.1.2"),
		"alias.test":         addrs("10.1.1.1"),
		"localhost":          addrs("127.0.0.1", "::1"),
		"mapped.test":        addrs("10.1.1.3"),
		"zoned.test":         addrs("fe80::1"),
		"v6only.test":        addrs("2001:db8::5"),
	}
	n := p.Network()
	if diff := cmp.Diff(wantPins, n.Pins(), addrCmp); diff != "" {
		t.Errorf("Pins() (-want +got):\n%s", diff)
	}
	type hostRule struct {
		Network, Host string
		Prefixes      []netip.Prefix
	}
	var got []hostRule
	for _, r := range n.Rules() {
		got = append(got, hostRule{r.Network, r.Host, r.Prefixes})
	}
	pfx := func(ss ...string) []netip.Prefix {
		out := make([]netip.Prefix, len(ss))
		for i, s := range ss {
			out[i] = netip.MustParsePrefix(s)
		}
		return out
	}
	want := []hostRule{
		{"multi.example.test", "multi.example.test", pfx("10.1.1.1/32", "10.1.1.2/32")},
		{"ALIAS.test.", "alias.test", pfx("10.1.1.1/32")},
		{"localhost", "localhost", pfx("127.0.0.1/32", "::1/128")},
		{"mapped.test", "mapped.test", pfx("10.1.1.3/32")},
		{"zoned.test", "zoned.test", pfx("fe80::1/128")},
		{"v6only.test", "v6only.test", pfx("2001:db8::5/128")},
	}
	if diff := cmp.Diff(want, got, prefixCmp); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if _, ok := n.Pin("broken.test"); ok {
		t.Error("a hosts line with a bad address was used")
	}
	if a, ok := n.Pin("MULTI.example.test."); !ok || !cmp.Equal(a, addrs("10.1.1.1", "10.1.1.2"), addrCmp) {
		t.Errorf("Pin(MULTI.example.test.) = %v, %v", a, ok)
	}
	// Pins returns a copy.
	n.Pins()["localhost"][0] = netip.MustParseAddr("1.1.1.1")
	if a, _ := n.Pin("localhost"); a[0] != netip.MustParseAddr("127.0.0.1") {
		t.Error("Pins() shares its slices with the Network")
	}
}

func TestDNSBuiltinHosts(t *testing.T) {
	rules := "net=ALLOW|tcp|localhost|1|OUT\nnet=ALLOW|tcp|ip6-localhost|2|OUT\nnet=ALLOW|tcp|ip6-loopback|3|OUT\n"
	tests := []struct {
		name, hosts string
		want        map[string][]netip.Addr
	}{
		{
			name:  "empty hosts file",
			hosts: "# nothing\n",
			want: map[string][]netip.Addr{
				"localhost":     addrs("127.0.0.1"),
				"ip6-localhost": addrs("::1"),
				"ip6-loopback":  addrs("::1"),
			},
		},
		{
			name:  "hosts file wins",
			hosts: "127.0.1.1 localhost\n::2 ip6-loopback\n",
			want: map[string][]netip.Addr{
				"localhost":     addrs("127.0.1.1"),
				"ip6-localhost": addrs("::1"),
				"ip6-loopback":  addrs("::2"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newNetEnv(t, tt.hosts, nil)
			p := e.mustParse(t, rules)
			if diff := cmp.Diff(tt.want, p.Network().Pins(), addrCmp); diff != "" {
				t.Errorf("Pins() (-want +got):\n%s", diff)
			}
			if e.dns.total() != 0 {
				t.Errorf("the resolver was asked %d times", e.dns.total())
			}
		})
	}
	t.Run("missing hosts file", func(t *testing.T) {
		e := newNetEnv(t, "", nil)
		o := e.opts()
		o.HostsFile = filepath.Join(e.dir, "no-such-hosts")
		p, err := Parse(context.Background(), filepath.Join(e.dir, DefaultName), []byte(rules), o)
		if err != nil {
			t.Fatal(err)
		}
		if a, _ := p.Network().Pin("localhost"); !cmp.Equal(a, addrs("127.0.0.1"), addrCmp) {
			t.Errorf("Pin(localhost) = %v", a)
		}
		if w := warnings(p); len(w) != 0 {
			t.Errorf("warnings: %q", w)
		}
	})
}

func TestDNSResolver(t *testing.T) {
	e := newNetEnv(t, "", map[string][]string{
		"api.example.test": {"192.0.2.10", "192.0.2.11", "2001:db8::10"},
		"v4.example.test":  {"192.0.2.20"},
		"v6.example.test":  {"2001:db8::20"},
	})
	stubWaits(e, func() { t.Error("a lookup was retried") })
	p := e.mustParse(t, `net=ALLOW|tcp|api.example.test|443|OUT
net=ALLOW|tcp|API.Example.Test|80|OUT
net=ALLOW|udp|v4.example.test|53|OUT
net=DENY|*|v6.example.test|*|*
`)
	want := map[string][]netip.Addr{
		"api.example.test": addrs("192.0.2.10", "192.0.2.11", "2001:db8::10"),
		"v4.example.test":  addrs("192.0.2.20"),
		"v6.example.test":  addrs("2001:db8::20"),
	}
	if diff := cmp.Diff(want, p.Network().Pins(), addrCmp, cmp.Transformer("sort", sortAddrs)); diff != "" {
		t.Errorf("Pins() (-want +got):\n%s", diff)
	}
	for _, r := range p.Network().Rules() {
		if len(r.Prefixes) != len(want[r.Host]) {
			t.Errorf("%s: %d prefixes, want one per address (%v)", r.Raw, len(r.Prefixes), want[r.Host])
		}
		for _, pf := range r.Prefixes {
			if pf.Bits() != pf.Addr().BitLen() {
				t.Errorf("%s: prefix %v is not a single address", r.Raw, pf)
			}
		}
	}
}

// sortAddrs orders addresses, because the resolver merges its A and AAAA answers in
// an order of its own.
func sortAddrs(in []netip.Addr) []netip.Addr {
	out := append([]netip.Addr(nil), in...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Less(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func TestDNSResolvedOncePerLoad(t *testing.T) {
	e := newNetEnv(t, "", map[string][]string{"once.test": {"192.0.2.1"}})
	e.mustParse(t, "net=ALLOW|tcp|once.test|443|OUT\n")
	one := e.dns.count("once.test")
	if one == 0 {
		t.Fatal("the resolver was not asked")
	}
	var b strings.Builder
	for i := range 1000 {
		b.WriteString("net=ALLOW|tcp|once.test|")
		b.WriteString(strings.Repeat("1", 1+i%3))
		b.WriteString("|OUT\n")
	}
	p := e.mustParse(t, b.String())
	if got := e.dns.count("once.test") - one; got != one {
		t.Errorf("1000 rules naming once.test sent %d queries, one rule sends %d", got, one)
	}
	if n := len(p.Network().Rules()); n != 1000 {
		t.Errorf("%d rules, want 1000", n)
	}
}

func TestDNSUnresolvable(t *testing.T) {
	e := newNetEnv(t, "", map[string][]string{"ok.test": {"192.0.2.1"}})
	waits := stubWaits(e, nil)

	p := e.mustParse(t, "net=ALLOW|tcp|ok.test|443|OUT\nnet=ALLOW|tcp|nope.test|443|OUT\n")
	wantWarn := []string{".py-sandboxes(2): Rule 'net=ALLOW|tcp|nope.test|443|OUT' dropped: cannot resolve host name 'nope.test': no such host (its traffic stays denied)"}
	if diff := cmp.Diff(wantWarn, warnings(p)); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	n := p.Network()
	if len(n.Rules()) != 1 || n.Rules()[0].Host != "ok.test" {
		t.Errorf("rules = %v, want only the ok.test rule", n.Rules())
	}
	if _, ok := n.Pin("nope.test"); ok {
		t.Error("an unresolvable name is pinned")
	}
	if len(*waits) != 0 {
		t.Errorf("a non-existent name was retried: waits %v", *waits)
	}

	// Only dropped rules: the network is not empty, it denies everything.
	p = e.mustParse(t, "net=ALLOW|*|nope.test|*|*\n")
	if p.Network().Empty() {
		t.Error("Empty() = true for a policy whose only net= rule was dropped")
	}
	if ok, _ := p.Network().Allowed(TCP, netip.MustParseAddr("192.0.2.1"), 1, Out); ok {
		t.Error("traffic allowed after the only rule was dropped")
	}

	_, err := e.parse(context.Background(), "net=ALLOW|tcp|ok.test|443|OUT\nnet=DENY|tcp|nope.test|443|OUT\n")
	want := Headline + "\n.py-sandboxes(2): Invalid rule 'net=DENY|tcp|nope.test|443|OUT': cannot resolve host name 'nope.test' of a DENY rule: no such host"
	checkErr(t, err, want)
	var he *HostError
	var de *net.DNSError
	if !errors.As(err, &he) || !errors.As(err, &de) || !de.IsNotFound {
		t.Errorf("error %v does not wrap a *HostError and a not-found *net.DNSError", err)
	}
}

func TestDNSRetry(t *testing.T) {
	t.Run("transient failure then success", func(t *testing.T) {
		e := newNetEnv(t, "", map[string][]string{"flaky.test": {"192.0.2.7"}})
		e.dns.failNext("flaky.test", 1<<30)
		waits := stubWaits(e, func() { e.dns.failNext("flaky.test", 0) })
		p := e.mustParse(t, "net=ALLOW|tcp|flaky.test|443|OUT\n")
		if diff := cmp.Diff([]time.Duration{200 * time.Millisecond}, *waits); diff != "" {
			t.Errorf("waits (-want +got):\n%s", diff)
		}
		if a, ok := p.Network().Pin("flaky.test"); !ok || !cmp.Equal(a, addrs("192.0.2.7"), addrCmp) {
			t.Errorf("Pin(flaky.test) = %v, %v", a, ok)
		}
		if w := warnings(p); len(w) != 0 {
			t.Errorf("warnings: %q", w)
		}
	})
	t.Run("transient failure every time", func(t *testing.T) {
		e := newNetEnv(t, "", map[string][]string{"down.test": {"192.0.2.8"}})
		e.dns.failNext("down.test", 1<<30)
		waits := stubWaits(e, nil)
		p := e.mustParse(t, "net=ALLOW|tcp|down.test|443|OUT\n")
		if diff := cmp.Diff([]time.Duration{200 * time.Millisecond, 400 * time.Millisecond}, *waits); diff != "" {
			t.Errorf("waits (-want +got):\n%s", diff)
		}
		wantWarn := []string{".py-sandboxes(1): Rule 'net=ALLOW|tcp|down.test|443|OUT' dropped: cannot resolve host name 'down.test': server misbehaving (3 attempts) (its traffic stays denied)"}
		if diff := cmp.Diff(wantWarn, warnings(p)); diff != "" {
			t.Errorf("warnings (-want +got):\n%s", diff)
		}

		*waits = nil
		_, err := e.parse(context.Background(), "net=DENY|tcp|down.test|443|OUT\n")
		checkErr(t, err, Headline+"\n.py-sandboxes(1): Invalid rule 'net=DENY|tcp|down.test|443|OUT': cannot resolve host name 'down.test' of a DENY rule: server misbehaving (3 attempts)")
		if len(*waits) != 2 {
			t.Errorf("waits %v, want two retries", *waits)
		}
	})
	t.Run("real delays", func(t *testing.T) {
		e := newNetEnv(t, "", map[string][]string{"slow.test": {"192.0.2.9"}})
		e.dns.failNext("slow.test", 1<<30)
		start := time.Now()
		p := e.mustParse(t, "net=ALLOW|tcp|slow.test|443|OUT\n")
		if d := time.Since(start); d < 600*time.Millisecond {
			t.Errorf("gave up after %v, want at least the 0.2 s + 0.4 s of retries", d)
		}
		if len(p.Warnings()) != 1 {
			t.Errorf("warnings: %q", warnings(p))
		}
	})
	t.Run("canceled while waiting", func(t *testing.T) {
		e := newNetEnv(t, "", map[string][]string{"slow.test": {"192.0.2.9"}})
		e.dns.failNext("slow.test", 1<<30)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		_, err := e.parse(ctx, "net=ALLOW|tcp|slow.test|443|OUT\n")
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("returned after %v; the cancellation was not honoured", d)
		}
	})
}

func TestParseHosts(t *testing.T) {
	got, err := parseHosts(strings.NewReader(testHosts + "10.9.9.9 last.test")) // no final newline
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]netip.Addr{
		"localhost":          addrs("127.0.0.1", "::1"),
		"ip6-localhost":      addrs("::1"),
		"ip6-loopback":       addrs("::1"),
		"multi.example.test": addrs("10.1.1.1", "10.1.1.2"),
		"alias.test":         addrs("10.1.1.1"),
		"mapped.test":        addrs("10.1.1.3"),
		"zoned.test":         addrs("fe80::1"),
		"v6only.test":        addrs("2001:db8::5"),
		"last.test":          addrs("10.9.9.9"),
	}
	if diff := cmp.Diff(want, got, addrCmp); diff != "" {
		t.Errorf("parseHosts (-want +got):\n%s", diff)
	}
}

func TestValidHostName(t *testing.T) {
	long := strings.Repeat("a", 63)
	tests := []struct {
		name string
		ok   bool
	}{
		{"localhost", true},
		{"api.example.com", true},
		{"API.Example.COM.", true},
		{"xn--bcher-kva.example", true},
		{"a-b.c-d", true},
		{"1host.example", true},
		{"host.123a", true},
		{long + ".example", true},
		{strings.Repeat(long+".", 3) + strings.Repeat("a", 61), true},  // 253
		{strings.Repeat(long+".", 3) + strings.Repeat("a", 62), false}, // 254
		{long + "a.example", false},
		{"", false},
		{".", false},
		{"a..b", false},
		{".a", false},
		{"-a.example", false},
		{"a-.example", false},
		{"exa_mple.com", false},
		{"host name", false},
		{"héllo.com", false},
		{"1.2.3", false},
		{"host.123", false},
		{"a/b", false},
		{"a:b", false},
		{"*.example.com", false},
	}
	for _, tt := range tests {
		if got := validHostName(tt.name); got != tt.ok {
			t.Errorf("validHostName(%q) = %v, want %v", tt.name, got, tt.ok)
		}
	}
}

// checkErr asserts that err is a ConfigErrors rendering as want.
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	var ce ConfigErrors
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v (%T), want ConfigErrors", err, err)
	}
	if got := ce.Error(); got != want {
		t.Errorf("error:\n got: %s\nwant: %s", got, want)
	}
}
