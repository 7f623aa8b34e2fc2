package pylayer

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pysandboxes/pysandboxes/policy"
)

// The names of the host-name cases, as the interpreter's resolver sees them (a
// hosts file bound over /etc/hosts in a mount namespace of the child's own, and
// a resolv.conf naming a loopback address where no server listens: a name the
// hosts file lacks fails at once, and no query leaves the machine).
// pinned.test is 127.0.0.8 for the resolver but 127.0.0.7 for the policy's load
// (namesLoadHosts): the connection must go where the pin says. dual.test has
// an IPv6 and an IPv4 address, as most names do.
const namesRunHosts = `127.0.0.1 localhost
::1 localhost ip6-localhost
127.0.0.7 svc.test
127.0.0.8 pinned.test
127.0.0.9 other.test
127.0.0.10 twin.test
127.0.0.7 twin.test
::1 v6.test
::1 dual.test
127.0.0.7 dual.test
`

const namesLoadHosts = `127.0.0.1 localhost
127.0.0.7 pinned.test
`

// namesEnv starts the child in a mount namespace of its own, where
// /etc/hosts and /etc/resolv.conf are the test's; it skips when that cannot be
// done here. It also serves HTTP on 127.0.0.7 (svc.test) and answers UDP
// there, on one port it returns. The resolver of resolv.conf, 127.0.0.153:53,
// is the test's too when that address is free: it refuses every query, and
// queries returns the names asked so far (nil when the test could not listen
// there: then nothing answers, and a query fails at once).
func namesEnv(t *testing.T, dir string) (wrap []string, port int, queries func() []string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the host-name cases bind a hosts file over /etc/hosts in a mount namespace: they need root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skipf("the host-name cases need util-linux's unshare: %v", err)
	}
	if out, err := exec.Command(unshare, "-m", "--propagation", "private", "true").CombinedOutput(); err != nil {
		t.Skipf("no mount namespace here (%v: %s)", err, out)
	}
	hosts := filepath.Join(dir, "hosts.run")
	resolv := filepath.Join(dir, "resolv.conf")
	mustWrite(t, hosts, namesRunHosts, 0o644)
	mustWrite(t, resolv, "nameserver 127.0.0.153\noptions timeout:1 attempts:1\n", 0o644)
	wrap = []string{unshare, "-m", "--propagation", "private", "/bin/sh", "-c",
		`mount --bind "$1" /etc/hosts && mount --bind "$2" /etc/resolv.conf && shift 2 && exec "$@"`, "sh", hosts, resolv}

	l, err := net.Listen("tcp", "127.0.0.7:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.7: %v", err)
	}
	port = l.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "pong") })}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.7:%d", port))
	if err != nil {
		t.Skipf("cannot listen on udp 127.0.0.7:%d: %v", port, err)
	}
	t.Cleanup(func() { u.Close() })
	queries = func() []string { return nil }
	if dns, err := net.ListenPacket("udp", "127.0.0.153:53"); err != nil {
		t.Logf("no resolver of the test (%v): queries are not seen", err)
	} else {
		t.Cleanup(func() { dns.Close() })
		var mu sync.Mutex
		var names []string
		go func() {
			b := make([]byte, 512)
			for {
				n, from, err := dns.ReadFrom(b)
				if err != nil {
					return
				}
				if n < 12 {
					continue
				}
				mu.Lock()
				names = append(names, queryName(b[12:n]))
				mu.Unlock()
				// REFUSED, the question echoed: the client gives up at once.
				r := append([]byte{}, b[:n]...)
				r[2], r[3] = 0x81, 0x85
				dns.WriteTo(r, from)
			}
		}()
		queries = func() []string {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(names)
		}
	}
	return wrap, port, queries
}

// queryName reads the name of a DNS question (labels until a zero length).
func queryName(q []byte) string {
	var parts []string
	for len(q) > 0 && q[0] != 0 && int(q[0]) < len(q) {
		parts = append(parts, string(q[1:1+q[0]]))
		q = q[1+q[0]:]
	}
	return strings.Join(parts, ".")
}

// namesPolicy loads rules with pinned.test resolved by namesLoadHosts.
func namesPolicy(t *testing.T, dir, rules string) *policy.Policy {
	t.Helper()
	hosts := filepath.Join(dir, "hosts.load")
	mustWrite(t, hosts, namesLoadHosts, 0o644)
	file := filepath.Join(dir, ".py-sandboxes")
	mustWrite(t, file, rules, 0o644)
	pol, err := policy.Load(context.Background(), file, &policy.Options{Dir: dir, Env: []string{}, HostsFile: hosts})
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

const namesPrelude = `import socket, _socket, ssl, asyncio, http.client, urllib.request
P = %d
def peer(s):
    try:
        return s.getpeername()[0]
    finally:
        s.close()
def aio(host, port):
    async def main():
        r, w = await asyncio.open_connection(host, port)
        p = w.get_extra_info('peername')[0]
        w.close()
        return p
    return asyncio.run(main())
def aio_sock(host, port):
    async def main():
        s = socket.socket()
        s.setblocking(False)
        await asyncio.get_running_loop().sock_connect(s, (host, port))
        return peer(s)
    return asyncio.run(main())
def aio_udp(host, port):
    async def main():
        t, _ = await asyncio.get_running_loop().create_datagram_endpoint(asyncio.DatagramProtocol, remote_addr=(host, port))
        p = t.get_extra_info('peername')[0]
        t.close()
        return p
    return asyncio.run(main())
def tls(host, port):
    s = ssl.create_default_context().wrap_socket(socket.socket(), server_hostname=host, do_handshake_on_connect=False)
    s.connect((host, port))
    return peer(s)
def udp(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        return s.sendto(b'x', (host, port))
    finally:
        s.close()
`

// TestGuardNetNamesAnyAddress: under rules that take every address on a port
// (net=ALLOW|tcp|*|P|OUT, the same for UDP), a host name the policy does not
// pin reaches that port through every door (the socket's connect and
// connect_ex, the C socket itself, create_connection, asyncio, http.client,
// urllib, an ssl-wrapped socket, UDP sendto, getaddrinfo, gethostbyname), as
// the OS providers let any address through there; on another port, or
// binding, it is refused before any query by the implicit default policy,
// with the rule line that would allow it.
func TestGuardNetNamesAnyAddress(t *testing.T) {
	eachPython(t, func(t *testing.T, in *Interpreter) {
		dir := t.TempDir()
		wrap, port, queries := namesEnv(t, dir)
		rules := fmt.Sprintf("python-import=*\npython-api=ALLOW:threads\nnet=ALLOW|tcp|*|%d|OUT\nnet=ALLOW|udp|*|%d|OUT\n", port, port)
		pol := namesPolicy(t, dir, rules)
		const refused = "RuleSocketConnectionRefusedError"
		implicit := func(name, code, target, fix string) pyCase {
			return pyCase{name: name, code: code, exc: refused,
				msg: []string{"[Errno 111] Guard network " + target + " DENIED by implicit default policy."}, fix: "Add `" + fix + "`."}
		}
		cases := []pyCase{
			{name: "connect", code: "s = socket.socket()\ns.connect(('svc.test', P))\nreturn peer(s)", value: "'127.0.0.7'"},
			{name: "connect_ex", code: "s = socket.socket()\nr = s.connect_ex(('svc.test', P))\nreturn r, peer(s)", value: "(0, '127.0.0.7')"},
			{name: "the C socket itself", code: "s = _socket.socket()\ns.connect(('svc.test', P))\nreturn peer(s)", value: "'127.0.0.7'"},
			{name: "create_connection", code: "return peer(socket.create_connection(('svc.test', P)))", value: "'127.0.0.7'"},
			{name: "asyncio", code: "return aio('svc.test', P)", value: "'127.0.0.7'"},
			{name: "http.client", code: "c = http.client.HTTPConnection('svc.test', P)\nc.request('GET', '/')\nreturn c.getresponse().read()", value: "b'pong'"},
			{name: "urllib", code: "return urllib.request.urlopen('http://svc.test:%d/' % P).read()", value: "b'pong'"},
			{name: "ssl-wrapped socket", code: "return tls('svc.test', P)", value: "'127.0.0.7'"},
			{name: "UDP sendto", code: "return udp('svc.test', P)", value: "1"},
			{name: "create_connection to a name with IPv6 and IPv4 addresses", code: "return peer(socket.create_connection(('dual.test', P)))", value: "'127.0.0.7'"},
			{name: "getaddrinfo", code: "return sorted({a[4][0] for a in socket.getaddrinfo('twin.test', P, type=socket.SOCK_STREAM)})",
				value: "['127.0.0.10', '127.0.0.7']"},
			{name: "gethostbyname", code: "return socket.gethostbyname('svc.test')", value: "'127.0.0.7'"},
			{name: "getaddrinfo without a port", code: "return sorted({a[4][0] for a in socket.getaddrinfo('svc.test', 0, type=socket.SOCK_STREAM)})",
				value: "['127.0.0.7']"},
			implicit("connect to another port", "socket.socket().connect(('svc.test', 1))", "connection to '[svc.test]:1'", fmt.Sprintf("net=ALLOW|tcp|svc.test|%d|OUT", 1)),
			implicit("connect_ex to another port", "socket.socket().connect_ex(('svc.test', 1))", "connection to '[svc.test]:1'", "net=ALLOW|tcp|svc.test|1|OUT"),
			implicit("create_connection to another port", "socket.create_connection(('svc.test', 1))", "connection to '[svc.test]:1'", "net=ALLOW|tcp|svc.test|1|OUT"),
			implicit("UDP to another port", "udp('svc.test', 1)", "connection to '[svc.test]:1'", "net=ALLOW|udp|svc.test|1|OUT"),
			implicit("the C socket to another port", "_socket.socket().connect(('svc.test', 1))", "connection to '[svc.test]:1'", "net=ALLOW|tcp|svc.test|1|OUT"),
			implicit("bind to a name", "socket.socket().bind(('svc.test', P))", fmt.Sprintf("bind to '[svc.test]:%d'", port), fmt.Sprintf("net=ALLOW|tcp|svc.test|%d|IN", port)),
			implicit("asyncio to another port", "aio('svc.test', 1)", "connection to '[svc.test]:1'", "net=ALLOW|tcp|svc.test|1|OUT"),
			// A name the hosts file lacks goes to the resolver, which refuses it.
			{name: "a name the resolver refuses", code: "socket.create_connection(('asked.test', P))", exc: "gaierror"},
		}
		runCasesIn(t, in, dir, pol, wrap, fmt.Sprintf(namesPrelude, port), cases)
		if q := queries(); q != nil && !slices.Contains(q, "asked.test") {
			t.Errorf("the resolver of the test was not asked for asked.test: %q", q)
		}
	})
}

// TestGuardNetNamesSomeAddresses: under rules that take only some addresses on
// a port (a network with a DENY rule inside it, a pinned name), a host name is
// allowed only when every address it resolves to is, and the socket is given
// the address checked: a name with one refused address is refused through
// every door, naming the DENY rule and the address; a pinned name goes to its
// pinned address, whatever the resolver says now; an IPv6 answer no rule
// allows falls to the implicit default policy; a name given to the C socket
// itself cannot be judged there and is refused, naming the rule that makes
// addresses differ; a bind to a name is judged as an IN rule.
func TestGuardNetNamesSomeAddresses(t *testing.T) {
	eachPython(t, func(t *testing.T, in *Interpreter) {
		dir := t.TempDir()
		wrap, port, _ := namesEnv(t, dir)
		deny := fmt.Sprintf("net=DENY|*|127.0.0.10|%d|OUT", port)
		rules := fmt.Sprintf("net=ALLOW|*|127.0.0.0/8|%d|OUT\n%s\nnet=ALLOW|tcp|pinned.test|%d|OUT\nnet=ALLOW|tcp|127.0.0.0/8|0|IN\npython-import=*\npython-api=ALLOW:threads\n",
			port, deny, port)
		pol := namesPolicy(t, dir, rules)
		const refused = "RuleSocketConnectionRefusedError"
		twin := fmt.Sprintf("[Errno 111] Connection to [twin.test]:%d DENIED by explicit rule '%s' from .py-sandboxes(2) ('twin.test' resolves to 127.0.0.10)", port, deny)
		denied := func(name, code string) pyCase {
			return pyCase{name: name, code: code, exc: refused, msg: []string{twin}, rule: deny, ref: ".py-sandboxes(2)"}
		}
		cases := []pyCase{
			{name: "connect to a name whose every address is allowed", code: "s = socket.socket()\ns.connect(('svc.test', P))\nreturn peer(s)", value: "'127.0.0.7'"},
			{name: "create_connection", code: "return peer(socket.create_connection(('svc.test', P)))", value: "'127.0.0.7'"},
			{name: "asyncio", code: "return aio('svc.test', P)", value: "'127.0.0.7'"},
			{name: "urllib", code: "return urllib.request.urlopen('http://svc.test:%d/' % P).read()", value: "b'pong'"},
			{name: "UDP sendto", code: "return udp('svc.test', P)", value: "1"},
			{name: "asyncio's sock_connect", code: "return aio_sock('svc.test', P)", value: "'127.0.0.7'"},
			{name: "an asyncio datagram endpoint", code: "return aio_udp('svc.test', P)", value: "'127.0.0.7'"},
			// The IPv6 answer no rule allows is refused at its connect, and
			// create_connection goes on to the IPv4 one, as through the OS
			// layer (where IPv6 has no route).
			{name: "create_connection to a name with an IPv6 answer no rule allows", code: "return peer(socket.create_connection(('dual.test', P)))", value: "'127.0.0.7'"},
			{name: "urllib to that name", code: "return urllib.request.urlopen('http://dual.test:%d/' % P).read()", value: "b'pong'"},
			{name: "a pinned name goes to its pinned address", code: "s = socket.socket()\ns.connect(('pinned.test', P))\nreturn peer(s)", value: "'127.0.0.7'"},
			{name: "create_connection to a pinned name", code: "return peer(socket.create_connection(('pinned.test', P)))", value: "'127.0.0.7'"},
			{name: "bind to a name", code: "s = socket.socket()\ns.bind(('svc.test', 0))\nr = s.getsockname()[0]\ns.close()\nreturn r", value: "'127.0.0.7'"},
			{name: "getaddrinfo without a protocol judges nothing", code: "return sorted({a[4][0] for a in socket.getaddrinfo('twin.test', P)})",
				value: "['127.0.0.10', '127.0.0.7']"},
			denied("connect", "socket.socket().connect(('twin.test', P))"),
			denied("connect_ex", "socket.socket().connect_ex(('twin.test', P))"),
			denied("UDP sendmsg", "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.sendmsg([b'x'], [], 0, ('twin.test', P))"),
			denied("create_connection", "socket.create_connection(('twin.test', P))"),
			denied("getaddrinfo for TCP", "socket.getaddrinfo('twin.test', P, type=socket.SOCK_STREAM)"),
			denied("asyncio", "aio('twin.test', P)"),
			denied("asyncio's sock_connect", "aio_sock('twin.test', P)"),
			denied("http.client", "http.client.HTTPConnection('twin.test', P).connect()"),
			denied("ssl-wrapped socket", "tls('twin.test', P)"),
			{name: "UDP sendto", code: "udp('twin.test', P)", exc: refused, rule: deny, ref: ".py-sandboxes(2)",
				msg: []string{fmt.Sprintf("Connection to [twin.test]:%d DENIED by explicit rule '%s'", port, deny)}},
			{name: "urllib", code: "urllib.request.urlopen('http://twin.test:%d/' % P)", exc: "URLError",
				msg: []string{twin}},
			{name: "an IPv6 answer no rule allows", code: "socket.socket(socket.AF_INET6).connect(('v6.test', P))", exc: refused,
				msg: []string{fmt.Sprintf("[Errno 111] Guard network connection to '[v6.test]:%d' DENIED by implicit default policy ('v6.test' resolves to ::1).", port)},
				fix: fmt.Sprintf("Add `net=ALLOW|tcp|v6.test|%d|OUT`.", port)},
			{name: "the C socket given a name", code: "_socket.socket().connect(('svc.test', P))", exc: refused, rule: deny, ref: ".py-sandboxes(2)",
				msg: []string{fmt.Sprintf("[Errno 111] Guard network connection to '[svc.test]:%d' DENIED: the socket resolves the host name itself, after any check, "+
					"so the address it picks cannot be judged; rule '%s' from .py-sandboxes(2) refuses some addresses there.", port, deny)}},
			{name: "the C socket given a pinned name", code: "_socket.socket().connect(('pinned.test', P))", exc: refused, rule: deny, ref: ".py-sandboxes(2)",
				msg: []string{"DENIED: the socket resolves the host name itself"}},
			// What the C socket accepts besides a tuple of str and int: a tuple
			// subclass, bytes and bytearray hosts, int subclasses and __index__
			// ports, any buffer as a Unix socket's path.
			{name: "a tuple subclass", code: "class T(tuple):\n    def __getitem__(self, i): return ('127.0.0.7', P)[i]\n" +
				"socket.socket().connect(T(('127.0.0.2', 2)))", exc: refused,
				msg: []string{"[Errno 111] Guard network connection to '[127.0.0.2]:2' DENIED by implicit default policy."}},
			{name: "a bytes address", code: "socket.socket().connect((b'127.0.0.2', 2))", exc: refused,
				msg: []string{"[Errno 111] Guard network connection to '[127.0.0.2]:2' DENIED by implicit default policy."}},
			{name: "a bytearray address", code: "socket.socket().connect((bytearray(b'127.0.0.7'), P))", exc: refused,
				msg: []string{"[Errno 111] Guard network connection to a host given as a bytearray DENIED by implicit default policy: give it as str or bytes."}},
			{name: "a Unix socket path as a bytearray", code: "socket.socket(socket.AF_UNIX).connect(bytearray(b'/tmp/x.sock'))", exc: refused,
				msg: []string{"[Errno 111] Guard network connection to a Unix socket whose path is not str or bytes DENIED by implicit default policy"}},
			{name: "a Unix socket path as a memoryview", code: "socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b'x', memoryview(b'/tmp/x.sock'))", exc: refused,
				msg: []string{"[Errno 111] Guard network connection to a Unix socket whose path is not str or bytes DENIED by implicit default policy"}},
			{name: "a port of an int subclass", code: "class I(int):\n    def __index__(self): return P\n    def __int__(self): return P\n" +
				"socket.socket().connect(('127.0.0.10', I(2)))", exc: refused,
				msg: []string{"[Errno 111] Guard network connection to '[127.0.0.10]:2' DENIED by implicit default policy."}},
			{name: "a port given by __index__", code: "class I:\n    def __index__(self): return P\n" +
				"socket.socket().connect(('127.0.0.7', I()))", exc: refused,
				msg: []string{"[Errno 111] Guard network connection to '[127.0.0.7]' DENIED by implicit default policy: its port is not an int."}},
			{name: "a bool port", code: "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.7', True))", exc: refused,
				msg: []string{"[Errno 111] Guard network connection to '[127.0.0.7]:1' DENIED by implicit default policy."}},
			{name: "a name on a port no rule opens", code: "socket.create_connection(('other.test', 2))", exc: refused,
				msg: []string{"[Errno 111] Guard network connection to '[other.test]:2' DENIED by implicit default policy."},
				fix: "Add `net=ALLOW|tcp|other.test|2|OUT`."},
		}
		runCasesIn(t, in, dir, pol, wrap, fmt.Sprintf(namesPrelude, port), cases)
	})
}

// TestGuardNetNamesNoQueryLeaves: under rules that name hosts and single
// addresses only, a name no rule can allow is refused, by the implicit default
// policy with the rule line that would allow it, before any query leaves,
// through every resolving door (getaddrinfo, of the C module too,
// gethostbyname, gethostbyname_ex, gethostbyaddr given a name,
// create_connection, the socket's connect): the test's resolver sees no query.
// A rule naming one address allows that address, not the names that lead
// there; a pinned name is answered with its pinned address, whatever the
// resolver says now.
func TestGuardNetNamesNoQueryLeaves(t *testing.T) {
	eachPython(t, func(t *testing.T, in *Interpreter) {
		dir := t.TempDir()
		wrap, port, queries := namesEnv(t, dir)
		pol := namesPolicy(t, dir, fmt.Sprintf("net=ALLOW|tcp|pinned.test|%d|OUT\nnet=ALLOW|tcp|127.0.0.7|%d|OUT\npython-import=*\n", port, port))
		const refused = "RuleSocketConnectionRefusedError"
		implicit := func(name, code, host, port, fix string) pyCase {
			return pyCase{name: name, code: code, exc: refused,
				msg: []string{"[Errno 111] Guard network connection to '[" + host + "]:" + port + "' DENIED by implicit default policy."},
				fix: "Add `" + fix + "`."}
		}
		p := fmt.Sprint(port)
		cases := []pyCase{
			implicit("getaddrinfo", "socket.getaddrinfo('leak1.test', P)", "leak1.test", p, "net=ALLOW|tcp|leak1.test|"+p+"|OUT"),
			implicit("getaddrinfo for UDP", "socket.getaddrinfo('leak2.test', P, type=socket.SOCK_DGRAM)", "leak2.test", p, "net=ALLOW|udp|leak2.test|"+p+"|OUT"),
			implicit("the C module's getaddrinfo", "_socket.getaddrinfo('leak3.test', P)", "leak3.test", p, "net=ALLOW|tcp|leak3.test|"+p+"|OUT"),
			implicit("gethostbyname", "socket.gethostbyname('leak4.test')", "leak4.test", "0", "net=ALLOW|tcp|leak4.test|*|OUT"),
			implicit("gethostbyname_ex", "socket.gethostbyname_ex('leak5.test')", "leak5.test", "0", "net=ALLOW|tcp|leak5.test|*|OUT"),
			implicit("gethostbyaddr given a name", "socket.gethostbyaddr('leak6.test')", "leak6.test", "0", "net=ALLOW|tcp|leak6.test|*|OUT"),
			implicit("create_connection", "socket.create_connection(('leak7.test', P))", "leak7.test", p, "net=ALLOW|tcp|leak7.test|"+p+"|OUT"),
			implicit("connect", "socket.socket().connect(('leak8.test', P))", "leak8.test", p, "net=ALLOW|tcp|leak8.test|"+p+"|OUT"),
			implicit("a name for an address a rule names", "socket.create_connection(('svc.test', P))", "svc.test", p, "net=ALLOW|tcp|svc.test|"+p+"|OUT"),
			{name: "that address", code: "return peer(socket.create_connection(('127.0.0.7', P)))", value: "'127.0.0.7'"},
			{name: "a pinned name", code: "return sorted({a[4][0] for a in socket.getaddrinfo('pinned.test', P)})", value: "['127.0.0.7']"},
			{name: "gethostbyname of a pinned name", code: "return socket.gethostbyname('pinned.test')", value: "'127.0.0.7'"},
			{name: "connect to a pinned name", code: "return peer(socket.create_connection(('pinned.test', P)))", value: "'127.0.0.7'"},
		}
		runCasesIn(t, in, dir, pol, wrap, fmt.Sprintf(namesPrelude, port), cases)
		for _, q := range queries() {
			if strings.HasPrefix(q, "leak") || q == "svc.test" {
				t.Errorf("a query for %s left", q)
			}
		}
	})
}

// TestGuardNetNamesPsycopg2: libpq resolves a host name itself, after the
// guard's check: a name is let through where every address is allowed (the
// OS layer judges the one libpq picks), and refused elsewhere, naming the rule
// that makes addresses differ, or the implicit default policy with the rule
// line that pins it.
func TestGuardNetNamesPsycopg2(t *testing.T) {
	eachPython(t, func(t *testing.T, in *Interpreter) {
		if err := exec.Command(in.Path, "-I", "-c", "import psycopg2").Run(); err != nil {
			t.Skipf("psycopg2 is not installed for %s (Debian's python3-psycopg2 is /usr/bin/python3's): %v", in.Path, err)
		}
		dir := t.TempDir()
		wrap, port, _ := namesEnv(t, dir)
		deny := fmt.Sprintf("net=DENY|tcp|127.0.0.10|%d|OUT", port)
		rules := fmt.Sprintf("python-import=*\nnet=ALLOW|tcp|*|%d|OUT\nnet=ALLOW|tcp|127.0.0.0/8|%d|OUT\n%s\n", port, port+1, deny)
		pol := namesPolicy(t, dir, rules)
		const refused = "RuleSocketConnectionRefusedError"
		prelude := fmt.Sprintf("import psycopg2\nP = %d\n", port)
		runCasesIn(t, in, dir, pol, wrap, prelude, []pyCase{
			// The server speaks HTTP: libpq reached it, and fails by itself.
			{name: "a name on a port where a DENY rule refuses some addresses", code: "psycopg2.connect('host=svc.test port=%d' % P)",
				exc: refused, rule: deny, ref: ".py-sandboxes(4)",
				msg: []string{fmt.Sprintf("DENIED: libpq resolves the host name itself, after any check, so the address it picks cannot be judged; rule '%s' from .py-sandboxes(4) refuses some addresses there.", deny)}},
			{name: "a name on a network rule", code: "psycopg2.connect('host=svc.test port=%d' % (P + 1))", exc: refused,
				rule: fmt.Sprintf("net=ALLOW|tcp|127.0.0.0/8|%d|OUT", port+1), ref: ".py-sandboxes(3)",
				msg: []string{"allows only some addresses there. Pin the name with a rule of its own, or give libpq the address (hostaddr=)."}},
			{name: "a name on a port no rule opens", code: "psycopg2.connect('host=svc.test port=2')", exc: refused,
				msg: []string{"Guard network connection to '[svc.test]:2' DENIED by implicit default policy."}, fix: "Add `net=ALLOW|tcp|svc.test|2|OUT`."},
		})
		// Every address allowed on the port: the name goes on to libpq, which
		// finds nothing listening there. A pinned name is given to libpq with
		// its pinned address (hostaddr=): libpq connects there, not where the
		// resolver says now (127.0.0.8).
		l, err := net.Listen("tcp", "127.0.0.7:0")
		if err != nil {
			t.Fatal(err)
		}
		free := l.Addr().(*net.TCPAddr).Port
		l.Close()
		pol = namesPolicy(t, dir, fmt.Sprintf("python-import=*\nnet=ALLOW|tcp|*|%d|OUT\nnet=ALLOW|tcp|pinned.test|%d|OUT\n", free, free+1))
		r := runCasesIn(t, in, dir, pol, wrap, fmt.Sprintf("import psycopg2\nP = %d\n", free), []pyCase{
			{name: "a name where every address is allowed reaches libpq", code: "psycopg2.connect('host=svc.test port=%d connect_timeout=5' % P)",
				exc: "OperationalError", msg: []string{"(127.0.0.7)"}},
			{name: "a pinned name is connected to its pinned address", code: "psycopg2.connect(host='pinned.test', port=P + 1, connect_timeout=5, application_name=\"o'k\\\\\")",
				exc: "OperationalError", msg: []string{"connection to server at \"127.0.0.7\""}},
		})
		if strings.Contains(r.stdout, refused) {
			t.Errorf("libpq was not reached:\n%s", r)
		}
	})
}

// TestGuardLearnNetNames: in learning mode a connection or a datagram to a
// host name is recorded as the address it went to, with the name's answer,
// through the socket's own methods as through create_connection (before, a
// name given to connect was not recorded at all).
func TestGuardLearnNetNames(t *testing.T) {
	eachPython(t, func(t *testing.T, in *Interpreter) {
		dir := t.TempDir()
		wrap, port, _ := namesEnv(t, dir)
		prog := fmt.Sprintf(`import socket
P = %d
s = socket.socket()
s.connect(('svc.test', P))
s.close()
socket.create_connection(('svc.test', P)).close()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.sendto(b'x', ('svc.test', P))
u.close()
print('done')
`, port)
		r := runGuardIn(t, in, dir, namesPolicy(t, dir, ""), ModeLearn, Target{Kind: "command", Value: prog}, wrap)
		if r.exit != 0 || !strings.Contains(r.stdout, "done") {
			t.Fatalf("learning run:\n%s", r)
		}
		obs := r.res.Observations
		ip := netip.MustParseAddr("127.0.0.7")
		for _, want := range []policy.NetAccess{
			{Proto: policy.TCP, Dir: policy.Out, IP: ip, Port: uint16(port)},
			{Proto: policy.UDP, Dir: policy.Out, IP: ip, Port: uint16(port)},
		} {
			if !slices.Contains(obs.Net, want) {
				t.Errorf("%+v not learned: %+v", want, obs.Net)
			}
		}
		if !slices.ContainsFunc(obs.DNS, func(d policy.DNSAnswer) bool { return d.Name == "svc.test" && slices.Contains(d.Addrs, ip) }) {
			t.Errorf("the answer for svc.test not learned: %+v", obs.DNS)
		}
	})
}
