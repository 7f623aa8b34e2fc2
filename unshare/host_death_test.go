package unshare_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/proctest"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
	"github.com/pysandboxes/pysandboxes/policy"
)

func TestMain(m *testing.M) {
	if os.Getenv("PYSB_UNSHARE_HOST") != "" {
		os.Exit(playHost())
	}
	dir, err := os.MkdirTemp("", "pysb-unshare-helper")
	if err != nil {
		panic(err)
	}
	os.Chmod(dir, 0o755)
	helperDir = dir
	providertest.SkipExamplesUnavailable("unshare")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// helperDir holds the helper binary the tests build.
var helperDir string

// playHost is the host of TestHostDeath: it starts a tree (a sleeper, a sleeper
// in a session of its own) in a sandbox, prints the host's pids of every process
// of the sandbox, and waits to be killed.
func playHost() int {
	pol, err := policyFromEnv()
	if err != nil {
		println("host:", err.Error())
		return 1
	}
	sb, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider("unshare"), pysandboxes.WithLogger(providertest.QuietLogger()))
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
		if ps := providertest.InPidNamespaceOf(cmd.Pid()); len(ps) >= 4 {
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
	providertest.Require(t, "unshare")
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
