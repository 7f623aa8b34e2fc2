package unshare_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/proctest"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
	"github.com/pysandboxes/pysandboxes/policy"

	"github.com/pysandboxes/pysandboxes/security"
)

func TestMain(m *testing.M) {
	security.HostMain() // plays the host of the host-death attack when asked to
	if os.Getenv("PYSB_UNSHARE_HOST") != "" {
		os.Exit(playHost())
	}
	dir, err := os.MkdirTemp("", "pysb-unshare-helper")
	if err != nil {
		panic(err)
	}
	os.Chmod(dir, 0o755)
	helperDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// helperDir holds the helper binary the tests build.
var helperDir string

// corpusIssues are the attacks of the corpus whose check does not fit this
// provider yet, with the reason (for the corpus's maintainers).
var corpusIssues = map[string]string{
	"host-death": "the corpus checks the pids the program prints, which are those of the sandbox's pid namespace " +
		"(2, 3, 4: kernel threads on the host); the sandbox's processes themselves do die with the host (TestHostDeath)",
	"udp-denied-port": "the datagram to a port of 127.0.0.1 that no rule sends to the host stays on the sandbox's own " +
		"loopback (sent, received by nobody: the host sees nothing); the corpus wants the send refused",
	"dns-other-resolver": "the query to 127.0.0.53 stays on the sandbox's own loopback (sent, received by nobody: the " +
		"host sees nothing); the corpus wants the send refused",
}

// netfilterAttacks need a net= ALLOW rule, which the provider refuses without the
// network filter.
var netfilterAttacks = []string{"tcp-denied-port", "tcp6-denied-port", "tcp-listen", "tcp-denied-host",
	"mptcp-denied-port", "udp-no-rule", "udp-denied-port", "dns-other-resolver"}

// TestSecurityCorpus runs the cross-provider attack corpus against this provider:
// every attack whose capability it declares must be blocked, the others must get
// through (the corpus's negative controls), unless an exception of the corpus
// says otherwise.
func TestSecurityCorpus(t *testing.T) {
	p := requireUnshare(t)
	ctx := context.Background()
	var results []security.Result
	for _, a := range security.Attacks() {
		t.Run(a.Name, func(t *testing.T) {
			if why, ok := corpusIssues[a.Name]; ok {
				t.Skip(why)
			}
			if seccomp.Available() != nil && (a.Name == "unshare" || a.Name == "dns-exfil" || a.Name == "udp-no-rule") {
				t.Skip("without seccomp: the provider refuses nested user namespaces itself (ENOSPC), and a datagram " +
					"to a loopback address stays in the sandbox's own network namespace (sent, never received by the host): " +
					"the corpus reads both as unclear")
			}
			if slices.Contains(netfilterAttacks, a.Name) && !p.Capabilities().Has(pysandboxes.CapNetHosts) {
				t.Skip("its policy has a net= ALLOW rule, which needs the network filter: not available here")
			}
			r := security.RunAttack(ctx, p, a)
			results = append(results, r)
			switch r.Verdict {
			case security.Failed:
				t.Errorf("%s: %v", a.Name, r.Err)
			case security.Skipped:
				t.Skip(r.Detail)
			default:
				t.Logf("%s (%v): %s", r.Verdict, r.Elapsed.Round(time.Millisecond), r.Detail)
			}
		})
	}
	t.Logf("verdicts:\n%s", security.Format(results))
}

// playHost is the host of TestHostDeath: it starts a tree (a sleeper, a sleeper
// in a session of its own) in a sandbox, prints the host's pids of every process
// of the sandbox, and waits to be killed.
func playHost() int {
	pol, err := policyFromEnv()
	if err != nil {
		println("host:", err.Error())
		return 1
	}
	sb, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider("unshare"), pysandboxes.WithLogger(quietLogger()))
	if err != nil {
		println("host:", err.Error())
		return 1
	}
	cmd := sb.Command(context.Background(), "/bin/sh", "-c", "sleep 1000 & setsid sleep 1000 & echo started; wait")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		println("host:", err.Error())
		return 1
	}
	bufio.NewReader(out).ReadString('\n')
	var pids []string
	for range 100 {
		if ps := inPidNamespaceOf(cmd.Pid()); len(ps) >= 4 {
			for _, p := range ps {
				pids = append(pids, strconv.Itoa(p))
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	os.Stdout.WriteString("pids " + strings.Join(pids, " ") + "\n")
	time.Sleep(time.Hour)
	return 0
}

func policyFromEnv() (*policy.Policy, error) {
	return policy.NewBuilder().ExposeRO("/usr/bin").Build(context.Background(), &policy.Options{Env: []string{"PATH=/usr/bin:/bin"}})
}

// TestHostDeath: every process of the sandbox (the supervisor, the program, a
// sleeper in a session of its own) dies with the host, SIGKILLed without a chance
// to clean up.
func TestHostDeath(t *testing.T) {
	requireUnshare(t)
	host := exec.Command("/proc/self/exe", "-test.run=^$")
	host.Env = append(os.Environ(), "PYSB_UNSHARE_HOST=1")
	host.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, _ := host.StdoutPipe()
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "pids" {
		host.Process.Kill()
		host.Wait()
		t.Fatalf("the host said %q", line)
	}
	var pids []int
	for _, s := range f[1:] {
		p, _ := strconv.Atoi(s)
		pids = append(pids, p)
	}
	host.Process.Kill()
	host.Wait()
	proctest.WaitGone(t, 5*time.Second, pids...)
}
