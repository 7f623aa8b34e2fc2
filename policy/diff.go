package policy

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The review gate: what a change to a profile grants.
//
// Diff compares two loaded policies by what they allow, never by their text: a
// rule moved to an included file, re-spelled (./data for /abs/data) or already
// covered (an expose-ro= under an exposed directory, a python-api function whose
// category is allowed) grants nothing, while a change that reads as harmless may
// grant a lot (an expose-rw= of the parent of a read-only directory, a DENY or an
// unenv= removed). Each grant is graded low, medium or high with its reason; the
// grading tables are in diff_grade.go, the network comparison in diff_net.go, and
// the review and approval of a learned file in diff_learned.go.

// Risk grades what a change grants.
type Risk uint8

const (
	// RiskNone: the change grants nothing (the zero value; never the grade of a
	// Grant).
	RiskNone Risk = iota
	// RiskLow: a narrow grant, such as a read-only data directory or a standard
	// module.
	RiskLow
	// RiskMedium: a grant to review, such as a read-write directory, a host and
	// port, a sensitive function or a secret-looking variable.
	RiskMedium
	// RiskHigh: a grant that can undo the sandbox or reach everything, such as
	// expose-rw=/, python-api=ALLOW:process-exec, net=ALLOW|*|*|*|OUT,
	// python-import=ctypes or eval-call=__import__.
	RiskHigh
)

var riskNames = [...]string{"none", "low", "medium", "high"}

// String returns "none", "low", "medium" or "high".
func (r Risk) String() string {
	if int(r) < len(riskNames) {
		return riskNames[r]
	}
	return fmt.Sprintf("Risk(%d)", uint8(r))
}

// MarshalText renders the risk as String does.
func (r Risk) MarshalText() ([]byte, error) {
	if int(r) >= len(riskNames) {
		return nil, fmt.Errorf("policy: invalid risk %d", uint8(r))
	}
	return []byte(riskNames[r]), nil
}

// UnmarshalText reads "none", "low", "medium" or "high".
func (r *Risk) UnmarshalText(b []byte) error {
	i := slices.Index(riskNames[:], string(b))
	if i < 0 {
		return fmt.Errorf("policy: unknown risk %q (none, low, medium or high)", b)
	}
	*r = Risk(i)
	return nil
}

// The families of a Grant.
const (
	FamilyFiles    = "files"         // expose-ro=, expose-rw=
	FamilyIgnore   = "ignore"        // ignore= removed
	FamilyEnv      = "env"           // env=, unenv= removed
	FamilyNet      = "net"           // net=
	FamilyImport   = "python-import" // python-import=
	FamilyAPI      = "python-api"    // python-api=
	FamilyEval     = "eval"          // eval-*
	FamilyControl  = "control"       // os-sandbox=, py-sandbox=, learn=, remote-result-*=
	FamilyInclude  = "include"       // include "FILE"
	FamilyProvider = "provider"      // PROVIDER.PARAM=
)

// Grant is one thing the new profile allows that the old one did not.
type Grant struct {
	Risk Risk
	// Family is one of the Family constants.
	Family string
	// Grant names what is granted, as a rule line: the rule as written for most
	// families ("expose-rw=/", "net=ALLOW|tcp|*|*|OUT"), the one module, target or
	// token for the lines that list several ("python-import=ctypes",
	// "python-api=ALLOW:process-exec", "eval-call=__import__"), `include "FILE"`,
	// and "-" followed by the old rule for a grant that comes from a rule removed
	// ("-learn=false", "-ignore=.env"). Approval names a high-risk grant by it.
	Grant string
	// Rule is the rule of the new profile that grants it, or, when Removed, the
	// rule of the old profile whose removal grants it.
	Rule    Rule
	Removed bool
	// Reason says what is granted and why it has this grade.
	Reason string
}

// Changes is what Diff found.
type Changes struct {
	// Grants are the grants of the new profile, riskiest first, then in the order
	// of its rules.
	Grants []Grant
	// Removed are the rules of the old profile that the new one no longer holds as
	// written, in load order. A removal narrows the profile unless Grants lists it.
	Removed []Rule
}

// Highest returns the grade of the riskiest grant, RiskNone when nothing is
// granted.
func (c *Changes) Highest() Risk {
	h := RiskNone
	if c == nil {
		return h
	}
	for _, g := range c.Grants {
		h = max(h, g.Risk)
	}
	return h
}

// Count returns the number of grants of grade r.
func (c *Changes) Count(r Risk) int {
	n := 0
	if c == nil {
		return n
	}
	for _, g := range c.Grants {
		if g.Risk == r {
			n++
		}
	}
	return n
}

// DiffOptions tune Diff. The zero value grades paths against the process's home
// directory.
type DiffOptions struct {
	// Home is the home directory whose credentials a grant may reach. "" means
	// os.UserHomeDir().
	Home string
}

// Diff returns what after grants that before did not, each grant graded (see
// Grant and Risk). Both policies must have been loaded on this machine (their
// directories resolved, their host names pinned); a nil policy is one that grants
// nothing. A host name means what either load pinned for it. Which include lines
// a file holds is not kept by a loaded policy: Diff sees an included file by the
// rules it contributes (DiffFiles and ReviewLearned also see an include of a
// missing or empty file).
func Diff(before, after *Policy, opts *DiffOptions) *Changes {
	return diffPolicies(before, after, opts, nil, nil)
}

// diffPolicies is Diff, with the texts of the main files when known (their
// include lines are compared too).
func diffPolicies(before, after *Policy, opts *DiffOptions, beforeText, afterText []byte) *Changes {
	if before == nil {
		before = &Policy{}
	}
	if after == nil {
		after = &Policy{}
	}
	d := &differ{b: before, a: after}
	home := ""
	if opts != nil {
		home = opts.Home
	}
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	if home != "" {
		if real, err := filepath.EvalSymlinks(home); err == nil {
			home = real
		}
		d.home = filepath.Clean(home)
	}
	d.files()
	d.ignores()
	d.env()
	d.net()
	d.imports()
	d.api()
	d.eval()
	d.control()
	d.providers()
	d.includes(beforeText, afterText)

	c := &Changes{Grants: d.out}
	slices.SortStableFunc(c.Grants, func(x, y Grant) int {
		if x.Risk != y.Risk {
			return cmp.Compare(y.Risk, x.Risk)
		}
		if x.Removed != y.Removed {
			if x.Removed {
				return 1
			}
			return -1
		}
		if o := compareRefs(x.Rule.Ref, y.Rule.Ref); o != 0 {
			return o
		}
		return cmp.Compare(x.Grant, y.Grant)
	})
	c.Grants = slices.CompactFunc(c.Grants, func(x, y Grant) bool {
		return x.Grant == y.Grant && x.Reason == y.Reason && x.Risk == y.Risk
	})
	kept := map[string]bool{}
	for _, r := range after.rules {
		kept[strings.TrimSpace(r.Raw)] = true
	}
	for _, r := range before.rules {
		if !kept[strings.TrimSpace(r.Raw)] {
			c.Removed = append(c.Removed, r)
		}
	}
	return c
}

// compareRefs orders rules given by code first, then by file and line.
func compareRefs(a, b Ref) int {
	if a.IsArg() != b.IsArg() {
		if a.IsArg() {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(a.File, b.File); c != 0 {
		return c
	}
	return cmp.Compare(a.Line, b.Line)
}

// differ holds one comparison.
type differ struct {
	b, a *Policy
	home string // canonical, or ""
	out  []Grant
}

func (d *differ) add(g Grant) { d.out = append(d.out, g) }

// show renders a canonical path for a reason: ~/x under the home directory.
func (d *differ) show(path string) string { return displayPath(path, "", d.home) }

// ---- files ----

// files finds the directories whose access grows. The access of a path is the
// mode of the deepest exposed directory holding it (as every provider enforces
// it). A directory D exposed by the new profile governs its tree, but for the
// directories exposed deeper in it; it grants something new when D, or a
// directory the old profile exposed under D that now falls to D's rule, had a
// weaker mode (or none) before.
func (d *differ) files() {
	for _, e := range d.a.exposes {
		type point struct {
			path string
			was  *Expose
		}
		var points []point
		add := func(p string) {
			var was *Expose
			if o, ok := d.b.Exposed(p); ok {
				was = &o
			}
			if was == nil || was.Mode < e.Mode {
				points = append(points, point{p, was})
			}
		}
		add(e.Path)
		for _, o := range d.b.exposes {
			if o.Path == e.Path || !pathUnder(o.Path, e.Path) {
				continue
			}
			if deep, ok := d.a.Exposed(o.Path); ok && deep.Path == e.Path {
				add(o.Path)
			}
		}
		for _, p := range points {
			risk, why := hostDependent(e.Raw, e.Value)(gradeDir(p.path, e.Mode, d.home))
			var what string
			switch {
			case p.path == e.Path && p.was == nil:
				what = fmt.Sprintf("exposes %s %s", d.show(p.path), e.Mode.words())
			case p.path == e.Path:
				what = fmt.Sprintf("makes %s %s (%s before, by '%s')", d.show(p.path), e.Mode.words(), p.was.Mode.words(), p.was.Raw)
			case p.was == nil:
				what = fmt.Sprintf("exposes %s %s", d.show(p.path), e.Mode.words())
			default:
				what = fmt.Sprintf("makes %s %s: '%s' kept it %s, and the new profile drops it", d.show(p.path), e.Mode.words(), p.was.Raw, p.was.Mode.words())
			}
			d.add(Grant{Risk: risk, Family: FamilyFiles, Grant: e.Raw, Rule: e.Rule, Reason: what + ": " + why})
		}
	}
}

// hostDependent returns a grading that adds, for a rule whose value reads host
// variables (raw holds "${"), that the grant follows their values at each
// launch, and grades it at least medium: the review sees today's values only
// (value is the rule's value as loaded).
func hostDependent(raw, value string) func(Risk, string) (Risk, string) {
	return func(r Risk, why string) (Risk, string) {
		refs := envRefs(raw)
		if len(refs) == 0 {
			return r, why
		}
		return max(r, RiskMedium), fmt.Sprintf("%s (the rule reads %s from the host's environment: this is what it gives now, %s; another value at launch grants something else)",
			why, "${"+strings.Join(refs, "}, ${")+"}", strings.TrimSpace(value))
	}
}

// pathUnder reports whether path lies strictly under dir (both clean and absolute).
func pathUnder(path, dir string) bool {
	if dir == "/" {
		return path != "/" && strings.HasPrefix(path, "/")
	}
	return strings.HasPrefix(path, dir+"/")
}

// within reports whether path is dir or lies under it.
func within(path, dir string) bool { return path == dir || pathUnder(path, dir) }

// ignores reports the ignore= patterns the new profile drops: what they hid
// becomes visible wherever a rule exposes it.
func (d *differ) ignores() {
	kept := map[string]bool{}
	for _, ig := range d.a.ignores {
		kept[ig.Pattern] = true
	}
	seen := map[string]bool{}
	for _, ig := range d.b.ignores {
		if kept[ig.Pattern] || seen[ig.Pattern] {
			continue
		}
		seen[ig.Pattern] = true
		d.add(Grant{Risk: RiskMedium, Family: FamilyIgnore, Grant: "-" + ig.Raw, Rule: ig.Rule, Removed: true,
			Reason: fmt.Sprintf("'%s' is removed: the files it hid (%s) become visible wherever a rule exposes them", ig.Raw, ig.Pattern)})
	}
}

// ---- environment ----

// env finds the variables whose value is new: for every name a rule of either
// profile names exactly, the rule that sets it now against the one before (an
// unenv= removed shows up here); then every pattern rule that the old profile
// did not hold, or whose unenv= exceptions are gone.
func (d *differ) env() {
	type index struct {
		exact map[string][]*EnvRule
		pats  []*EnvRule
	}
	build := func(p *Policy) index {
		ix := index{exact: map[string][]*EnvRule{}}
		if p.env == nil {
			return ix
		}
		for i := range p.env.rules {
			e := &p.env.rules[i]
			if e.Pattern() {
				ix.pats = append(ix.pats, e)
			} else {
				ix.exact[e.Name] = append(ix.exact[e.Name], e)
			}
		}
		return ix
	}
	bi, ai := build(d.b), build(d.a)
	names := map[string]bool{}
	for n := range bi.exact {
		names[n] = true
	}
	for n := range ai.exact {
		names[n] = true
	}
	for _, name := range slices.Sorted(mapKeys(names)) {
		ar, ok := decideEnv(name, ai.exact[name], ai.pats)
		if !ok {
			continue
		}
		v := envExpr(ar, name)
		if v == "" {
			continue // sets nothing
		}
		var before string
		br, bok := decideEnv(name, bi.exact[name], bi.pats)
		if bok {
			before = envExpr(br, name)
			if before == v {
				continue
			}
		}
		risk, why := gradeEnv(name, v, ar.Pattern())
		what := fmt.Sprintf("sets %s=%s", name, v)
		switch {
		case bok && before != "":
			what += fmt.Sprintf(" (%s before)", before)
		case len(bi.exact[name]) > 0:
			what += " (an unenv= removed it before)"
		}
		d.add(Grant{Risk: risk, Family: FamilyEnv, Grant: ar.Raw, Rule: ar.Rule, Reason: what + ": " + why})
	}
	for _, p := range ai.pats {
		if p.Unset {
			continue
		}
		same := false
		for _, q := range bi.pats {
			if !q.Unset && q.Name == p.Name && q.Value == p.Value {
				same = true
				break
			}
		}
		v := envExpr(p, p.Name)
		if !same {
			risk, why := gradeEnv(p.Name, v, true)
			d.add(Grant{Risk: risk, Family: FamilyEnv, Grant: p.Raw, Rule: p.Rule, Reason: fmt.Sprintf("sets %s=%s: %s", p.Name, v, why)})
			continue
		}
		// The same pattern: an exception of the old profile (unenv=) that the new
		// one drops opens the names it removed.
		for _, u := range bi.pats {
			if !u.Unset || !starOverlap(u.Name, p.Name) || slices.ContainsFunc(ai.pats, func(x *EnvRule) bool { return x.Unset && x.Name == u.Name }) {
				continue
			}
			risk, why := gradeEnv(p.Name, v, true)
			d.add(Grant{Risk: risk, Family: FamilyEnv, Grant: p.Raw, Rule: p.Rule,
				Reason: fmt.Sprintf("sets the variables matching %s that '%s' removed before: %s", u.Name, u.Raw, why)})
		}
	}
}

// envExpr is the value rule e gives the variable name, as written ("${NAME}" for a
// pattern that copies the host's values).
func envExpr(e *EnvRule, name string) string {
	if e.Pattern() && e.Value == "${"+e.Name+"}" {
		return "${" + name + "}"
	}
	return e.Value
}

// envRefs returns the host variables a value reads (${NAME}, ${NAME:-default},
// nested ones included), in order, without duplicates.
func envRefs(v string) []string {
	var out []string
	for {
		i := strings.Index(v, "${")
		if i < 0 {
			return out
		}
		v = v[i+2:]
		j := strings.IndexAny(v, ":}")
		if j < 0 {
			j = len(v)
		}
		if name := v[:j]; name != "" && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
}

// starOverlap reports whether some text matches both '*' patterns.
func starOverlap(p, q string) bool {
	seen := map[[2]int]bool{}
	var walk func(i, j int) bool
	walk = func(i, j int) bool {
		k := [2]int{i, j}
		if seen[k] {
			return false
		}
		seen[k] = true
		switch {
		case i == len(p) && j == len(q):
			return true
		case i < len(p) && p[i] == '*':
			return walk(i+1, j) || j < len(q) && walk(i, j+1) || j < len(q) && q[j] == '*' && walk(i+1, j+1)
		case j < len(q) && q[j] == '*':
			return walk(i, j+1) || i < len(p) && walk(i+1, j)
		case i < len(p) && j < len(q) && p[i] == q[j]:
			return walk(i+1, j+1)
		}
		return false
	}
	return walk(0, 0)
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// ---- imports ----

func (d *differ) imports() {
	ai, bi := d.a.Imports(), d.b.Imports()
	if bi.All() {
		return
	}
	if ai.All() {
		risk, why := gradeImport("*")
		d.add(Grant{Risk: risk, Family: FamilyImport, Grant: "python-import=*", Rule: *ai.AllRule(), Reason: why})
		return
	}
	if ai == nil {
		return
	}
	for _, m := range ai.Modules() {
		if ok, _ := bi.Allowed(m); ok {
			continue
		}
		risk, why := gradeImport(m)
		d.add(Grant{Risk: risk, Family: FamilyImport, Grant: "python-import=" + m, Rule: *ai.modules[m], Reason: why})
	}
}

// ---- python-api ----

// api compares the decision of every registered function: the functions the new
// profile allows and the old one did not, grouped by the rule and the target
// (a function, a category or "*") that allows them.
func (d *differ) api() {
	type key struct {
		rule   *Rule
		target string
	}
	var order []key
	funcs := map[key][]string{}
	for _, q := range slices.Sorted(mapKeys(apiFuncs)) {
		ok, cat, rule := d.a.APIAllowed(q)
		if !ok || rule == nil {
			continue
		}
		if was, _, _ := d.b.APIAllowed(q); was {
			continue
		}
		target := "*"
		if _, ok := d.a.api.funcs[q]; ok {
			target = q
		} else if _, ok := d.a.api.cats[cat]; ok {
			target = cat
		}
		k := key{rule, target}
		if _, seen := funcs[k]; !seen {
			order = append(order, k)
		}
		funcs[k] = append(funcs[k], q)
	}
	for _, k := range order {
		risk, why := gradeAPI(k.target, funcs[k])
		d.add(Grant{Risk: risk, Family: FamilyAPI, Grant: "python-api=ALLOW:" + k.target, Rule: *k.rule, Reason: why})
	}
}

// ---- eval-* ----

// eval compares each eval profile of the new policy with the profile of the same
// name before (a profile the old policy does not declare allows nothing): the
// names each list key now allows, the namespace mode, and the budgets.
func (d *differ) eval() {
	ae, be := d.a.Eval(), d.b.Eval()
	if ae.State() == EvalGuarded && be.State() == EvalRefused {
		p, _ := ae.Profile("")
		if len(p.Rules) > 0 {
			d.add(Grant{Risk: RiskLow, Family: FamilyEval, Grant: p.Rules[0].Raw, Rule: p.Rules[0],
				Reason: "eval, exec and compile run code strings, under the eval guard (refused before): the other eval-* grants say what that code may use"})
		}
	}
	for _, name := range ae.Names() {
		ap, _ := ae.Profile(name)
		bp, ok := be.Profile(name)
		if !ok {
			bp = nil
		}
		for _, k := range evalListKeys {
			d.evalList(ap, bp, k)
		}
		d.evalScalars(ap, bp)
	}
}

// evalSet returns the NameSet of key in p, and the zero NameSet for a nil p.
func evalSet(p *EvalProfile, key string) NameSet {
	if p == nil {
		return NameSet{key: key}
	}
	switch key {
	case evalSyntaxKey:
		return p.Syntax
	case evalCallKey:
		return p.Call
	case evalAttributeKey:
		return p.Attribute
	case evalImportKey:
		return p.Import
	}
	return p.Magic
}

// evalVocab are the names a pattern token is tried against: those whose grant
// matters.
func evalVocab(key string) []string {
	switch key {
	case evalSyntaxKey:
		return EvalNodes()
	case evalCallKey:
		return evalBuiltins
	case evalAttributeKey:
		return []string{"format", "format_map"}
	case evalImportKey:
		return append(DangerousImports(), "os", "sys", "socket", "builtins", "shutil", "pickle", "marshal", "runpy", "gc")
	}
	return evalHierarchyDunders
}

func (d *differ) evalList(ap, bp *EvalProfile, key string) {
	as, bs := evalSet(ap, key), evalSet(bp, key)
	label := key + evalSuffix(ap.Name)
	for _, t := range as.allow {
		var names []string
		switch {
		case key == evalAttributeKey && strings.Contains(t, "-"):
			// A group of the interpreter's names: new unless the old profile
			// names the same group.
			if !slices.Contains(bs.allow, t) {
				names = []string{t}
			}
		case strings.Contains(t, "*"):
			for _, n := range evalVocab(key) {
				if starMatch(t, n) && as.Allows(n) && !bs.Allows(n) {
					names = append(names, n)
				}
			}
			if len(names) == 0 && !slices.Contains(bs.allow, t) {
				names = []string{t}
			}
		case key == evalSyntaxKey && evalSyntaxGroups[t] != nil:
			for _, n := range evalSyntaxGroups[t] {
				if as.Allows(n) && !bs.Allows(n) {
					names = append(names, n)
				}
			}
		default:
			if as.Allows(t) && !bs.Allows(t) {
				names = []string{t}
			}
		}
		if len(names) == 0 {
			continue
		}
		risk, why := gradeEval(key, t, names)
		d.add(Grant{Risk: risk, Family: FamilyEval, Grant: label + "=" + t, Rule: evalTokenRule(ap, key, t), Reason: why})
	}
}

// evalTokenRule returns the rule of p that allows token t of key.
func evalTokenRule(p *EvalProfile, key, t string) Rule {
	for _, r := range p.Rules {
		k, _, _ := strings.Cut(r.Key, ":")
		v := strings.TrimSpace(r.Value)
		if k != key || strings.HasPrefix(v, "DENY:") {
			continue
		}
		for tok := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(tok) == t {
				return r
			}
		}
	}
	if len(p.Rules) > 0 {
		return p.Rules[0]
	}
	return Rule{}
}

func (d *differ) evalScalars(ap, bp *EvalProfile) {
	base := bp
	if base == nil {
		base = DefaultEvalProfile()
	}
	rule := func(key string) Rule {
		for _, r := range ap.Rules {
			if k, _, _ := strings.Cut(r.Key, ":"); k == key {
				return r
			}
		}
		return Rule{}
	}
	if ap.Namespace != base.Namespace && ap.Namespace != "closed" {
		r := rule(evalNamespaceKey)
		risk, why := RiskLow, fmt.Sprintf("the evaluated code sees the names the caller passes and the allowed builtins (%s before)", base.Namespace)
		if ap.Namespace == "caller" {
			risk, why = RiskHigh, "evaluated code runs with the raw builtins: no validation, no rewrite and no budgets (for debugging only)"
		}
		d.add(Grant{Risk: risk, Family: FamilyEval, Grant: r.Raw, Rule: r, Reason: why})
	}
	budgets := []struct {
		key      string
		was, now int64
		show     func(int64) string
	}{
		{evalTimeoutKey, int64(base.Timeout), int64(ap.Timeout), func(n int64) string { return time.Duration(n).String() }},
		{"eval-max-iterations", base.MaxIterations, ap.MaxIterations, evalUnderscore},
		{"eval-max-call-depth", base.MaxCallDepth, ap.MaxCallDepth, evalUnderscore},
		{"eval-max-depth", base.MaxDepth, ap.MaxDepth, evalUnderscore},
		{"eval-max-nodes", base.MaxNodes, ap.MaxNodes, evalUnderscore},
		{evalAllocKey, base.MaxAlloc, ap.MaxAlloc, func(n int64) string { return evalUnderscore(n) + " bytes" }},
		{evalLeakedKey, int64(base.MaxLeakedThreads), int64(ap.MaxLeakedThreads), evalUnderscore},
	}
	for _, b := range budgets {
		if b.now <= b.was {
			continue
		}
		r := rule(b.key)
		d.add(Grant{Risk: RiskLow, Family: FamilyEval, Grant: r.Raw, Rule: r,
			Reason: fmt.Sprintf("raises the budget %s%s from %s to %s", b.key, evalSuffix(ap.Name), b.show(b.was), b.show(b.now))})
	}
}

// ---- control keys ----

func (d *differ) control() {
	if a, ar := d.a.OSSandbox(); ar != nil {
		b, _ := d.b.OSSandbox()
		if a != b && osSandboxRank(a) >= osSandboxRank(b) {
			risk, why := gradeOSSandbox(a, b)
			d.add(Grant{Risk: risk, Family: FamilyControl, Grant: ar.Raw, Rule: *ar, Reason: why})
		} else if _, br := d.b.OSSandbox(); strings.Contains(ar.Raw, "${") && (br == nil || !strings.Contains(br.Raw, "${")) {
			d.add(Grant{Risk: RiskMedium, Family: FamilyControl, Grant: ar.Raw, Rule: *ar,
				Reason: fmt.Sprintf("the host environment chooses the OS provider (%s now): a variable set to none or subprocess takes the OS sandbox away", a)})
		}
	}
	if on, r := d.a.PySandbox(); !on {
		if was, _ := d.b.PySandbox(); was {
			d.add(Grant{Risk: RiskHigh, Family: FamilyControl, Grant: r.Raw, Rule: *r,
				Reason: "turns the Python layer off: imports, python-api and eval-* are no longer enforced, and files and network rest on the OS provider alone"})
		}
	}
	if on, r := d.a.RemoteResultGuard(); !on {
		if was, _ := d.b.RemoteResultGuard(); was {
			d.add(Grant{Risk: RiskHigh, Family: FamilyControl, Grant: r.Raw, Rule: *r,
				Reason: "turns the gadget denylist of the result channel off"})
		}
	}
	if m, r := d.a.RemoteResultMode(); m == Objects && r != nil {
		if was, _ := d.b.RemoteResultMode(); was != Objects {
			d.add(Grant{Risk: RiskHigh, Family: FamilyControl, Grant: r.Raw, Rule: *r,
				Reason: "results may be application objects: the sandbox chooses which classes the host reconstructs"})
		}
	}
	if f, r := d.a.Learn(); f != "" {
		if was, _ := d.b.Learn(); was == "" {
			d.add(Grant{Risk: RiskHigh, Family: FamilyControl, Grant: r.Raw, Rule: *r,
				Reason: "learns on every launch: nothing is enforced, and what the program does is written into the rules"})
		}
	}
	if lock := d.b.Locked(); lock != nil && d.a.Locked() == nil {
		d.add(Grant{Risk: RiskHigh, Family: FamilyControl, Grant: "-" + lock.Raw, Rule: *lock, Removed: true,
			Reason: "the lock is removed: learning, and rules added by code or on the command line, are allowed again"})
	}
}

// osSandboxRank orders the OS providers by how little they confine: none, then
// subprocess, then every real provider (which refuses to start unless it
// enforces every rule). A change to a lower rank narrows the profile.
func osSandboxRank(name string) int {
	switch name {
	case "none":
		return 2
	case "subprocess":
		return 1
	}
	return 0
}

// providers reports the provider parameters that are new.
func (d *differ) providers() {
	had := map[string]bool{}
	for _, ps := range d.b.provider {
		for _, p := range ps {
			had[strings.TrimSpace(p.Raw)] = true
		}
	}
	for _, name := range slices.Sorted(mapKeys(d.a.provider)) {
		for _, p := range d.a.provider[name] {
			if had[strings.TrimSpace(p.Raw)] {
				continue
			}
			risk, why := gradeProviderParam(p)
			d.add(Grant{Risk: risk, Family: FamilyProvider, Grant: p.Raw, Rule: p.Rule, Reason: why})
		}
	}
	// A parameter the new profile no longer passes: a limit or a hardening
	// option it set is gone.
	has := map[string]bool{}
	for _, ps := range d.a.provider {
		for _, p := range ps {
			has[p.Provider+"."+p.Name] = true
		}
	}
	for _, name := range slices.Sorted(mapKeys(d.b.provider)) {
		for _, p := range d.b.provider[name] {
			if has[p.Provider+"."+p.Name] {
				continue
			}
			has[p.Provider+"."+p.Name] = true
			d.add(Grant{Risk: RiskMedium, Family: FamilyProvider, Grant: "-" + p.Raw, Rule: p.Rule, Removed: true,
				Reason: fmt.Sprintf("'%s' is removed: the %s provider's default applies again; if it set a limit or hardened the sandbox, that is gone", p.Raw, name)})
		}
	}
}

// includes reports the files the new profile takes rules from that the old one
// did not: a later change of such a file widens the profile without a review of
// its own. With the texts of the main files, an include line naming a missing or
// empty file counts too.
func (d *differ) includes(beforeText, afterText []byte) {
	files := func(p *Policy) map[string]Rule {
		m := map[string]Rule{}
		for _, r := range p.rules {
			if !r.Ref.IsArg() && r.Ref.File != p.Path {
				if _, ok := m[r.Ref.File]; !ok {
					m[r.Ref.File] = r
				}
			}
		}
		return m
	}
	bf, af := files(d.b), files(d.a)
	specs := func(text []byte) map[string]int {
		m := map[string]int{}
		for i, l := range strings.Split(string(text), "\n") {
			if s := includeRE.FindStringSubmatch(stripComment(l)); s != nil {
				if _, ok := m[s[1]]; !ok {
					m[s[1]] = i + 1
				}
			}
		}
		return m
	}
	reported := map[string]bool{}
	if afterText != nil {
		bs, as := specs(beforeText), specs(afterText)
		for _, spec := range slices.Sorted(mapKeys(as)) {
			if _, ok := bs[spec]; ok {
				continue
			}
			line := fmt.Sprintf("include %q", spec)
			n := 0
			for file := range af {
				if filepath.Base(spec) == filepath.Base(file) {
					reported[file] = true
					n++
				}
			}
			state := "it is missing or grants nothing today"
			if n > 0 {
				state = "its rules are graded here"
			}
			ref := Ref{File: d.a.Path, Line: as[spec], Name: d.a.Path}
			for _, r := range d.a.rules {
				if r.Ref.File == d.a.Path {
					ref.Name = r.Ref.Name
					break
				}
			}
			d.add(Grant{Risk: RiskMedium, Family: FamilyInclude, Grant: line, Rule: Rule{Ref: ref, Key: "include", Value: spec, Raw: line},
				Reason: fmt.Sprintf("the profile takes the rules of %s (%s): a later change of that file widens the profile without a review", spec, state)})
		}
	}
	for _, file := range slices.Sorted(mapKeys(af)) {
		if _, ok := bf[file]; ok || reported[file] {
			continue
		}
		r := af[file]
		line := fmt.Sprintf("include %q", r.Ref.Name)
		d.add(Grant{Risk: RiskMedium, Family: FamilyInclude, Grant: line, Rule: Rule{Ref: Ref{File: file, Name: r.Ref.Name}, Key: "include", Value: file, Raw: line},
			Reason: fmt.Sprintf("the profile takes rules from %s (graded here): a later change of that file widens the profile without a review", r.Ref.Name)})
	}
}
