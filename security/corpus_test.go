package security_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/proctest"
	"github.com/pysandboxes/pysandboxes/security"
)

func TestMain(m *testing.M) {
	security.HostMain() // plays the host of the host-death attack when asked to
	os.Exit(run(m))
}

// run runs the tests with a temporary directory of their own (TMPDIR), which
// the library, its providers and the corpus use (os.TempDir): the leak check
// then sees what these tests leave behind, and not the files of other packages'
// tests running at the same time.
func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "pysb-security-test-")
	if err != nil {
		println("security test:", err.Error())
		return 1
	}
	defer os.RemoveAll(dir)
	if err := os.Setenv("TMPDIR", dir); err != nil {
		println("security test:", err.Error())
		return 1
	}
	return m.Run()
}

// TestCorpus runs every attack against every registered provider (but "none"),
// providers at the same time, and logs the verdict table. Afterwards, no
// descriptor, child process or temporary directory of the corpus may be left.
//
// The providers' columns run concurrently whatever -parallel says (t.Run from
// one goroutine per provider, not t.Parallel): an attack mostly waits for
// processes to start and end (firejail's own start and end take a few hundred
// milliseconds), so running the columns one or two at a time would only make
// the corpus slower. The attacks whose timing matters run alone (the fork bomb).
func TestCorpus(t *testing.T) {
	ctx := context.Background()
	fds, temps := openFDs(t), tempEntries()
	var mu sync.Mutex
	var results []security.Result
	t.Run("providers", func(t *testing.T) {
		var wg sync.WaitGroup
		defer wg.Wait()
		for _, p := range pysandboxes.Providers() {
			if p.Name() == "none" {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				t.Run(p.Name(), func(t *testing.T) { runProvider(ctx, t, p, &mu, &results) })
			}()
		}
	})
	order := map[string]int{}
	for i, p := range pysandboxes.Providers() {
		order[p.Name()] = i
	}
	sortResults(results, order)
	t.Logf("verdicts:\n%s", security.Format(results))

	// Leaks: the corpus's own descriptors, processes and directories.
	deadline := time.Now().Add(5 * time.Second)
	for openFDs(t) > fds && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // listeners' goroutines closing
	}
	if n := openFDs(t); n > fds {
		t.Errorf("descriptors left: %d before the corpus, %d after", fds, n)
	}
	if kids := childrenOf(os.Getpid()); len(kids) > 0 {
		t.Errorf("child processes left: %v", kids)
	}
	for _, name := range tempEntries() {
		if !slices.Contains(temps, name) {
			t.Errorf("temporary file left: %s", name)
		}
	}
}

// runProvider runs every attack against one provider, one after another.
func runProvider(ctx context.Context, t *testing.T, p pysandboxes.Provider, mu *sync.Mutex, results *[]security.Result) {
	if err := p.Probe(ctx); err != nil {
		t.Skipf("provider %s is not available here: %v", p.Name(), err)
	}
	for _, a := range security.Attacks() {
		t.Run(a.Name, func(t *testing.T) {
			if why := vmSameAsRoot(p, a); why != "" {
				mu.Lock()
				*results = append(*results, security.Result{Attack: a.Name, Provider: p.Name(), Capability: a.Capability,
					Verdict: security.Skipped, Detail: why})
				mu.Unlock()
				t.Skip(why)
			}
			r := security.RunAttack(ctx, p, a)
			mu.Lock()
			*results = append(*results, r)
			mu.Unlock()
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
}

// hostUIDMatters are the capabilities whose attacks the qemu provider runs
// again as an unprivileged user: those where the host's uid that QEMU runs as
// (the owner of what the shares write, the identity of the VM's process)
// takes part, and the network's (without root, QEMU runs in a user namespace
// of its own, and the network filter around it is set up through its helper).
const hostUIDMatters = pysandboxes.CapIdentity | pysandboxes.CapFilesWrite | pysandboxes.CapNoPrivileges |
	pysandboxes.CapTCPPorts | pysandboxes.CapNetHosts | pysandboxes.CapUDP | pysandboxes.CapUDPDeny

// vmSameAsRoot says why an attack is not run again on the qemu provider in the
// unprivileged run ("" when it is): each attack costs a VM start, and inside
// the guest the program is the same (the guest's uid, no capability) whatever
// the host's uid is; the root run covers it.
func vmSameAsRoot(p pysandboxes.Provider, a *security.Attack) string {
	if os.Getenv(envUnprivileged) == "" || p.Name() != "qemu" || a.Capability&hostUIDMatters != 0 || a.Name == "read-outside" {
		return ""
	}
	return "qemu, unprivileged run: the guest is the same VM whatever the host's uid (the root run covers this attack); " +
		"only the attacks where QEMU's own uid takes part (identity, files-write, no-privileges, read-outside, the network's) run again, " +
		"each run costing a VM start"
}

// tempEntries lists the entries of the temporary directory (the tests' own, see
// run), and those of /tmp that the corpus makes there (write-tmp's).
func tempEntries() []string {
	var out []string
	ents, _ := os.ReadDir(os.TempDir())
	for _, e := range ents {
		out = append(out, filepath.Join(os.TempDir(), e.Name()))
	}
	ents, _ = os.ReadDir("/tmp")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "pysb-security-tmp-") {
			out = append(out, filepath.Join("/tmp", e.Name()))
		}
	}
	return out
}

// sortResults orders results by provider (registration preference), then attack.
func sortResults(rs []security.Result, order map[string]int) {
	attacks := map[string]int{}
	for i, a := range security.Attacks() {
		attacks[a.Name] = i
	}
	slices.SortStableFunc(rs, func(a, b security.Result) int {
		if d := order[a.Provider] - order[b.Provider]; d != 0 {
			return d
		}
		return attacks[a.Attack] - attacks[b.Attack]
	})
}

// TestCorpusWellFormed: attack names are unique, every attack says what it does,
// and every exception names an attack and gives its reason.
func TestCorpusWellFormed(t *testing.T) {
	names := map[string]bool{}
	for _, a := range security.Attacks() {
		if a.Name == "" || a.Summary == "" || names[a.Name] {
			t.Errorf("attack %q: empty or duplicate name, or no summary", a.Name)
		}
		names[a.Name] = true
	}
	for _, x := range security.Exceptions() {
		if !names[x.Attack] || x.Provider == "" || len(x.Reason) < 40 ||
			(x.Allows != security.Blocked && x.Allows != security.GotThrough) {
			t.Errorf("bad exception %+v", x)
		}
	}
}

// openFDs counts the descriptors of the test process.
func openFDs(t *testing.T) int {
	t.Helper()
	n, err := proctest.OpenFDs()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// childrenOf lists the live children of pid.
func childrenOf(pid int) []int { return proctest.Children(pid) }

// envUnprivileged marks the run of the corpus as an unprivileged user.
const envUnprivileged = "PYSB_SECURITY_UNPRIVILEGED"

// TestCorpusUnprivileged runs the whole corpus again as an unprivileged user
// (uid 65534): the identity a program holds, and so what each provider must
// refuse, differ from a root host's. As root, the test binary runs itself again
// as that user (a copy in a directory it can read, with a TMPDIR of its own);
// as another user, TestCorpus already was that run.
func TestCorpusUnprivileged(t *testing.T) {
	if os.Getenv(envUnprivileged) != "" || os.Geteuid() != 0 {
		t.Skip("this is the unprivileged run, or the host is not root: TestCorpus covers it")
	}
	const nobody = 65534
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test's TMPDIR (see run) must let that user through.
	if err := os.Chmod(os.TempDir(), 0o711); err != nil {
		t.Fatal(err)
	}
	// A short path: Unix socket paths hold 108 bytes.
	dir, err := os.MkdirTemp("/tmp", "pysb-u-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "security.test")
	src, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, tmp} {
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestCorpus$", "-test.v", "-test.count=1", "-test.timeout=15m")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + dir, "TMPDIR=" + tmp, envUnprivileged + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	verdicts := string(out)
	if i := strings.Index(verdicts, "verdicts:"); i >= 0 {
		verdicts = verdicts[i:]
	}
	t.Logf("as uid %d:\n%s", nobody, verdicts)
	if err != nil {
		var failed []string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "--- FAIL") || strings.Contains(l, "corpus_test.go") {
				failed = append(failed, l)
			}
		}
		t.Fatalf("the corpus as uid %d failed: %v\n%s", nobody, err, strings.Join(failed, "\n"))
	}
}
