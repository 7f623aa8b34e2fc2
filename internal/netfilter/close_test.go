package netfilter

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCloseLeavesNothing(t *testing.T) {
	testServer(t)
	before, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	f := compileRules(t, "net=ALLOW|tcp|srv.test|8001|OUT", "net=ALLOW|tcp|127.0.0.1|"+strconv.Itoa(port)+"|IN")
	sb := newSandbox(t)
	s, err := f.Setup(context.Background(), sb.ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.tcp(t, addr(2)+":8001"); err != nil {
		t.Fatalf("allowed connection: %v", err)
	}
	pid := s.slirp.cmd.Process.Pid
	dir := s.slirp.api
	if dir == "" {
		t.Fatal("no API socket for the forward")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the API socket %s outlived the set-up: %v", dir, err)
	}
	if !tableIn(t, sb.ns.Net) {
		t.Fatal("no table in the sandbox's namespace")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := unix.Kill(pid, 0); err != unix.ESRCH {
		t.Errorf("slirp4netns (pid %d) still exists after Close: %v", pid, err)
	}
	if p := slirpChildren(); len(p) != 0 {
		t.Errorf("slirp4netns processes left: %v", p)
	}
	// Close released the namespace: no descriptor of this process refers to it.
	var st unix.Stat_t
	if err := unix.Stat(sb.ns.Net, &st); err != nil {
		t.Fatal(err)
	}
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, e := range fds {
		var fst unix.Stat_t
		if unix.Stat("/proc/self/fd/"+e.Name(), &fst) == nil && fst.Dev == st.Dev && fst.Ino == st.Ino {
			t.Errorf("descriptor %s still holds the sandbox's network namespace", e.Name())
		}
	}
	var ifs []string
	sb.in(t, func() {
		out, _ := exec.Command("ip", "-o", "link").Output()
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if f := strings.Fields(l); len(f) > 1 {
				ifs = append(ifs, strings.TrimSuffix(f[1], ":"))
			}
		}
	})
	if len(ifs) != 1 || ifs[0] != "lo" {
		t.Errorf("interfaces after Close: %v, want lo only", ifs)
	}
	if err := sb.tcp(t, addr(2)+":8001"); !errors.Is(err, syscall.ENETUNREACH) {
		t.Errorf("TCP after Close: got %v, want ENETUNREACH (no way out)", err)
	}
	after, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if string(after) != string(before) {
		t.Errorf("ip_forward changed from %q to %q", before, after)
	}
}

func TestNamedNamespace(t *testing.T) {
	srv := testServer(t)
	name, path, cleanup, err := NewNamed(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if !strings.HasPrefix(name, "pysandboxes-") || path != "/run/netns/"+name {
		t.Errorf("NewNamed = %q, %q", name, path)
	}
	f := compileRules(t, "net=ALLOW|tcp|srv.test|8001|OUT")
	s, err := f.Setup(context.Background(), Namespace{Net: path})
	if err != nil {
		t.Fatal(err)
	}
	sb := &sandbox{ns: Namespace{Net: path}}
	if err := sb.tcp(t, addr(2)+":8001"); err != nil {
		t.Errorf("allowed connection: %v", err)
	}
	wantRefused(t, sb, srv, addr(2)+":8002")
	// `ip netns exec` (what firejail --netns does: setns by name) sees the filter.
	out, err := exec.Command("ip", "netns", "exec", name, "nft", "list", "table", "inet", tableName).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "policy drop") {
		t.Errorf("ip netns exec %s nft list table: %v\n%s", name, err, out)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if tableIn(t, path) {
		t.Errorf("the table is still in the named namespace after Close")
	}
	if err := cleanup(); err != nil {
		t.Fatal(err)
	}
	if err := cleanup(); err != nil {
		t.Fatalf("second cleanup: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s still exists after cleanup: %v", path, err)
	}
}

func TestSetupRefusesTheHostNamespace(t *testing.T) {
	needRoot(t)
	f := compileRules(t, "net=ALLOW|tcp|srv.test|8001|OUT")
	for _, ns := range []Namespace{{Net: "/proc/self/ns/net"}, {PID: os.Getpid()}} {
		if s, err := f.Setup(context.Background(), ns); err == nil || !strings.Contains(err.Error(), "the host's own network namespace") {
			if s != nil {
				s.Close()
			}
			t.Errorf("Setup(%+v) = %v, want a refusal", ns, err)
		}
	}
	if tableIn(t, "/proc/thread-self/ns/net") {
		t.Fatal("Setup installed its table in the host's namespace")
	}
	if _, err := f.Setup(context.Background(), Namespace{Net: "/proc/self/ns/user"}); err == nil || !strings.Contains(err.Error(), "not a network namespace") {
		t.Errorf("Setup on a user namespace = %v, want a refusal", err)
	}
	if _, err := f.Setup(context.Background(), Namespace{}); err == nil {
		t.Error("Setup without a namespace succeeded")
	}
}

func TestSetupRefusesANamespaceWithInterfaces(t *testing.T) {
	needRoot(t)
	sb := newSandbox(t)
	sb.in(t, func() {
		if out, err := exec.Command("ip", "link", "add", "pysbdummy", "type", "veth", "peer", "name", "pysbdummy2").CombinedOutput(); err != nil {
			t.Fatalf("ip link add: %v: %s", err, out)
		}
	})
	for _, rules := range [][]string{nil, {"net=ALLOW|tcp|*|443|OUT"}} {
		f := compileRules(t, rules...)
		s, err := f.Setup(context.Background(), sb.ns)
		if err == nil {
			s.Close()
			t.Fatalf("Setup(%q) accepted a namespace with other interfaces", rules)
		}
		if !strings.Contains(err.Error(), "already has the interface pysbdummy") {
			t.Errorf("Setup(%q) = %v", rules, err)
		}
	}
	if tableIn(t, sb.ns.Net) {
		t.Error("a refused Setup left its table")
	}
}

func TestSetupCanceled(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := compileRules(t, "net=ALLOW|tcp|*|443|OUT")
	if _, err := f.Setup(ctx, newSandbox(t).ns); err != context.Canceled {
		t.Errorf("Setup with a canceled context = %v", err)
	}
}

func TestSetupConcurrent(t *testing.T) {
	srv := testServer(t)
	f := compileRules(t, "net=ALLOW|tcp|srv.test|8001|OUT")
	const n = 4
	sbs := make([]*sandbox, n)
	for i := range sbs {
		sbs[i] = newSandbox(t)
	}
	var wg sync.WaitGroup
	sessions := make([]*Session, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sessions[i], errs[i] = f.Setup(context.Background(), sbs[i].ns)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Setup %d: %v", i, errs[i])
		}
		defer sessions[i].Close()
		if err := sbs[i].tcp(t, addr(2)+":8001"); err != nil {
			t.Errorf("sandbox %d: %v", i, err)
		}
		wantRefused(t, sbs[i], srv, addr(2)+":8002")
	}
}
