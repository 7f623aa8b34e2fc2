package policy

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
)

// The grading tables of Diff. Each function returns the grade of one grant and
// the reason, a phrase that completes "what is granted: ...".
//
// The grades follow upstream's review table (reference: eval-transport-mcp.md
// §6.3) with these decisions, each made thinking of what an attacker does with
// the grant:
//   - expose-ro of /, of the home directory or of a directory holding it, and of a
//     credential store (~/.ssh, ~/.aws, ...) is high, not medium: it hands the
//     user's keys and tokens to the program. Read-only /run (host sockets such as
//     docker.sock, which a connect reaches without a write right) and /dev (as
//     root, whole disks) are high; /etc, /proc and /var medium.
//   - expose-rw of a system directory (/etc, /usr, /dev, /var, ...) is high; of a
//     temporary directory, or anywhere else, medium.
//   - python-api=ALLOW of one function is graded by its category: os.system is as
//     high as process-exec.
//   - os-sandbox=subprocess is high, as none is: it leaves files and network to
//     the Python layer alone, which native code walks around.
//   - eval-call of a builtin that can undo the guard (the "dangerous grants" the
//     eval guard names: __import__, open, eval, exec, compile, locals) is high;
//     of another sensitive builtin (evalSensitiveCalls) medium, or low for those
//     refused at run time whatever the profile; eval-magic of a dunder that opens
//     the type hierarchy is high.
//   - env= of a loader variable (LD_PRELOAD...) is high: native code runs before
//     the Python layer starts.

// diffHighEvalCalls are the builtins of evalSensitiveCalls whose eval-call grant
// can undo the eval guard (the eval guard calls them dangerous grants).
var diffHighEvalCalls = []string{"__import__", "open", "eval", "exec", "compile", "locals"}

// diffInertEvalCalls are the builtins of evalSensitiveCalls that the eval guard
// refuses at run time whatever the profile: granting them grants nothing.
var diffInertEvalCalls = []string{"setattr", "delattr", "globals", "breakpoint"}

// diffNativeImports are the C modules under the dangerous ones, which a rule may
// name directly (python-import=_ctypes grants what ctypes does), with what each
// gives.
var diffNativeImports = map[string]string{
	"_ctypes":            "calls any C function and writes any memory",
	"_testcapi":          "writes memory and calls the interpreter's internals",
	"_testinternalcapi":  "writes memory and calls the interpreter's internals",
	"_imp":               "loads any shared library as an extension module",
	"_xxsubinterpreters": "starts interpreters the Python layer is not injected into",
	"_interpreters":      "starts interpreters the Python layer is not injected into",
	"_posixsubprocess":   "starts programs",
}

// diffCredentialDirs are credential stores under the home directory.
var diffCredentialDirs = []string{
	".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".config/gcloud", ".config/gh",
	".password-store", ".local/share/keyrings", ".pki", ".terraform.d", ".vault-token",
}

// diffSystemDirs are the host's own directories: a write there changes the host.
var diffSystemDirs = []string{
	"/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot",
	"/dev", "/proc", "/sys", "/var", "/run", "/opt", "/snap",
}

// diffTempDirs are the shared temporary directories.
var diffTempDirs = []string{"/tmp", "/var/tmp", "/dev/shm"}

// diffLoaderVars are variables the dynamic loader reads before any code of the
// program runs.
var diffLoaderVars = []string{"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "LD_DEBUG_OUTPUT", "LD_PROFILE", "GCONV_PATH"}

// diffPythonVars are variables that change where the interpreter finds code.
var diffPythonVars = []string{"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONPLATLIBDIR",
	"PYTHONBREAKPOINT", "PYTHONEXECUTABLE", "PYTHONINSPECT"}

// diffSecretWords mark a variable name as holding a secret.
var diffSecretWords = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "PRIVATE", "COOKIE", "SESSION"}

// gradeDir grades exposing the canonical directory path with mode; home is the
// canonical home directory ("" when unknown).
func gradeDir(path string, mode Mode, home string) (Risk, string) {
	switch {
	case path == "/":
		return RiskHigh, "the whole file system, every user's files and credentials included"
	case home != "" && within(home, path):
		if path == home {
			return RiskHigh, "the home directory, with its credentials (~/.ssh, ~/.aws, tokens)"
		}
		return RiskHigh, "a directory holding the home directory, with its credentials (~/.ssh, ~/.aws, tokens)"
	case path == "/home" || path == "/root":
		return RiskHigh, "the home directories of the host's users, with their credentials"
	}
	if home != "" {
		for _, c := range diffCredentialDirs {
			cp := filepath.Join(home, c)
			if within(path, cp) || pathUnder(cp, path) {
				return RiskHigh, fmt.Sprintf("credentials (~/%s)", c)
			}
		}
	}
	if mode == ReadWrite {
		if slices.Contains(diffTempDirs, path) {
			return RiskMedium, "a temporary directory shared with the host's other programs"
		}
		for _, s := range diffSystemDirs {
			if within(path, s) {
				return RiskHigh, fmt.Sprintf("a system directory (%s): a write there changes the host itself", s)
			}
		}
		return RiskMedium, "the program may create, write, rename and delete files there"
	}
	switch {
	case within(path, "/run"):
		return RiskHigh, "the host's sockets (docker.sock, the D-Bus bus...): connecting to one needs no write right"
	case within(path, "/dev"):
		return RiskHigh, "device nodes: as root, whole disks"
	case within(path, "/proc"):
		return RiskMedium, "the host's processes: their command lines and, as the same user, their environment"
	case within(path, "/etc"):
		return RiskMedium, "the host's configuration (as root, /etc/shadow and private keys)"
	case within(path, "/var"):
		return RiskMedium, "the host's state: logs, databases, mail and spools"
	case slices.Contains(diffTempDirs, path):
		return RiskMedium, "a temporary directory shared with the host's other programs, their files included"
	}
	return RiskLow, "the program may read what is there"
}

// gradeEnv grades setting the variable name (a '*' pattern when pattern) to the
// value expression v.
func gradeEnv(name, v string, pattern bool) (Risk, string) {
	refs := envRefs(v)
	if pattern {
		if len(refs) > 0 {
			return RiskHigh, fmt.Sprintf("copies every host variable matching %s, whatever it holds (secrets included)", name)
		}
		return RiskMedium, fmt.Sprintf("sets every host variable matching %s", name)
	}
	for _, l := range diffLoaderVars {
		if name == l {
			return RiskHigh, fmt.Sprintf("the dynamic loader reads %s before the program starts: native code can run before the Python layer", name)
		}
	}
	for _, p := range diffPythonVars {
		if name == p {
			return RiskMedium, fmt.Sprintf("%s changes where the interpreter finds code", name)
		}
	}
	host := "the host's " + strings.Join(refs, ", ")
	if len(refs) == 1 && refs[0] == name {
		host = "the host's value"
	}
	for _, r := range append([]string{name}, refs...) {
		if secretLike(r) && len(refs) > 0 {
			return RiskMedium, fmt.Sprintf("hands %s to the program (a secret, by its name)", host)
		}
	}
	if len(refs) > 0 {
		return RiskLow, "copies " + host
	}
	return RiskLow, "a fixed value"
}

// secretLike reports whether a variable name looks like it holds a secret.
func secretLike(name string) bool {
	up := strings.ToUpper(name)
	for _, w := range diffSecretWords {
		if strings.Contains(up, w) {
			return true
		}
	}
	return false
}

// gradeImport grades python-import of module ("*" for every module).
func gradeImport(module string) (Risk, string) {
	if module == "*" {
		return RiskHigh, "every module may be imported, the dangerous ones included (" + strings.Join(DangerousImports(), ", ") + ")"
	}
	if slices.Contains(DangerousImports(), module) {
		return RiskHigh, fmt.Sprintf("%s is a dangerous module: it can undo the sandbox or run code outside it", module)
	}
	if why, ok := diffNativeImports[module]; ok {
		return RiskHigh, fmt.Sprintf("%s is a native module that %s: it can undo the sandbox", module, why)
	}
	return RiskLow, fmt.Sprintf("the program may import %s and its submodules", module)
}

// gradeAPI grades python-api=ALLOW of target ("*", a category or a function)
// that allows funcs.
func gradeAPI(target string, funcs []string) (Risk, string) {
	list := funcs
	more := ""
	if len(list) > 6 {
		more = fmt.Sprintf(" and %d more", len(list)-6)
		list = list[:6]
	}
	allows := fmt.Sprintf("allows %s%s", strings.Join(list, ", "), more)
	switch {
	case target == "*":
		var open []string
		for _, f := range funcs {
			if c, _ := APICategoryOf(f); APICategoryWarned(c) && !slices.Contains(open, c) {
				open = append(open, c)
			}
		}
		if len(open) > 0 {
			return RiskHigh, fmt.Sprintf("%s: every sensitive function, the dangerous categories %s included", allows, strings.Join(open, ", "))
		}
		return RiskHigh, allows + ": every sensitive function the other rules do not deny"
	case !strings.Contains(target, "."):
		if APICategoryWarned(target) {
			return RiskHigh, fmt.Sprintf("%s: the dangerous category %s (%s)", allows, target, APICategoryHelp(target))
		}
		return RiskMedium, fmt.Sprintf("%s: the category %s (%s)", allows, target, APICategoryHelp(target))
	}
	cat, _ := APICategoryOf(target)
	if APICategoryWarned(cat) {
		return RiskHigh, fmt.Sprintf("%s, of the dangerous category %s (%s)", allows, cat, APICategoryHelp(cat))
	}
	return RiskMedium, fmt.Sprintf("%s, of the category %s (%s)", allows, cat, APICategoryHelp(cat))
}

// gradeEval grades the token t of an eval-* list key, which allows names (for a
// pattern: the names of interest it matches, or the pattern itself).
func gradeEval(key, t string, names []string) (Risk, string) {
	shown := strings.Join(names, ", ")
	switch key {
	case evalCallKey:
		risk, why := RiskLow, "evaluated code may call "+shown
		for _, n := range names {
			reason, sensitive := evalSensitiveCalls[n]
			switch {
			case slices.Contains(diffHighEvalCalls, n):
				return RiskHigh, fmt.Sprintf("adds the builtin %s to evaluated code: %s", n, reason)
			case sensitive && !slices.Contains(diffInertEvalCalls, n) && risk < RiskMedium:
				risk, why = RiskMedium, fmt.Sprintf("adds the builtin %s to evaluated code: %s", n, reason)
			}
		}
		if t == "*" {
			return RiskHigh, "evaluated code may call every builtin and every name it is given"
		}
		return risk, why
	case evalMagicKey:
		for _, n := range names {
			if slices.Contains(evalHierarchyDunders, n) {
				return RiskHigh, fmt.Sprintf("%s opens the whole type hierarchy to evaluated code", n)
			}
		}
		return RiskMedium, "evaluated code may use the dunder names " + shown
	case evalImportKey:
		for _, n := range names {
			if n == "*" || slices.Contains(DangerousImports(), n) {
				return RiskHigh, fmt.Sprintf("evaluated code may import %s, a dangerous module", n)
			}
		}
		if strings.Contains(t, "*") && names[0] == t {
			return RiskMedium, "evaluated code may import every module matching " + t
		}
		return RiskLow, "evaluated code may import " + shown
	case evalAttributeKey:
		switch {
		case slices.Contains(names, "format") || slices.Contains(names, "format_map"):
			return RiskMedium, "str.format reads attributes named inside its template (checked at run time)"
		case strings.Contains(t, "*") && len(strings.ReplaceAll(t, "*", "")) < 3:
			return RiskMedium, fmt.Sprintf("the pattern %s may match many attribute names", t)
		}
		return RiskLow, "evaluated code may read the attributes " + shown
	}
	// eval-syntax
	for _, n := range names {
		if n == "Import" || n == "ImportFrom" {
			return RiskMedium, "evaluated code may use import statements (eval-import decides which modules)"
		}
	}
	return RiskLow, "evaluated code may use " + shown + " (under its budgets)"
}

// gradeProviderParam grades a parameter of a provider that the old profile did
// not pass (or passed with another value).
func gradeProviderParam(p Param) (Risk, string) {
	if strings.HasPrefix(p.Name, "rlimit-") || p.Name == "memory" || p.Name == "cpus" {
		return RiskMedium, fmt.Sprintf("a resource limit of the %s provider: a higher value lets the program use more (a lower one narrows)", p.Provider)
	}
	return RiskMedium, fmt.Sprintf("a parameter of the %s provider, passed to it as written: check what it changes", p.Provider)
}

// gradeOSSandbox grades a change of the OS provider from was to now.
func gradeOSSandbox(now, was string) (Risk, string) {
	switch now {
	case "none":
		return RiskHigh, "no sandbox at all: the program runs as the host's user, unconfined"
	case "subprocess":
		return RiskHigh, "no OS boundary: files and network rest on the Python layer alone, which native code walks around"
	}
	return RiskLow, fmt.Sprintf("the OS provider is %s (%s before): it refuses to start unless it enforces every rule, but what it enforces differs", now, was)
}

// gradeNet grades a net=ALLOW rule that allows traffic the old profile refused.
func gradeNet(r *NetRule) (Risk, string) {
	anyAddr := r.Any
	for _, p := range r.Prefixes {
		if p.Bits() == 0 {
			anyAddr = true
		}
	}
	if anyAddr {
		if r.Dir&In != 0 {
			return RiskHigh, "any address: the program may listen on every interface, reachable from the network"
		}
		return RiskHigh, "any host: the program may send anything anywhere"
	}
	if r.Dir&In != 0 {
		return RiskMedium, "the program may listen on " + r.Network
	}
	return RiskMedium, "the program may reach " + r.Network
}

// lastAddr returns the last address of a masked prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr()
	b := a.AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	out, _ := netip.AddrFromSlice(b)
	return out
}
