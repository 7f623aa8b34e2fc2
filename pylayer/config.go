package pylayer

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"

	"github.com/pysandboxes/pysandboxes/evalguard"
	"github.com/pysandboxes/pysandboxes/policy"
)

// Target says what the child runs, CPython style.
type Target struct {
	// Kind is "command" (-c), "module" (-m), "script", "stdin" (-) or
	// "interactive" (no program: a REPL when stdin is a terminal or -i is given,
	// else the program read from stdin).
	Kind string
	// Value is the command text, the module name or the script path.
	Value string
	// Args are sys.argv[1:].
	Args []string
	// SkipFirstLine is CPython's -x (scripts only).
	SkipFirstLine bool
}

// Mode of the guard.
const (
	ModeEnforce = "enforce"
	ModeLearn   = "learn"
)

// ConfigInput is what the configuration is built from.
type ConfigInput struct {
	Policy   *policy.Policy
	Interp   *Interpreter
	Mode     string
	Target   Target
	Provider string
	// RulesFile is the rule file shown in the interactive banner ("" for rules
	// given by code).
	RulesFile string
	// LearnFile is the file learning writes into (learning mode).
	LearnFile string
}

// caPaths are the system CA stores: OpenSSL reads them from C, and Python code may
// too (ssl.get_default_verify_paths, certifi-less clients). Implicitly read-only.
var caPaths = []string{"/etc/ssl", "/etc/pki", "/etc/ca-certificates", "/usr/share/ca-certificates", "/usr/share/pki"}

// devicePaths are implicitly read-write (as the landlock provider grants them).
var devicePaths = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}

// buildConfig returns the marshalled configuration of the guard: the policy
// already resolved by Go (canonical exposes with modes and refs, ignore patterns,
// net rules with prefixes, ports and directions, the pin table, imports, the
// decision of every function of the python-api registry, the eval state), so the
// child never parses a rule file.
func buildConfig(in ConfigInput) ([]byte, error) {
	p := in.Policy
	cfg := pyDict{
		"v":        1,
		"mode":     in.Mode,
		"provider": in.Provider,
		"rules":    in.RulesFile,
		"learn":    in.LearnFile,
		"target": pyDict{
			"kind": in.Target.Kind, "value": in.Target.Value, "args": slices.Clone(in.Target.Args),
			"skip": in.Target.SkipFirstLine,
		},
		"pid": os.Getpid(),
	}
	// Files.
	var exposes []any
	for _, e := range p.Exposes() { // deepest first
		exposes = append(exposes, pyTuple{e.Path, e.Mode == policy.ReadWrite, e.Raw, e.Ref.String()})
	}
	cfg["exposes"] = exposes
	var implicit []any
	seen := map[string]bool{}
	addImplicit := func(path string, rw bool, why string) {
		real, err := filepath.EvalSymlinks(path)
		if err != nil || seen[real] {
			return
		}
		seen[real] = true
		implicit = append(implicit, pyTuple{real, rw, why})
	}
	var interpDirs []string
	if in.Interp != nil {
		for _, d := range append(append(slices.Clone(in.Interp.Info.Stdlib), in.Interp.Info.Site...), filepath.Dir(in.Interp.Path)) {
			addImplicit(d, false, "the Python interpreter")
			interpDirs = append(interpDirs, d)
		}
	}
	for _, d := range caPaths {
		addImplicit(d, false, "the system CA certificates")
	}
	for _, d := range devicePaths {
		addImplicit(d, true, "a device every program may use")
	}
	// Longest first, as exposes.
	sort.SliceStable(implicit, func(i, j int) bool {
		return len(implicit[i].(pyTuple)[0].(string)) > len(implicit[j].(pyTuple)[0].(string))
	})
	cfg["implicit"] = implicit
	var stdlib, site []string
	if in.Interp != nil {
		stdlib, site = in.Interp.Info.Stdlib, in.Interp.Info.Site
	}
	cfg["stdlib"] = pyTuple(toAny(stdlib))
	cfg["site"] = pyTuple(toAny(site))
	var library []string
	opcodes := pyDict{}
	if in.Interp != nil {
		library = in.Interp.Info.Library
		for k, v := range in.Interp.Info.Opcodes {
			opcodes[k] = v
		}
	}
	cfg["library"] = pyTuple(toAny(library))
	cfg["opcodes"] = opcodes
	cfg["interp_dirs"] = pyTuple(toAny(interpDirs))
	var ignores []any
	for _, ig := range p.Ignores() {
		ignores = append(ignores, pyTuple{ig.Pattern, ig.Absolute, ig.Raw, ig.Ref.String()})
	}
	cfg["ignores"] = ignores

	// Network.
	net := p.Network()
	var rules []any
	for _, r := range net.Rules() {
		var prefixes []any
		for _, pf := range r.Prefixes {
			prefixes = append(prefixes, pyTuple{pf.Addr().String(), pf.Bits()})
		}
		var ports []any
		for _, pr := range r.Ports {
			ports = append(ports, pyTuple{int(pr.Lo), int(pr.Hi)})
		}
		rules = append(rules, pyTuple{r.Action == policy.Allow, int(r.Protos), int(r.Dir), prefixes, ports, r.Raw, r.Ref.String(), r.Host != ""})
	}
	cfg["net"] = rules
	pins := pyDict{}
	for host, addrs := range net.Pins() {
		var list []string
		for _, a := range addrs {
			list = append(list, a.String())
		}
		pins[host] = list
	}
	cfg["pins"] = pins

	// Imports.
	imp := p.Imports()
	mods := pyDict{}
	for _, m := range imp.Modules() {
		_, r := imp.Allowed(m)
		if r != nil && r != imp.AllRule() {
			mods[m] = pyTuple{r.Raw, r.Ref.String()}
		}
	}
	var all any
	if r := imp.AllRule(); r != nil {
		all = pyTuple{r.Raw, r.Ref.String()}
	}
	cfg["imports"] = pyDict{"all": all, "modules": mods}

	// Sensitive API: the decision for every registered name.
	api := pyDict{}
	for name := range policy.APIRegistry() {
		ok, cat, r := p.APIAllowed(name)
		var raw, ref any
		if r != nil {
			raw, ref = r.Raw, r.Ref.String()
		}
		api[name] = pyTuple{ok, cat, raw, ref, policy.APICategoryWarned(cat)}
	}
	cfg["api"] = api
	cfg["eval"] = strconv.Itoa(int(p.Eval().State()))
	cfg["eval_declared"] = p.Eval().State() == policy.EvalGuarded
	// The eval profiles, in the eval guard's plain-data form: the patched eval,
	// exec and compile use the default one ("").
	if names := p.Eval().Names(); len(names) > 0 {
		profiles := pyDict{}
		for _, n := range names {
			ep, _ := p.Eval().Profile(n)
			profiles[n] = evalguard.NewProfile(ep).Python()
		}
		cfg["eval_profiles"] = profiles
	}
	return marshalValue(cfg)
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
