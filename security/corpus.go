package security

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/pysandboxes/pysandboxes"
)

// Verdict is the result of one attack against one provider.
type Verdict string

const (
	// Blocked: the provider refused the attack, with the expected refusal, and no
	// secret leaked.
	Blocked Verdict = "blocked"
	// GotThrough: the provider does not declare the attack's capability, and the
	// attack, run as a negative control, got through.
	GotThrough Verdict = "not enforced (got through)"
	// NotRun: the provider does not declare the attack's capability, and the attack
	// is destructive or unbounded without it: not run.
	NotRun Verdict = "not enforced (declared)"
	// Refused: the provider refuses the policy that the attack needs (a net=
	// rule), naming the rule: fail closed, nothing runs. It is honest whatever
	// the provider declares.
	Refused Verdict = "refused (fail closed)"
	// Skipped: the attack cannot be run here (Result.Detail says why).
	Skipped Verdict = "skipped"
	// Failed: the outcome contradicts what the provider declares (a declared
	// capability that did not hold is a bug), or the attack could not be judged.
	Failed Verdict = "FAILED"
)

// Attack is one attack of the corpus.
type Attack struct {
	// Name identifies the attack (a row of the table).
	Name string
	// Capability is what stops it; 0 means every provider's supervisor does (the
	// process tree, the context, the output limit), whatever its capabilities.
	Capability pysandboxes.Capability
	// Summary says what the program tries, in a few words.
	Summary string
	// Destructive attacks harm the host or are unbounded when nothing stops them:
	// they are not run where the capability is not declared.
	Destructive bool
	// Privileged attacks only have teeth when the host runs as root (as an
	// unprivileged user the kernel refuses them anyway): where the capability is
	// not declared, they are skipped unless the host runs as root.
	Privileged bool

	// exclusive attacks run alone (RunAttack holds every other attack back
	// meanwhile): the fork bomb, so that the timings of others do not suffer
	// from it, and an attack whose target is one object of the whole host (a
	// sysctl), so that what one provider's run does to it is never judged
	// against another's.
	exclusive bool
	setup     func(e *env) *plan
}

// Exception allows an outcome that the declared capabilities do not predict, for
// one attack and one provider, with the reason.
type Exception struct {
	// Provider is the provider's name, or "*" for every provider.
	Provider string
	// Attack is the attack's name.
	Attack string
	// Allows is the outcome allowed: Blocked for an attack whose capability the
	// provider does not declare (it blocks more than it claims, for a reason that
	// does not make the capability hold in general), GotThrough for one it
	// declares (the attack does not break what the capability means).
	Allows Verdict
	// Requires, when not 0, limits the exception to providers that declare these
	// capabilities (the reason holds only then).
	Requires pysandboxes.Capability
	// Reason says why, in a sentence or two.
	Reason string
}

// Exceptions are the documented exceptions of the corpus.
func Exceptions() []Exception { return slices.Clone(exceptions) }

var exceptions = []Exception{
	{Provider: "*", Attack: "hardlink-planted", Allows: GotThrough,
		Reason: "a hard link planted by the HOST inside an exposed directory is content of that directory for every provider: " +
			"the host shared the file by linking it there (the program cannot make such a link itself, see hardlink-own)"},
	{Provider: "*", Attack: "mount", Allows: Blocked, Requires: pysandboxes.CapNoPrivileges, Reason: noPrivReason},
	{Provider: "*", Attack: "setns", Allows: Blocked, Requires: pysandboxes.CapNoPrivileges, Reason: noPrivReason},
	{Provider: "*", Attack: "raw-socket", Allows: Blocked, Requires: pysandboxes.CapNoPrivileges, Reason: noPrivReason},
	{Provider: "*", Attack: "packet-socket", Allows: Blocked, Requires: pysandboxes.CapNoPrivileges, Reason: noPrivReason},
	{Provider: "landlock", Attack: "unix-abstract", Allows: Blocked, Requires: pysandboxes.CapSignals, // ABI >= 6
		Reason: "Landlock ABI 6 scopes abstract Unix sockets to the sandbox even without seccomp; unix-sockets is not declared then " +
			"because named sockets of the host (unix-named) are reachable before ABI 9"},
	{Provider: "*", Attack: "ignored-file", Allows: Blocked,
		Reason: "without the filter of ignore= paths (it needs root), the contents of an ignored file present at start stay " +
			"unreadable (Landlock grants its directory entry by entry around it; the namespace providers mask it); hide is not " +
			"declared because its name and metadata stay visible and files made later are not covered (ignored-meta, ignored-later)"},
	{Provider: "landlock", Attack: "tcp-denied-port", Allows: Blocked, Reason: landlockTCPReason},
	{Provider: "firejail", Attack: "stat-outside", Allows: Blocked, Reason: firejailMetaReason},
	{Provider: "firejail", Attack: "readlink-outside", Allows: Blocked, Reason: firejailMetaReason},
	{Provider: "firejail", Attack: "xattr-read-outside", Allows: Blocked, Reason: firejailMetaReason},
	{Provider: "firejail", Attack: "inotify-outside", Allows: Blocked, Reason: firejailMetaReason},
	{Provider: "landlock", Attack: "tcp6-denied-port", Allows: Blocked, Reason: landlockTCPReason},
	{Provider: "landlock", Attack: "tcp-listen", Allows: Blocked, Reason: landlockTCPReason},
	{Provider: "qemu", Attack: "unshare", Allows: Blocked,
		Reason: "the guest's init chroots the program into its view of the files, and the kernel refuses a new user namespace " +
			"to a chrooted process (EPERM); seccomp is not declared because no system call is filtered (io-uring)"},
	{Provider: "qemu", Attack: "tcp-listen", Allows: GotThrough,
		Reason: "the program listens on the guest's own network, which nothing outside the VM reaches: QEMU forwards into the VM " +
			"only the ports that net= IN rules forward (none here); the guest's kernel has no Landlock TCP rules to refuse the " +
			"bind itself"},
	{Provider: "qemu", Attack: "lease-exposed", Allows: GotThrough,
		Reason: "the lease is taken by the guest's kernel on its own 9p inode of the file: 9p carries no lease to the host, " +
			"whose writers of the file are never held (the program holds no identity of the host)"},
}

const noPrivReason = "the program holds no capability (no-privileges): the kernel refuses this to it even where the filter " +
	"that refuses it to any program (seccomp, raw-sockets) is not declared"

const firejailMetaReason = "firejail hides what it does not whitelist in the directories it whitelists (here a temporary " +
	"directory); files-meta is not declared because the host's top directories it blacklists stay visible (stat-host-dir)"

const landlockTCPReason = "without seccomp, Landlock (ABI >= 4) still filters plain TCP by port; tcp-ports is not declared " +
	"then because MPTCP sockets go around Landlock's TCP rules (mptcp-denied-port)"

func exceptionFor(p pysandboxes.Provider, attack string, v Verdict) *Exception {
	for i := range exceptions {
		x := &exceptions[i]
		if (x.Provider == "*" || x.Provider == p.Name()) && x.Attack == attack && x.Allows == v &&
			p.Capabilities().Has(x.Requires) {
			return x
		}
	}
	return nil
}

// running lets exclusive attacks run alone.
var running sync.RWMutex

// Result is the verdict of one attack against one provider.
type Result struct {
	Attack     string
	Provider   string
	Capability pysandboxes.Capability
	// Declared reports whether the provider declares the attack's capability.
	Declared bool
	Verdict  Verdict
	// Exception is the exception that allowed the verdict, if any.
	Exception *Exception
	// Detail says what was seen: the refusals, what got through, why the attack
	// was skipped or failed.
	Detail string
	// Err is set when the verdict is Failed.
	Err     error
	Elapsed time.Duration
}

// Attacks returns the corpus, in the order of the table.
func Attacks() []*Attack { return slices.Clone(corpus) }

// RunAttack runs one attack against one provider (which must be registered, its
// Probe having succeeded) and judges it.
func RunAttack(ctx context.Context, p pysandboxes.Provider, a *Attack) (res Result) {
	if a.exclusive {
		running.Lock()
		defer running.Unlock()
	} else {
		running.RLock()
		defer running.RUnlock()
	}
	start := time.Now()
	res = Result{Attack: a.Name, Provider: p.Name(), Capability: a.Capability}
	defer func() { res.Elapsed = time.Since(start) }()
	caps := p.Capabilities()
	res.Declared = a.Capability == 0 || caps.Has(a.Capability)
	if !res.Declared && a.Destructive {
		res.Verdict, res.Detail = NotRun, "destructive or unbounded without "+a.Capability.String()+": not run"
		return res
	}
	if !res.Declared && a.Privileged && os.Geteuid() != 0 {
		res.Verdict, res.Detail = Skipped, "as an unprivileged user the kernel refuses this anyway: the negative control needs root"
		return res
	}
	e, err := newEnv(ctx, p)
	if err != nil {
		res.Verdict, res.Err = Failed, err
		res.Detail = err.Error()
		return res
	}
	defer e.close()
	got, detail, err := e.execute(a)
	res.Detail = detail
	switch {
	case err != nil:
		res.Verdict, res.Err = Failed, err
		res.Detail = err.Error()
		return res
	case got == outSkipped:
		res.Verdict = Skipped
		return res
	case got == outRefused:
		res.Verdict = Refused
		return res
	case got == outUnclear:
		res.Verdict = Failed
		res.Err = fmt.Errorf("neither blocked as expected nor through: %s", detail)
		return res
	}
	v := Blocked
	if got == outThrough {
		v = GotThrough
	}
	want := Blocked
	if !res.Declared {
		want = GotThrough
	}
	if v == want {
		res.Verdict = v
		return res
	}
	if x := exceptionFor(p, a.Name, v); x != nil {
		res.Verdict, res.Exception = v, x
		return res
	}
	res.Verdict = Failed
	switch {
	case want == Blocked && a.Capability == 0:
		res.Err = fmt.Errorf("BUG: every provider's supervisor should stop this, but under %s the attack got through: %s", p.Name(), detail)
	case want == Blocked:
		res.Err = fmt.Errorf("BUG: %s declares %s but the attack got through: %s", p.Name(), a.Capability, detail)
	default:
		res.Err = fmt.Errorf("blocked although %s does not declare %s (declare it, or add an exception with its reason): %s",
			p.Name(), a.Capability, detail)
	}
	return res
}

// Providers returns the registered providers the corpus runs against (every one
// but "none", which is no sandbox), with the Probe error of those that do not
// work here.
func Providers(ctx context.Context) (usable []pysandboxes.Provider, unavailable map[string]error) {
	unavailable = map[string]error{}
	for _, p := range pysandboxes.Providers() {
		if p.Name() == "none" {
			continue
		}
		if err := p.Probe(ctx); err != nil {
			unavailable[p.Name()] = err
			continue
		}
		usable = append(usable, p)
	}
	return usable, unavailable
}

// Run runs every attack against every provider that works here, provider after
// provider, and returns the results.
func Run(ctx context.Context) []Result {
	usable, _ := Providers(ctx)
	var out []Result
	for _, p := range usable {
		for _, a := range corpus {
			out = append(out, RunAttack(ctx, p, a))
		}
	}
	return out
}

// Table runs the corpus (Run) and returns the verdict table.
func Table(ctx context.Context) string {
	res := Run(ctx)
	_, unavailable := Providers(ctx)
	s := Format(res)
	var names []string
	for n := range unavailable {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		s += fmt.Sprintf("%s: not available here: %v\n", n, unavailable[n])
	}
	return s
}

// Format renders results as a table, attack by provider, followed by numbered
// notes (the exceptions applied, why attacks were skipped or failed).
func Format(results []Result) string {
	var providers []string
	cells := map[[2]string]Result{}
	for _, r := range results {
		if !slices.Contains(providers, r.Provider) {
			providers = append(providers, r.Provider)
		}
		cells[[2]string{r.Attack, r.Provider}] = r
	}
	var rows []*Attack
	for _, a := range corpus {
		for _, p := range providers {
			if _, ok := cells[[2]string{a.Name, p}]; ok {
				rows = append(rows, a)
				break
			}
		}
	}
	var notes []string
	note := func(s string) int {
		if i := slices.Index(notes, s); i >= 0 {
			return i + 1
		}
		notes = append(notes, s)
		return len(notes)
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "attack\tcapability")
	for _, p := range providers {
		fmt.Fprint(tw, "\t"+p)
	}
	fmt.Fprintln(tw)
	for _, a := range rows {
		capName := a.Capability.String()
		if a.Capability == 0 {
			capName = "(supervisor)"
		}
		fmt.Fprintf(tw, "%s\t%s", a.Name, capName)
		for _, p := range providers {
			r, ok := cells[[2]string{a.Name, p}]
			cell := "-"
			switch {
			case !ok:
			case r.Verdict == Failed:
				cell = fmt.Sprintf("FAILED [%d]", note(fmt.Sprintf("%s, %s: %v", a.Name, p, r.Err)))
			case r.Verdict == Skipped:
				cell = fmt.Sprintf("skipped [%d]", note(r.Detail))
			case r.Exception != nil:
				cell = fmt.Sprintf("%s [%d]", r.Verdict, note(r.Exception.Reason))
			default:
				cell = string(r.Verdict)
			}
			fmt.Fprint(tw, "\t"+cell)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	for i, n := range notes {
		fmt.Fprintf(&b, "[%d] %s\n", i+1, n)
	}
	return b.String()
}

// corpus is every attack, in the order of the table.
var corpus = concat(fileAttacks, metaAttacks, hideAttacks, procAttacks, identityAttacks, netAttacks, limitAttacks)

func concat(lists ...[]*Attack) []*Attack {
	var out []*Attack
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
