package policy

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const apiTestFile = "/some/dir/.py-sandboxes"

func apiTestParse(t testing.TB, text string, env ...string) (*Policy, error) {
	t.Helper()
	if env == nil {
		env = []string{}
	}
	return Parse(context.Background(), apiTestFile, []byte(text), &Options{Dir: t.TempDir(), Env: env})
}

func apiTestErrors(t *testing.T, err error) []string {
	t.Helper()
	var all ConfigErrors
	if !errors.As(err, &all) {
		t.Fatalf("error %T is not ConfigErrors: %v", err, err)
	}
	var one *ConfigError
	if !errors.As(err, &one) {
		t.Fatalf("no *ConfigError in %v", err)
	}
	var got []string
	for _, c := range all {
		got = append(got, c.Error())
	}
	return got
}

const apiCategoryList = "['deserialization', 'dynamic-code', 'introspection', 'native', 'privileges', 'process-control', 'process-exec', 'threads']"

func TestAPIErrors(t *testing.T) {
	const f = "/some/dir/.py-sandboxes"
	tests := []struct {
		name string
		text string
		env  []string
		want []string
	}{
		{"no colon", "python-api=ALLOW", nil, []string{
			f + "(1): Invalid rule 'python-api=ALLOW': expected the form 'ACTION:target', with ACTION in ['ALLOW', 'DENY'].",
		}},
		{"empty value", "python-api=", nil, []string{
			f + "(1): Invalid rule 'python-api=': expected the form 'ACTION:target', with ACTION in ['ALLOW', 'DENY'].",
		}},
		{"old pipe form", "python-api=ALLOW|threads", nil, []string{
			f + "(1): Invalid rule 'python-api=ALLOW|threads': expected the form 'ACTION:target', with ACTION in ['ALLOW', 'DENY'].",
		}},
		{"unknown action", "python-api=PERMIT:threads", nil, []string{
			f + "(1): Invalid rule 'python-api=PERMIT:threads': unknown action 'PERMIT', expected one of ['ALLOW', 'DENY'].",
		}},
		{"actions are upper case", "python-api=allow:threads", nil, []string{
			f + "(1): Invalid rule 'python-api=allow:threads': unknown action 'allow', expected one of ['ALLOW', 'DENY'].",
		}},
		{"missing action", "python-api=:threads", nil, []string{
			f + "(1): Invalid rule 'python-api=:threads': unknown action '', expected one of ['ALLOW', 'DENY'].",
		}},
		{"empty target", "python-api=ALLOW:", nil, []string{
			f + "(1): Invalid rule 'python-api=ALLOW:': empty target.",
		}},
		{"empty element", "python-api=DENY:threads,,native", nil, []string{
			f + "(1): Invalid rule 'python-api=DENY:threads,,native': empty target.",
		}},
		{"trailing comma", "python-api=ALLOW:threads, ", nil, []string{
			f + "(1): Invalid rule 'python-api=ALLOW:threads,': empty target.",
		}},
		{"mixed actions", "python-api=ALLOW:threads,DENY:native", nil, []string{
			f + "(1): Invalid rule 'python-api=ALLOW:threads,DENY:native': one action per line: do not mix ALLOW and DENY.",
		}},
		{"bare action word", "python-api=ALLOW:threads,deny", nil, []string{
			f + "(1): Invalid rule 'python-api=ALLOW:threads,deny': one action per line: do not mix ALLOW and DENY.",
		}},
		{"unknown category", "python-api=ALLOW:thread", nil, []string{
			f + "(1): Invalid rule 'python-api=ALLOW:thread': unknown category 'thread', expected one of " + apiCategoryList + ".",
		}},
		{"categories are case sensitive", "python-api=DENY:Threads", nil, []string{
			f + "(1): Invalid rule 'python-api=DENY:Threads': unknown category 'Threads', expected one of " + apiCategoryList + ".",
		}},
		{"unknown function", "python-api=DENY:os.sytem", nil, []string{
			f + "(1): Invalid rule 'python-api=DENY:os.sytem': 'os.sytem' is not a registered sensitive function.",
		}},
		{"no posix twin of a function written in os.py", "python-api=ALLOW:posix.popen", nil, []string{
			f + "(1): Invalid rule 'python-api=ALLOW:posix.popen': 'posix.popen' is not a registered sensitive function.",
		}},
		{"not registered on purpose", "python-api=ALLOW:os._exit, signal.signal, os.chroot", nil, []string{
			f + "(1): Invalid rule 'python-api=ALLOW:os._exit, signal.signal, os.chroot': 'os._exit' is not a registered sensitive function.",
			f + "(1): Invalid rule 'python-api=ALLOW:os._exit, signal.signal, os.chroot': 'signal.signal' is not a registered sensitive function.",
			f + "(1): Invalid rule 'python-api=ALLOW:os._exit, signal.signal, os.chroot': 'os.chroot' is not a registered sensitive function.",
		}},
		{"every bad target of a line", "python-api=ALLOW:threads,foo,os.bar,,*", nil, []string{
			f + "(1): Invalid rule 'python-api=ALLOW:threads,foo,os.bar,,*': unknown category 'foo', expected one of " + apiCategoryList + ".",
			f + "(1): Invalid rule 'python-api=ALLOW:threads,foo,os.bar,,*': 'os.bar' is not a registered sensitive function.",
			f + "(1): Invalid rule 'python-api=ALLOW:threads,foo,os.bar,,*': empty target.",
		}},
		{"quote in a name", "python-api=ALLOW:it's", nil, []string{
			f + "(1): Invalid rule 'python-api=ALLOW:it's': unknown category \"it's\", expected one of " + apiCategoryList + ".",
		}},
		{"several lines, sorted by line", "python-api=ALLOW:threads\npython-api=DENY\n\npython-api=ALLOW:native\npython-api=ALLOW:ctypes.CDLl", nil, []string{
			f + "(2): Invalid rule 'python-api=DENY': expected the form 'ACTION:target', with ACTION in ['ALLOW', 'DENY'].",
			f + "(5): Invalid rule 'python-api=ALLOW:ctypes.CDLl': 'ctypes.CDLl' is not a registered sensitive function.",
		}},
		{"raw line as written, value substituted", "python-api=ALLOW:${CAT}", []string{"CAT=thread"}, []string{
			f + "(1): Invalid rule 'python-api=ALLOW:${CAT}': unknown category 'thread', expected one of " + apiCategoryList + ".",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := apiTestParse(t, tt.text, tt.env...)
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", p.API().Rules())
			}
			if diff := cmp.Diff(tt.want, apiTestErrors(t, err)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAPIArgRules(t *testing.T) {
	_, err := Parse(context.Background(), "", nil, &Options{Dir: t.TempDir(), Env: []string{}, Rules: []string{"python-api=ALLOW:nope"}})
	want := []string{"<arg>: Invalid rule 'python-api=ALLOW:nope': unknown category 'nope', expected one of " + apiCategoryList + "."}
	if diff := cmp.Diff(want, apiTestErrors(t, err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestAPIDefaultDeny(t *testing.T) {
	p, err := apiTestParse(t, "python-import=*")
	if err != nil {
		t.Fatal(err)
	}
	if p.API() == nil {
		t.Fatal("API() is nil")
	}
	for name, cat := range APIRegistry() {
		ok, c, r := p.APIAllowed(name)
		if ok || c != cat || r != nil {
			t.Errorf("APIAllowed(%s) = %v, %q, %v; want false, %q, nil", name, ok, c, r, cat)
		}
	}
	for _, name := range []string{"os.getcwd", "os._exit", "", "threads", "*"} {
		if ok, c, r := p.APIAllowed(name); ok || c != "" || r != nil {
			t.Errorf("APIAllowed(%q) = %v, %q, %v; want false, \"\", nil", name, ok, c, r)
		}
	}
	if p.API().Disabled() {
		t.Error("Disabled() with no rule")
	}
	var nilPolicy Policy
	if ok, c, _ := nilPolicy.APIAllowed("os.system"); ok || c != CatProcessExec {
		t.Errorf("zero Policy: %v %q", ok, c)
	}
}

// apiDecision is what a query answers, with the deciding rule named by its text.
type apiDecision struct {
	Allowed  bool
	Category string
	Rule     string // Raw of the deciding rule, "" for the default deny
	Line     int
}

func apiDecide(p *Policy, name string) apiDecision {
	ok, c, r := p.APIAllowed(name)
	d := apiDecision{Allowed: ok, Category: c}
	if r != nil {
		d.Rule, d.Line = r.Raw, r.Ref.Line
	}
	return d
}

func TestAPIResolution(t *testing.T) {
	type want map[string]apiDecision
	d := func(allowed bool, cat string, line int, rule string) apiDecision {
		return apiDecision{Allowed: allowed, Category: cat, Rule: rule, Line: line}
	}
	const (
		pe = CatProcessExec
		th = CatThreads
		ds = CatDeserialization
		pc = CatProcessControl
	)
	tests := []struct {
		name     string
		text     string
		want     want
		disabled bool
	}{
		{
			name: "ALLOW:* disables the layer",
			text: "python-api=ALLOW:*",
			want: want{
				"os.system":     d(true, pe, 1, "python-api=ALLOW:*"),
				"builtins.eval": d(true, CatDynamicCode, 1, "python-api=ALLOW:*"),
			},
			disabled: true,
		},
		{
			name: "every * rule must ALLOW",
			text: "python-api=ALLOW:*\npython-api=DENY:*",
			want: want{
				"os.system":              d(false, pe, 2, "python-api=DENY:*"),
				"threading.Thread.start": d(false, th, 2, "python-api=DENY:*"),
			},
		},
		{
			name: "category overrides *",
			text: "python-api=ALLOW:*\npython-api=DENY:process-exec",
			want: want{
				"os.system":              d(false, pe, 2, "python-api=DENY:process-exec"),
				"posix.system":           d(false, pe, 2, "python-api=DENY:process-exec"),
				"threading.Thread.start": d(true, th, 1, "python-api=ALLOW:*"),
			},
		},
		{
			name: "category overrides * the other way",
			text: "python-api=ALLOW:threads\npython-api=DENY:*",
			want: want{
				"threading.Thread.start": d(true, th, 1, "python-api=ALLOW:threads"),
				"os.kill":                d(false, pc, 2, "python-api=DENY:*"),
			},
		},
		{
			name: "DENY wins among categories",
			text: "python-api=DENY:threads\npython-api=ALLOW:threads,process-control",
			want: want{
				"threading.Thread.start": d(false, th, 1, "python-api=DENY:threads"),
				"os.kill":                d(true, pc, 2, "python-api=ALLOW:threads,process-control"),
			},
		},
		{
			name: "function beats its category (deny)",
			text: "python-api=ALLOW:process-exec\npython-api=DENY:os.system",
			want: want{
				"os.system":      d(false, pe, 2, "python-api=DENY:os.system"),
				"subprocess.run": d(true, pe, 1, "python-api=ALLOW:process-exec"),
			},
		},
		{
			name: "function beats its category (allow), whatever the order",
			text: "python-api=ALLOW:os.system\npython-api=DENY:process-exec",
			want: want{
				"os.system":      d(true, pe, 1, "python-api=ALLOW:os.system"),
				"subprocess.run": d(false, pe, 2, "python-api=DENY:process-exec"),
			},
		},
		{
			name: "function beats a DENY:*",
			text: "python-api=DENY:*\npython-api=ALLOW:subprocess.run",
			want: want{
				"subprocess.run":   d(true, pe, 2, "python-api=ALLOW:subprocess.run"),
				"subprocess.Popen": d(false, pe, 1, "python-api=DENY:*"),
			},
		},
		{
			name: "DENY wins among functions",
			text: "python-api=ALLOW:os.kill\npython-api=DENY:os.kill\npython-api=ALLOW:os.kill",
			want: want{"os.kill": d(false, pc, 2, "python-api=DENY:os.kill")},
		},
		{
			name: "a function rule covers its twins",
			text: "python-api=ALLOW:os.system,signal.alarm,pickle.loads,_posixsubprocess.fork_exec,threading._start_joinable_thread",
			want: want{
				"os.system":                        d(true, pe, 1, "python-api=ALLOW:os.system,signal.alarm,pickle.loads,_posixsubprocess.fork_exec,threading._start_joinable_thread"),
				"posix.system":                     d(true, pe, 1, "python-api=ALLOW:os.system,signal.alarm,pickle.loads,_posixsubprocess.fork_exec,threading._start_joinable_thread"),
				"nt.system":                        d(true, pe, 1, "python-api=ALLOW:os.system,signal.alarm,pickle.loads,_posixsubprocess.fork_exec,threading._start_joinable_thread"),
				"_signal.alarm":                    d(true, pc, 1, "python-api=ALLOW:os.system,signal.alarm,pickle.loads,_posixsubprocess.fork_exec,threading._start_joinable_thread"),
				"_pickle.loads":                    d(true, ds, 1, "python-api=ALLOW:os.system,signal.alarm,pickle.loads,_posixsubprocess.fork_exec,threading._start_joinable_thread"),
				"subprocess._fork_exec":            d(true, pe, 1, "python-api=ALLOW:os.system,signal.alarm,pickle.loads,_posixsubprocess.fork_exec,threading._start_joinable_thread"),
				"_thread.start_joinable_thread":    d(true, th, 1, "python-api=ALLOW:os.system,signal.alarm,pickle.loads,_posixsubprocess.fork_exec,threading._start_joinable_thread"),
				"threading._start_joinable_thread": d(true, th, 1, "python-api=ALLOW:os.system,signal.alarm,pickle.loads,_posixsubprocess.fork_exec,threading._start_joinable_thread"),
				// Different functions stay denied.
				"pickle._loads":            d(false, ds, 0, ""),
				"os.popen":                 d(false, pe, 0, ""),
				"signal.setitimer":         d(false, pc, 0, ""),
				"_thread.start_new_thread": d(false, th, 0, ""),
			},
		},
		{
			name: "a rule on a twin decides for the canonical name",
			text: "python-api=ALLOW:posix.kill",
			want: want{
				"os.kill":    d(true, pc, 1, "python-api=ALLOW:posix.kill"),
				"nt.kill":    d(true, pc, 1, "python-api=ALLOW:posix.kill"),
				"posix.kill": d(true, pc, 1, "python-api=ALLOW:posix.kill"),
			},
		},
		{
			name: "twins are one function: DENY on a twin wins",
			text: "python-api=ALLOW:os.system\npython-api=DENY:posix.system",
			want: want{
				"os.system":    d(false, pe, 2, "python-api=DENY:posix.system"),
				"posix.system": d(false, pe, 2, "python-api=DENY:posix.system"),
				"nt.system":    d(false, pe, 2, "python-api=DENY:posix.system"),
			},
		},
		{
			name: "upstream spelling with both twins",
			text: "python-api=ALLOW:os.system,posix.system",
			want: want{
				"os.system":    d(true, pe, 1, "python-api=ALLOW:os.system,posix.system"),
				"posix.system": d(true, pe, 1, "python-api=ALLOW:os.system,posix.system"),
			},
		},
		{
			name: "targets are trimmed",
			text: "python-api= DENY : * , threads ",
			want: want{"os.system": d(false, pe, 1, "python-api= DENY : * , threads")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := apiTestParse(t, tt.text)
			if err != nil {
				t.Fatal(err)
			}
			got := want{}
			for name := range tt.want {
				got[name] = apiDecide(p, name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
			if p.API().Disabled() != tt.disabled {
				t.Errorf("Disabled() = %v", p.API().Disabled())
			}
		})
	}
}

// permutations calls f with every ordering of s (Heap's algorithm).
func apiPermutations(s []string, f func([]string)) {
	a := slices.Clone(s)
	c := make([]int, len(a))
	f(slices.Clone(a))
	for i := 0; i < len(a); {
		if c[i] < i {
			if i%2 == 0 {
				a[0], a[i] = a[i], a[0]
			} else {
				a[c[i]], a[i] = a[i], a[c[i]]
			}
			f(slices.Clone(a))
			c[i]++
			i = 0
		} else {
			c[i] = 0
			i++
		}
	}
}

func TestAPIOrderIndependence(t *testing.T) {
	// One rule decides each function at each level, so even the deciding rule must
	// not depend on the order.
	lines := []string{
		"python-api=ALLOW:*",
		"python-api=DENY:process-exec",
		"python-api=ALLOW:threads",
		"python-api=DENY:threads",
		"python-api=ALLOW:os.system,subprocess.run,pickle.loads",
		"python-api=DENY:posix.system",
	}
	names := slices.Sorted(maps.Keys(APIRegistry()))
	decide := func(order []string) map[string]apiDecision {
		p, err := apiTestParse(t, strings.Join(order, "\n"))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]apiDecision{}
		for _, n := range names {
			dd := apiDecide(p, n)
			dd.Line = 0 // the line moves with the order; the rule must not
			out[n] = dd
		}
		return out
	}
	first := decide(lines)
	// Spot checks of the expected result.
	for name, w := range map[string]apiDecision{
		"os.system":              {false, CatProcessExec, "python-api=DENY:posix.system", 0},
		"nt.system":              {false, CatProcessExec, "python-api=DENY:posix.system", 0},
		"subprocess.run":         {true, CatProcessExec, "python-api=ALLOW:os.system,subprocess.run,pickle.loads", 0},
		"subprocess.Popen":       {false, CatProcessExec, "python-api=DENY:process-exec", 0},
		"threading.Thread.start": {false, CatThreads, "python-api=DENY:threads", 0},
		"_pickle.loads":          {true, CatDeserialization, "python-api=ALLOW:os.system,subprocess.run,pickle.loads", 0},
		"pickle.load":            {true, CatDeserialization, "python-api=ALLOW:*", 0},
		"ctypes.CDLL":            {true, CatNative, "python-api=ALLOW:*", 0},
	} {
		if diff := cmp.Diff(w, first[name]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	n := 0
	apiPermutations(lines, func(order []string) {
		n++
		if diff := cmp.Diff(first, decide(order)); diff != "" {
			t.Fatalf("order %q changes the decisions (-first +this):\n%s", order, diff)
		}
	})
	if n != 720 {
		t.Errorf("%d permutations", n)
	}
}

func TestAPIOrderIndependenceAcrossIncludes(t *testing.T) {
	// A DENY in an included profile and an ALLOW in the project file decide the same
	// whichever comes first.
	for _, text := range []string{
		"python-api=ALLOW:threads\npython-api=DENY:threading.Thread.start",
		"python-api=DENY:threading.Thread.start\npython-api=ALLOW:threads",
	} {
		p, err := apiTestParse(t, text)
		if err != nil {
			t.Fatal(err)
		}
		if ok, _, _ := p.APIAllowed("threading.Thread.start"); ok {
			t.Errorf("%q: Thread.start allowed", text)
		}
		if ok, _, _ := p.APIAllowed("_thread.start_new_thread"); !ok {
			t.Errorf("%q: start_new_thread denied", text)
		}
	}
}

func TestAPICategory(t *testing.T) {
	p, err := apiTestParse(t, "python-api=ALLOW:*\npython-api=DENY:native\npython-api=ALLOW:ctypes.cast")
	if err != nil {
		t.Fatal(err)
	}
	a := p.API()
	for _, tc := range []struct {
		cat  string
		ok   bool
		line int
	}{
		{CatNative, false, 2}, {CatThreads, true, 1}, {CatDynamicCode, true, 1}, {"nope", false, 0},
	} {
		ok, r := a.Category(tc.cat)
		line := 0
		if r != nil {
			line = r.Ref.Line
		}
		if ok != tc.ok || line != tc.line {
			t.Errorf("Category(%s) = %v line %d, want %v line %d", tc.cat, ok, line, tc.ok, tc.line)
		}
	}
	if ok, _, _ := p.APIAllowed("ctypes.cast"); !ok {
		t.Error("ctypes.cast denied")
	}
	if a.Disabled() {
		t.Error("Disabled() with a DENY")
	}
	var none *APIPolicy
	if ok, r := none.Category(CatThreads); ok || r != nil || none.Disabled() || none.Rules() != nil {
		t.Error("nil APIPolicy is not deny-all")
	}
}

func TestAPIRulesRecorded(t *testing.T) {
	p, err := apiTestParse(t, "python-api=ALLOW: threads , os.kill\npython-api=DENY:*")
	if err != nil {
		t.Fatal(err)
	}
	type rule struct {
		Raw     string
		Line    int
		Action  Action
		Targets []string
	}
	var got []rule
	for _, r := range p.API().Rules() {
		got = append(got, rule{r.Raw, r.Ref.Line, r.Action, r.Targets})
	}
	want := []rule{
		{"python-api=ALLOW: threads , os.kill", 1, Allow, []string{"threads", "os.kill"}},
		{"python-api=DENY:*", 2, Deny, []string{"*"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("API().Rules() (-want +got):\n%s", diff)
	}
	var raws []string
	for _, r := range p.Rules() {
		if r.Key == "python-api" && !slices.Contains(raws, r.Raw) {
			raws = append(raws, r.Raw)
		}
	}
	if diff := cmp.Diff([]string{"python-api=ALLOW: threads , os.kill", "python-api=DENY:*"}, raws); diff != "" {
		t.Errorf("Rules() (-want +got):\n%s", diff)
	}
}

func TestAPIWarnings(t *testing.T) {
	const f = "/some/dir/.py-sandboxes"
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"harmless grants are quiet", "python-api=ALLOW:threads,introspection,process-control,os.system\npython-api=DENY:*", nil},
		{"dangerous category", "python-api=ALLOW:process-exec", []string{
			f + "(1): 'python-api=ALLOW:process-exec' grants the dangerous category process-exec (runs code outside the patched interpreter)",
		}},
		{"each dangerous category of a line", "python-api=ALLOW:native,threads,privileges,deserialization", []string{
			f + "(1): 'python-api=ALLOW:native,threads,privileges,deserialization' grants the dangerous category native (native code and arbitrary memory access)",
			f + "(1): 'python-api=ALLOW:native,threads,privileges,deserialization' grants the dangerous category privileges (changes process identity or root)",
			f + "(1): 'python-api=ALLOW:native,threads,privileges,deserialization' grants the dangerous category deserialization (runs the callables a byte stream names, unguarded)",
		}},
		{"dynamic-code", "python-api=ALLOW:dynamic-code", []string{
			f + "(1): 'python-api=ALLOW:dynamic-code' grants the dangerous category dynamic-code (runs code built at runtime from a string, unguarded); it wins over the eval-* rules",
		}},
		{"a DENY of the category silences the ALLOW", "python-api=ALLOW:process-exec\npython-api=DENY:process-exec", nil},
		{"ALLOW:*", "python-api=ALLOW:*", []string{
			f + "(1): 'python-api=ALLOW:*' turns the sensitive-API guard off: every sensitive function may be called, including the dangerous categories process-exec, privileges, native, dynamic-code, deserialization; eval/exec/compile run unguarded, whatever the eval-* rules",
		}},
		{"ALLOW:* with denied categories", "python-api=ALLOW:*\npython-api=DENY:process-exec,dynamic-code,native,privileges", []string{
			f + "(1): 'python-api=ALLOW:*' allows every sensitive function that no category or function rule denies, including the dangerous categories deserialization",
		}},
		{"ALLOW:* beaten by DENY:*", "python-api=ALLOW:*\npython-api=DENY:*", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := apiTestParse(t, tt.text)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range p.Warnings() {
				if strings.Contains(w.Msg, "python-api=") {
					got = append(got, w.String())
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAPICategories(t *testing.T) {
	want := []string{"process-exec", "process-control", "privileges", "threads", "native", "introspection", "dynamic-code", "deserialization"}
	if diff := cmp.Diff(want, APICategories()); diff != "" {
		t.Errorf("APICategories (-want +got):\n%s", diff)
	}
	help := map[string]string{}
	warned := map[string]bool{}
	for _, c := range APICategories() {
		help[c] = APICategoryHelp(c)
		warned[c] = APICategoryWarned(c)
	}
	wantHelp := map[string]string{
		"process-exec":    "runs code outside the patched interpreter",
		"process-control": "kills processes, exhausts host resources",
		"privileges":      "changes process identity or root",
		"threads":         "concurrency primitives",
		"native":          "native code and arbitrary memory access",
		"introspection":   "can be used to undo the patches",
		"dynamic-code":    "runs code built at runtime from a string, unguarded",
		"deserialization": "runs the callables a byte stream names, unguarded",
	}
	if diff := cmp.Diff(wantHelp, help); diff != "" {
		t.Errorf("help (-want +got):\n%s", diff)
	}
	wantWarned := map[string]bool{
		"process-exec": true, "process-control": false, "privileges": true, "threads": false,
		"native": true, "introspection": false, "dynamic-code": true, "deserialization": true,
	}
	if diff := cmp.Diff(wantWarned, warned); diff != "" {
		t.Errorf("warned (-want +got):\n%s", diff)
	}
	if APICategoryHelp("nope") != "" || APICategoryWarned("nope") {
		t.Error("unknown category has help or warning")
	}
	// The result is a copy.
	APICategories()[0] = "x"
	if APICategories()[0] != "process-exec" {
		t.Error("APICategories is not a copy")
	}
}

func TestAPIRegistry(t *testing.T) {
	reg := APIRegistry()
	// Every member of the reference table (rules-and-python-layer.md §1.8).
	table := map[string][]string{
		CatProcessExec: {
			"os.system", "os.popen", "os.execv", "os.execve", "os.execl", "os.execle", "os.execlp", "os.execlpe",
			"os.execvp", "os.execvpe", "os.spawnv", "os.spawnve", "os.spawnvp", "os.spawnvpe", "os.spawnl",
			"os.spawnle", "os.spawnlp", "os.spawnlpe", "os.posix_spawn", "os.posix_spawnp", "os.fork", "os.forkpty",
			"subprocess.Popen", "subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
			"subprocess.getoutput", "subprocess.getstatusoutput", "_posixsubprocess.fork_exec", "pty.spawn", "pty.fork",
			"multiprocessing.Process.start", "os.startfile", "_winapi.CreateProcess", "subprocess._fork_exec",
			// the loose entries, made concrete
			"multiprocessing.process.BaseProcess.start", "_interpreters.create", "_xxsubinterpreters.create",
			"concurrent.interpreters.create",
		},
		CatProcessControl: {
			"os.kill", "os.killpg", "os.nice", "os.setpriority", "os.abort", "os.setsid", "os.setpgid", "os.setpgrp",
			"signal.alarm", "signal.setitimer", "signal.raise_signal", "signal.pthread_kill",
			"_signal.alarm", "_signal.setitimer", "_signal.raise_signal", "_signal.pthread_kill",
			"resource.setrlimit", "resource.prlimit",
		},
		CatPrivileges: {
			"os.setuid", "os.setgid", "os.seteuid", "os.setegid", "os.setreuid", "os.setregid", "os.setgroups",
			"os.umask", "os.setresuid", "os.setresgid", "os.initgroups", "os.unshare", "os.setns",
		},
		CatThreads: {
			"_thread.start_new_thread", "_thread.start_new", "_thread.start_joinable_thread",
			"threading._start_joinable_thread", "threading._start_new_thread", "threading.Thread.start",
			"_thread.interrupt_main", "threading.settrace", "threading.setprofile", "threading.stack_size",
			"_thread.stack_size", "threading.settrace_all_threads", "threading.setprofile_all_threads",
		},
		CatNative: {"ctypes.CDLL", "ctypes.cast", "ctypes.string_at", "ctypes.wstring_at"},
		CatIntrospection: {
			"importlib.reload", "sys._getframe", "sys._getframemodulename", "sys._current_frames",
			"sys._current_exceptions", "sys.settrace", "sys.setprofile", "sys.addaudithook", "gc.get_objects",
			"gc.get_referrers", "gc.get_referents", "inspect.currentframe", "inspect.stack", "inspect.trace",
			"faulthandler.enable", "sys.monitoring.use_tool_id", "sys.remote_exec",
		},
		CatDynamicCode: {"builtins.eval", "builtins.exec", "builtins.compile"},
		CatDeserialization: {
			"pickle.loads", "pickle.load", "_pickle.loads", "_pickle.load", "pickle._loads", "pickle._Unpickler",
		},
	}
	for cat, names := range table {
		for _, n := range names {
			if got, ok := reg[n]; !ok || got != cat {
				t.Errorf("%s: category %q (registered %v), want %q", n, got, ok, cat)
			}
			if got, ok := APICategoryOf(n); !ok || got != cat {
				t.Errorf("APICategoryOf(%s) = %q, %v", n, got, ok)
			}
		}
	}
	// dynamic-code holds exactly three names (eval-transport-mcp.md §1.3).
	if diff := cmp.Diff([]string{"builtins.eval", "builtins.exec", "builtins.compile"}, APIFunctions(CatDynamicCode)); diff != "" {
		t.Errorf("dynamic-code (-want +got):\n%s", diff)
	}
	// Every os function defined in C has its posix twin, in the same category.
	for _, n := range []string{"system", "execv", "execve", "posix_spawn", "posix_spawnp", "fork", "forkpty", "kill",
		"killpg", "nice", "setpriority", "abort", "setsid", "setpgid", "setpgrp", "setuid", "setgid", "seteuid",
		"setegid", "setreuid", "setregid", "setgroups", "umask", "setresuid", "setresgid", "initgroups", "unshare", "setns"} {
		if reg["posix."+n] == "" || reg["posix."+n] != reg["os."+n] {
			t.Errorf("posix.%s: %q, os.%s: %q", n, reg["posix."+n], n, reg["os."+n])
		}
	}
	for _, n := range []string{"system", "execv", "execve", "spawnv", "spawnve", "startfile", "kill", "abort", "umask"} {
		if reg["nt."+n] == "" || reg["nt."+n] != reg["os."+n] {
			t.Errorf("nt.%s: %q, os.%s: %q", n, reg["nt."+n], n, reg["os."+n])
		}
	}
	// Not registered on purpose, or no such function.
	for _, n := range []string{"os._exit", "posix._exit", "signal.signal", "os.chroot", "ctypes.PyDLL",
		"posix.popen", "posix.execl", "nt.fork", "pickle.Unpickler", "builtins.__import__", "threads", ""} {
		if _, ok := reg[n]; ok {
			t.Errorf("%s is registered", n)
		}
		if _, ok := APICategoryOf(n); ok {
			t.Errorf("APICategoryOf(%s) ok", n)
		}
	}
	// The registry is in the upstream range ("145 sensitive functions"), and a copy.
	if n := len(reg); n < 145 || n > 170 {
		t.Errorf("registry has %d names", n)
	}
	delete(reg, "os.system")
	if _, ok := APIRegistry()["os.system"]; !ok {
		t.Error("APIRegistry is not a copy")
	}
	// Every name is a qualified name, in exactly one category's list.
	count := 0
	for _, c := range APICategories() {
		for _, n := range APIFunctions(c) {
			count++
			if !strings.Contains(n, ".") || APIRegistry()[n] != c {
				t.Errorf("APIFunctions(%s) holds %q", c, n)
			}
		}
	}
	if count != len(APIRegistry()) {
		t.Errorf("APIFunctions total %d, registry %d", count, len(APIRegistry()))
	}
	if APIFunctions("nope") != nil {
		t.Error("APIFunctions of an unknown category")
	}
}

func TestAPITwins(t *testing.T) {
	tests := map[string][]string{
		"os.system":                        {"posix.system", "nt.system"},
		"posix.system":                     {"os.system", "nt.system"},
		"nt.system":                        {"os.system", "posix.system"},
		"os.popen":                         nil,
		"os.fork":                          {"posix.fork"},
		"signal.alarm":                     {"_signal.alarm"},
		"_pickle.load":                     {"pickle.load"},
		"pickle._loads":                    nil,
		"subprocess._fork_exec":            {"_posixsubprocess.fork_exec"},
		"threading._start_new_thread":      {"_thread.start_new_thread", "_thread.start_new"},
		"threading._start_joinable_thread": {"_thread.start_joinable_thread"},
		"_thread.stack_size":               {"threading.stack_size"},
		"multiprocessing.Process.start":    {"multiprocessing.process.BaseProcess.start"},
		"_xxsubinterpreters.create":        {"_interpreters.create"},
		"unknown.name":                     nil,
	}
	for name, want := range tests {
		got := APITwins(name)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("APITwins(%s) (-want +got):\n%s", name, diff)
		}
		for _, tw := range got {
			if APIRegistry()[tw] != APIRegistry()[name] {
				t.Errorf("twin %s of %s in another category", tw, name)
			}
		}
	}
}

func TestAPIDoors(t *testing.T) {
	tests := map[string][]string{
		// The chain of the reference: getoutput → getstatusoutput → check_output → run →
		// Popen → fork_exec / posix_spawn (CreateProcess on Windows).
		"subprocess.getoutput": {"subprocess.getstatusoutput", "subprocess.check_output", "subprocess.run",
			"subprocess.Popen", "_posixsubprocess.fork_exec", "os.posix_spawn", "_winapi.CreateProcess"},
		"subprocess.check_call": {"subprocess.call", "subprocess.Popen", "_posixsubprocess.fork_exec",
			"os.posix_spawn", "_winapi.CreateProcess"},
		"subprocess.Popen": {"_posixsubprocess.fork_exec", "os.posix_spawn", "_winapi.CreateProcess"},
		"os.popen":         {"subprocess.Popen", "_posixsubprocess.fork_exec", "os.posix_spawn", "_winapi.CreateProcess"},
		// pty.spawn → pty.fork → os.forkpty / os.setsid / os.fork, then exec in the child.
		"pty.spawn":              {"pty.fork", "os.forkpty", "os.setsid", "os.fork", "os.execlp", "os.execvp", "os.execv"},
		"pty.fork":               {"os.forkpty", "os.setsid", "os.fork"},
		"threading.Thread.start": {"_thread.start_joinable_thread", "_thread.start_new_thread"},
		"os.spawnlp":             {"os.spawnvp", "os.fork", "os.execvp", "os.execv"},
		"os.execle":              {"os.execve"},
		"multiprocessing.process.BaseProcess.start": {"os.fork", "_posixsubprocess.fork_exec", "_winapi.CreateProcess"},
		"concurrent.interpreters.create":            {"_interpreters.create"},
		"threading.settrace_all_threads":            {"threading.settrace", "sys._settraceallthreads"},
		"inspect.stack":                             {"sys._getframe"},
		"pickle._loads":                             {"pickle._Unpickler"},
		"os.system":                                 nil,
		"posix.system":                              nil,
		"subprocess._fork_exec":                     nil,
		"builtins.eval":                             nil,
		"nope.nope":                                 nil,
	}
	for name, want := range tests {
		if diff := cmp.Diff(want, APIDoors(name)); diff != "" {
			t.Errorf("APIDoors(%s) (-want +got):\n%s", name, diff)
		}
	}
	if diff := cmp.Diff([]string{"subprocess.getstatusoutput"}, APINextDoors("subprocess.getoutput")); diff != "" {
		t.Errorf("APINextDoors (-want +got):\n%s", diff)
	}
	if APINextDoors("nope.nope") != nil || APINextDoors("os.system") != nil {
		t.Error("APINextDoors of a leaf")
	}
	// Every door is registered, never the function itself, and a twin has the same
	// doors as its canonical name.
	for name := range APIRegistry() {
		doors := APIDoors(name)
		for _, d := range doors {
			if _, ok := APICategoryOf(d); !ok {
				t.Errorf("door %s of %s is not registered", d, name)
			}
			if d == name || slices.Contains(APITwins(name), d) {
				t.Errorf("%s is its own door", name)
			}
		}
		for _, tw := range APITwins(name) {
			if !slices.Equal(doors, APIDoors(tw)) {
				t.Errorf("twins %s and %s have different doors", name, tw)
			}
		}
	}
}

func TestAPIDoorsRefusedWithOuterGrant(t *testing.T) {
	// Allowing only the outer name is refused on the inner door; the refusal names it.
	p, err := apiTestParse(t, "python-api=ALLOW:subprocess.run")
	if err != nil {
		t.Fatal(err)
	}
	var next string
	for _, d := range APIDoors("subprocess.run") {
		if ok, _, _ := p.APIAllowed(d); !ok {
			next = d
			break
		}
	}
	if next != "subprocess.Popen" {
		t.Fatalf("first denied door %q", next)
	}
	_, cat, _ := p.APIAllowed(next)
	want := "subprocess.Popen() is denied by the API guard (category: process-exec).\n" +
		"Add `python-api=ALLOW:subprocess.Popen` for this function only, or `python-api=ALLOW:process-exec` for the whole category."
	if got := APIRefusal(next, cat); got != want {
		t.Errorf("APIRefusal = %q", got)
	}
}

func TestAPIRefusal(t *testing.T) {
	want := "os.system() is denied by the API guard (category: process-exec).\n" +
		"Add `python-api=ALLOW:os.system` for this function only, or `python-api=ALLOW:process-exec` for the whole category."
	if got := APIRefusal("os.system", "process-exec"); got != want {
		t.Errorf("APIRefusal:\n got %q\nwant %q", got, want)
	}
}

func TestPyRepr(t *testing.T) {
	for in, want := range map[string]string{
		"thread": "'thread'", "it's": `"it's"`, `a'b"c`: `'a\'b"c'`, `back\slash`: `'back\\slash'`,
		"tab\there": `'tab\there'`, "\x01": `'\x01'`, "": "''", "é": "'é'",
	} {
		if got := pyRepr(in); got != want {
			t.Errorf("pyRepr(%q) = %s, want %s", in, got, want)
		}
	}
}

// FuzzAPIRule feeds arbitrary python-api= values to the loader: it must never panic
// or hang, must either accept the line or reject it with an "Invalid rule" error at
// its line, and an accepted policy must answer for every registered function.
func FuzzAPIRule(f *testing.F) {
	for _, s := range []string{
		"ALLOW:*", "DENY:*", "ALLOW:threads", "DENY:process-exec,os.system", "ALLOW:os.system,posix.system",
		"ALLOW", "", ":", "ALLOW:", "ALLOW:,", "ALLOW:threads,DENY:native", "PERMIT:x", "ALLOW:os.sytem",
		"ALLOW:${X}", "ALLOW:${X:-threads}", "DENY: * , threads ", "ALLOW:it's", "ALLOW:\x00", "ALLOW:é.é",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		// One line: a newline would start another rule of any family.
		value = strings.NewReplacer("\n", " ", "\r", " ").Replace(value)
		p, err := apiTestParse(t, "python-api="+value)
		if err != nil {
			var all ConfigErrors
			if !errors.As(err, &all) {
				t.Fatalf("error %T: %v", err, err)
			}
			for _, c := range all {
				if c.Ref.Line != 1 {
					t.Fatalf("error at line %d: %v", c.Ref.Line, c)
				}
			}
			return
		}
		a := p.API()
		if a == nil {
			t.Fatal("nil API()")
		}
		for name, cat := range apiCategoryOf {
			ok, c, r := p.APIAllowed(name)
			if c != cat {
				t.Fatalf("%s: category %q", name, c)
			}
			if ok && r == nil {
				t.Fatalf("%s allowed without a rule", name)
			}
		}
	})
}
