package evalguard

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pysandboxes/pysandboxes/policy"
	"github.com/pysandboxes/pysandboxes/transport"
)

// TestFromPolicy: the default and named profiles of a policy, their values as the
// policy resolved them; an undeclared profile is a typed error listing the
// declared ones (never a fallback to the default profile).
func TestFromPolicy(t *testing.T) {
	pol := parsePolicy(t, `eval-syntax=arith, loop
eval-call=len
eval-call=DENY:open
eval-attribute=str-methods, format
eval-timeout=250ms
eval-max-alloc=2MB
eval-syntax:calc=compare
eval-namespace:calc=closed
`)
	def, err := FromPolicy(pol, "")
	if err != nil {
		t.Fatal(err)
	}
	if def.Name != "" || def.SourceRef() != "<eval:default>" || def.Timeout != 250*time.Millisecond || def.MaxAlloc != 2_000_000 ||
		def.MaxIterations != 1_000_000 || def.MaxCallDepth != 20 || def.MaxDepth != 20 || def.MaxNodes != 5000 ||
		def.MaxLeakedThreads != 4 || def.Namespace != Adaptive {
		t.Errorf("default profile %+v", def)
	}
	for _, n := range []string{"BinOp", "UnaryOp", "For", "While", "Break", "Continue", "Module", "Constant", "Name"} {
		if !contains(def.Syntax.Allow, n) {
			t.Errorf("syntax allow lacks %s: %v", n, def.Syntax.Allow)
		}
	}
	if diff := cmp.Diff([]string{"len"}, def.Call.Allow); diff != "" {
		t.Errorf("call allow: %s", diff)
	}
	if !contains(def.Call.Deny, "open") || !contains(def.Attribute.Allow, "str-methods") || !contains(def.Attribute.Allow, "format") ||
		contains(def.Attribute.Deny, "format") || !contains(def.Attribute.Deny, "format_map") || !contains(def.Attribute.Deny, "gi_frame") {
		t.Errorf("call/attribute rules %+v %+v", def.Call, def.Attribute)
	}
	calc, err := FromPolicy(pol, "calc")
	if err != nil {
		t.Fatal(err)
	}
	if calc.Name != "calc" || calc.SourceRef() != "<eval:calc>" || calc.Namespace != Closed || contains(calc.Syntax.Allow, "BinOp") ||
		!contains(calc.Syntax.Allow, "Compare") || len(calc.Call.Allow) != 0 || calc.Timeout != 5*time.Second {
		t.Errorf("named profile inherits or lacks: %+v", calc)
	}
	if got := calc.Rule("eval-call", "len"); got != "eval-call:calc=len" {
		t.Errorf("Rule = %q", got)
	}
	_, err = FromPolicy(pol, "nope")
	var ue *UnknownProfileError
	if !errors.As(err, &ue) || ue.Name != "nope" || !cmp.Equal(ue.Known, []string{"", "calc"}) ||
		err.Error() != `evalguard: unknown eval profile "nope"; declared profiles: default, calc` {
		t.Errorf("unknown profile: %v", err)
	}
	_, err = FromPolicy(parsePolicy(t, "python-import=json\n"), "")
	if !errors.As(err, &ue) || ue.State != Refused || !strings.Contains(err.Error(), "eval, exec and compile are refused") {
		t.Errorf("no eval rule: %v", err)
	}
	_, err = FromPolicy(parsePolicy(t, "python-api=ALLOW:dynamic-code\n"), "")
	if !errors.As(err, &ue) || ue.State != Unguarded || !strings.Contains(err.Error(), "unguarded") {
		t.Errorf("dynamic-code: %v", err)
	}
	if err := DefaultProfile().Validate(); err != nil {
		t.Error(err)
	}
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// TestStates: the three states of the guard, and a policy holding both eval-*
// rules and python-api=ALLOW:dynamic-code refused when it loads.
func TestStates(t *testing.T) {
	for rules, want := range map[string]State{
		"python-import=json\n":             Refused,
		"eval-syntax:calc=arith\n":         Refused, // named profiles alone do not arm the builtins
		"eval-syntax=arith\n":              Guarded,
		"python-api=ALLOW:dynamic-code\n":  Unguarded,
		"python-api=ALLOW:builtins.eval\n": Unguarded,
	} {
		if got := StateOf(parsePolicy(t, rules)); got != want {
			t.Errorf("%q: state %v, want %v", rules, got, want)
		}
	}
	if StateOf(nil) != Refused {
		t.Error("nil policy is not refused")
	}
	_, err := policy.Parse(context.Background(), "/test/.py-sandboxes", []byte("eval-syntax=arith\npython-api=ALLOW:dynamic-code\n"),
		&policy.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "eval-* rules conflict with 'python-api=ALLOW:dynamic-code'") {
		t.Errorf("both the guard and the escape hatch: %v", err)
	}
}

// TestNamedProfilesAndNamespaces: a named profile is complete and independent
// (its fix lines name it); closed refuses names holding __builtins__, adaptive
// honours them; caller runs the source unchecked with the raw builtins.
func TestNamedProfilesAndNamespaces(t *testing.T) {
	rules := "eval-call=len\neval-syntax:calc=arith\neval-namespace:calc=closed\n"
	def, calc := profileOf(t, rules, "").Python(), profileOf(t, rules, "calc").Python()
	adaptive := profileOf(t, "eval-namespace=adaptive", "").Python()
	caller := profileOf(t, "eval-namespace=caller", "").Python()
	got := runAll(t, []runCase{
		{ID: "default", Profile: def, Src: "len([1, 2])"},
		{ID: "calc_has_no_len", Profile: calc, Src: "len([1, 2])"},
		{ID: "calc_runs", Profile: calc, Src: "x * 2 + 1", Names: "{'x': 20}"},
		{ID: "default_has_no_arith", Profile: def, Src: "1 + 1"},
		{ID: "closed_refuses_builtins", Profile: calc, Src: "1", Names: "{'__builtins__': {}}"},
		{ID: "adaptive_honours_builtins", Profile: adaptive, Src: "open", Names: "{'__builtins__': {'open': 'mine'}}"},
		{ID: "caller_is_unchecked", Profile: caller, Src: "__import__('os').getpid() > 0"},
		{ID: "reserved_name", Profile: def, Src: "1", Names: "{'__sb_tick__': 1}"},
		{ID: "exec_bound_names", Profile: profileOf(t, "eval-syntax=assign", "").Python(), Src: "x = 1\ny = a\na = 5\nb = b", Mode: "exec", Names: "{'a': 2, 'b': 3}"},
	})
	check := func(id string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("%s: %+v", id, got[id])
		}
	}
	check("default", got["default"].Value == "2")
	r := got["calc_has_no_len"]
	check("calc_has_no_len", r.Outcome == "rejected" && len(r.Violations) == 1 && r.Violations[0].Fix == "eval-call:calc=len" &&
		strings.Contains(r.Message, "violated in <eval:calc>"))
	check("calc_runs", got["calc_runs"].Value == "41")
	r = got["default_has_no_arith"]
	check("default_has_no_arith", r.Outcome == "rejected" && r.Violations[0].Fix == "eval-syntax=arith (or, narrower: eval-syntax=BinOp)")
	r = got["closed_refuses_builtins"]
	check("closed_refuses_builtins", r.Outcome == "error" && r.Type == "ValueError" && strings.Contains(r.Message, "eval-namespace=closed"))
	check("adaptive_honours_builtins", got["adaptive_honours_builtins"].Value == "'mine'")
	check("caller_is_unchecked", got["caller_is_unchecked"].Value == "True")
	r = got["reserved_name"]
	check("reserved_name", r.Outcome == "error" && r.Type == "ValueError" && strings.Contains(r.Message, "reserved prefix"))
	// exec returns the names the code bound: new ones, and rebound ones (b = b
	// rebinds to the same object: not reported).
	check("exec_bound_names", got["exec_bound_names"].Value == "{'a': 5, 'x': 1, 'y': 2}")
}

// TestProfilePythonIsPlainData: Profile.Python() holds only plain data, which
// transport.Pickle encodes and the Python side accepts as its profile.
func TestProfilePythonIsPlainData(t *testing.T) {
	needPython(t)
	p := profileOf(t, "eval-syntax=arith\neval-call=len, l*\neval-attribute=str-methods\neval-timeout=1.5s\neval-max-alloc=1GB\neval-import=json.*", "")
	script := `import sys, pickle
d = pickle.loads(sys.stdin.buffer.read())
m = type(sys)('pysandboxes_evalguard')
exec(compile(d.pop('module'), 'm', 'exec'), m.__dict__)
P = m.compile_profile(d['profile'])
print(P.timeout, P.max_alloc, P.builtin_names, P.imp.allows('json.decoder'), P.attribute.allows('upper'), P.attribute.allows('format'))
`
	wrapped, err := transport.Pickle(map[string]any{"module": Source(), "profile": p.Python()})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(realPython, "-I", "-S", "-c", script)
	cmd.Stdin = strings.NewReader(string(wrapped))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if s := strings.TrimSpace(string(out)); s != "1.5 1000000000 ('len', 'list', 'locals') True True False" {
		t.Errorf("Python side read %s", s)
	}
}

// TestFromRemote: the descriptors the Python side gives (describe()) become the
// typed errors, from JSON and from a pickle alike; other exceptions give nil.
func TestFromRemote(t *testing.T) {
	needPython(t)
	script := `import sys
m = type(sys)('pysandboxes_evalguard')
exec(compile(sys.stdin.read(), 'm', 'exec'), m.__dict__)
out = []
for src, prof in (('().__class__', {}), ('while True: pass', {'syntax': {'allow': ['loop']}, 'max_iterations': 5}),
                  ('getattr((), "__class__")', {'call': {'allow': ['getattr']}}),
                  ('while True: pass', {'syntax': {'allow': ['loop']}, 'timeout': 0.05, 'max_iterations': 10**12})):
    try:
        m.run(src, None, prof, 'exec')
    except BaseException as e:
        out.append(m.describe(e))
out.append(m.describe(ValueError('x')))
sys.stdout.write(m.to_json(out))
`
	cmd := exec.Command(realPython, "-I", "-S", "-c", script)
	cmd.Stdin = strings.NewReader(Source())
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var ds []any
	if err := json.Unmarshal(out, &ds); err != nil {
		t.Fatal(err)
	}
	if len(ds) != 5 || ds[4] != nil {
		t.Fatalf("descriptors %s", out)
	}
	errs := make([]error, 4)
	for i := range errs {
		d := ds[i].([]any)
		errs[i] = FromRemote(d[0].(string), d[1].(string), d[2].(string), d[3].([]any))
	}
	var re *RejectedError
	if !errors.As(errs[0], &re) || len(re.Violations) != 1 || re.SourceRef != "<eval:default>" ||
		re.Violations[0] != (Violation{Line: 1, Col: 1, Kind: "magic", Name: "__class__", Fix: "eval-magic=__class__",
			Message: "dunder attribute '__class__' is not allowed by eval-magic (it opens the whole type hierarchy)"}) {
		t.Errorf("Rejected: %#v", errs[0])
	}
	var ie *InterruptedError
	if !errors.As(errs[1], &ie) || ie.Budget != "eval-max-iterations" || ie.Limit != int64(5) ||
		ie.Error() != "evalguard: evaluation interrupted: eval-max-iterations=5 exhausted" {
		t.Errorf("Interrupted: %#v", errs[1])
	}
	var de *DeniedError
	if !errors.As(errs[2], &de) || de.Target != "__class__" || de.Rule != "eval-magic" || de.Kind != "magic" || de.Fix != "eval-magic=__class__" {
		t.Errorf("Denied: %#v", errs[2])
	}
	if !errors.As(errs[3], &ie) || ie.Budget != "eval-timeout" || ie.Limit != 0.05 {
		t.Errorf("timeout: %#v", errs[3])
	}
	// The same descriptors through the transport's pickle decoding.
	d := ds[1].([]any)
	p, err := transport.Pickle(transport.Tuple(d[3].([]any)))
	if err != nil {
		t.Fatal(err)
	}
	v, err := transport.Unpickle(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := FromRemote(Module, "Interrupted", d[2].(string), v.(transport.Tuple)); !errors.As(err, &ie) || ie.Limit != int64(5) {
		t.Errorf("from a pickle: %#v", err)
	}
	// Only the message.
	if err := FromRemote(Module, "Interrupted", "evaluation interrupted: eval-timeout=2s exhausted", nil); !errors.As(err, &ie) ||
		ie.Budget != "eval-timeout" || ie.Limit != 2.0 {
		t.Errorf("message only: %#v", err)
	}
	if err := FromRemote(Module, "Rejected", "1 rule violated", nil); !errors.As(err, &re) || !strings.Contains(err.Error(), "1 rule violated") {
		t.Errorf("report only: %v", err)
	}
	for _, c := range [][2]string{{"builtins", "ValueError"}, {Module, "Profile"}, {"pysandboxes", "Rejected"}} {
		if err := FromRemote(c[0], c[1], "x", nil); err != nil {
			t.Errorf("%v: %v", c, err)
		}
	}
}
