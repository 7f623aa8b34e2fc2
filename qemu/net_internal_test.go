package qemu

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/policy"
	"github.com/pysandboxes/pysandboxes/qemu/internal/wire"
)

func netPolicy(t *testing.T, lines ...string) *policy.Network {
	t.Helper()
	p, err := policy.Parse(context.Background(), "p", []byte(strings.Join(lines, "\n")+"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return p.Network()
}

func filterWorks() error { return nil }

// TestPlanNetwork: what the VM's network is for some rule sets: no device
// unless traffic leaves, the relays of the host's loopback ports (DENY rules'
// ports taken out, port 0 never), the filter's files.
func TestPlanNetwork(t *testing.T) {
	for _, lines := range [][]string{
		nil,
		{"net=DENY|tcp|*|*|OUT"},
		{"net=ALLOW|tcp|*|8000-8010|IN"},
	} {
		np, err := planNetwork(netPolicy(t, lines...), filterWorks)
		if err != nil || np != nil {
			t.Errorf("%q: %v, %v: want no network device", lines, np, err)
		}
	}
	np, err := planNetwork(netPolicy(t,
		"net=ALLOW|tcp|*|8000-8003|OUT",
		"net=DENY|tcp|127.0.0.1|8001|OUT",
		"net=ALLOW|udp|localhost|53|OUT",
		"net=ALLOW|tcp|192.0.2.1|443|OUT",
		"net=ALLOW|tcp|127.0.0.1|9000|IN",
		"net=ALLOW|udp|0.0.0.0|9001|IN"), filterWorks)
	if err != nil || np == nil {
		t.Fatalf("%v, %v", np, err)
	}
	want := []wire.Relay{
		{Proto: "tcp", From: "127.0.0.1:8000", To: "10.0.3.2:8000"},
		{Proto: "tcp", From: "127.0.0.1:8002", To: "10.0.3.2:8002"},
		{Proto: "tcp", From: "127.0.0.1:8003", To: "10.0.3.2:8003"},
		{Proto: "udp", From: "127.0.0.1:53", To: "10.0.3.2:53"},
		{Proto: "tcp", From: "10.0.3.15:61000", To: "127.0.0.1:9000"},
		{Proto: "udp", From: "10.0.3.15:61001", To: "127.0.0.1:9001"},
	}
	if len(np.relays) != len(want) {
		t.Fatalf("relays %v, want %v", np.relays, want)
	}
	for i := range want {
		if np.relays[i] != want[i] {
			t.Errorf("relay %d: %v, want %v", i, np.relays[i], want[i])
		}
	}
	var paths []string
	for _, f := range np.files {
		paths = append(paths, f.Path)
	}
	if strings.Join(paths, " ") != "/etc/hosts /etc/resolv.conf" {
		t.Errorf("files %v", paths)
	}
	if m := np.msg(); m.Addr != guestAddr || m.Gateway != guestGateway || m.Prefix != 24 || len(m.Relays) != len(want) {
		t.Errorf("the guest's configuration: %+v", m)
	}
	if got := strings.Join(np.hostfwds, " "); got != "tcp:127.0.0.1:9000-10.0.3.15:61000 udp:127.0.0.1:9001-10.0.3.15:61001" {
		t.Errorf("QEMU's host forwards: %s", got)
	}
	// Where the filter cannot work, every ALLOW rule is refused, named.
	_, err = planNetwork(netPolicy(t, "net=ALLOW|tcp|192.0.2.1|443|OUT"), func() error { return errors.New("no slirp4netns") })
	if err == nil || !strings.Contains(err.Error(), "p(1)") || !strings.Contains(err.Error(), "no slirp4netns") {
		t.Errorf("without the filter: %v", err)
	}
}

// TestPlanNetworkRefused: the rules the VM cannot enforce exactly are
// refused, each named with its file(line).
func TestPlanNetworkRefused(t *testing.T) {
	for _, c := range []struct{ rule, why string }{
		{"net=ALLOW|tcp|127.0.0.1|1-300|IN", "at most 256 can be"},
		{"net=ALLOW|tcp|10.0.3.0/24|80|OUT", "the guest's own network"},
		{"net=ALLOW|tcp|10.0.3.2|80|OUT", "the guest's own network"},
		{"net=ALLOW|tcp|10.0.2.3|53|OUT", "egress network"},
		{"net=ALLOW|tcp|localhost|1-300|OUT", "at most 256 can be"},
		{"net=ALLOW|tcp|*|*|OUT", "at most 256 can be"},
		{"net=ALLOW|tcp|127.0.0.53|53|OUT", "own loopback"},
	} {
		_, err := planNetwork(netPolicy(t, "env=A=b", c.rule), filterWorks)
		if err == nil {
			t.Errorf("%s: accepted", c.rule)
			continue
		}
		if !strings.Contains(err.Error(), "p(2)") || !strings.Contains(err.Error(), c.rule[len("net="):]) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: %v; want it named, with %q", c.rule, err, c.why)
		}
	}
}
