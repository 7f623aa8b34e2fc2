package policy

import (
	"fmt"
	"slices"
	"strings"
)

// APIRule is one accepted python-api= line.
type APIRule struct {
	Rule
	// Action is Allow or Deny.
	Action Action
	// Targets are the line's targets as written (spaces trimmed): "*", categories and
	// registered function names.
	Targets []string
}

// APIPolicy is the resolved python-api= rule set: a decision for every function of
// the registry (see APIRegistry).
//
// Resolution does not depend on the order of the lines (nor on the files they come
// from): every registered function is denied by default; the "*" rules decide for
// all (allowed only if every "*" rule is ALLOW); a category rule overrides "*" for
// the functions of its category; a function rule overrides its category. At each of
// these three levels DENY wins over ALLOW. A function rule names a function object,
// so it also decides for the function's twins (APITwins): ALLOW:os.system allows
// posix.system too.
type APIPolicy struct {
	rules []APIRule
	star  *apiVerdict
	cats  map[string]apiVerdict // category -> verdict of its category rules
	funcs map[string]apiVerdict // canonical name -> verdict of its function rules
}

// apiVerdict is the combined decision of the rules of one level for one target: the
// first DENY rule when there is one, else the first ALLOW rule (load order).
type apiVerdict struct {
	allow bool
	rule  *Rule
}

// apiLoad is the loading state of the python-api= family.
type apiLoad struct {
	rules []APIRule
}

var apiActions = map[string]Action{"ALLOW": Allow, "DENY": Deny}

// isAPIAction reports whether a target is in fact an action word, as in
// "ALLOW:threads,DENY" (any case).
func isAPIAction(t string) bool {
	_, ok := apiActions[strings.ToUpper(t)]
	return ok
}

// apiActionList is Python's repr of sorted(ACTIONS), as upstream prints it.
const apiActionList = "['ALLOW', 'DENY']"

// apiRule validates one python-api=ACTION:target[,target...] line. Every bad target
// of the line is reported; a line with any error is dropped whole.
func (ld *loader) apiRule(r Rule) {
	bad := func(format string, args ...any) {
		ld.errs.add(r.Ref, "Invalid rule '%s': %s", r.Raw, fmt.Sprintf(format, args...))
	}
	action, list, ok := strings.Cut(strings.TrimSpace(r.Value), ":")
	if !ok {
		bad("expected the form 'ACTION:target', with ACTION in %s.", apiActionList)
		return
	}
	action = strings.TrimSpace(action)
	act, ok := apiActions[action]
	if !ok {
		bad("unknown action %s, expected one of %s.", pyRepr(action), apiActionList)
		return
	}
	failed := false
	var targets []string
	for t := range strings.SplitSeq(list, ",") {
		t = strings.TrimSpace(t)
		switch {
		case t == "":
			bad("empty target.")
		case strings.Contains(t, ":") || isAPIAction(t):
			bad("one action per line: do not mix ALLOW and DENY.")
		case t == "*":
			targets = append(targets, t)
			continue
		case !strings.Contains(t, "."):
			if apiCategoryIndex[t] != nil {
				targets = append(targets, t)
				continue
			}
			bad("unknown category %s, expected one of %s.", pyRepr(t), pyList(sortedCategories()))
		default:
			if _, ok := apiCategoryOf[t]; ok {
				targets = append(targets, t)
				continue
			}
			bad("%s is not a registered sensitive function.", pyRepr(t))
		}
		failed = true
	}
	if failed {
		return
	}
	ld.apiState.rules = append(ld.apiState.rules, APIRule{Rule: r, Action: act, Targets: targets})
	ld.record(r)
}

// finishAPI resolves the python-api= rules and warns about the dangerous grants.
func (ld *loader) finishAPI() {
	a := &APIPolicy{
		rules: ld.apiState.rules,
		cats:  map[string]apiVerdict{},
		funcs: map[string]apiVerdict{},
	}
	combine := func(prev *apiVerdict, allow bool, r *Rule) apiVerdict {
		if prev == nil || prev.allow && !allow {
			return apiVerdict{allow: allow, rule: r} // the first rule, or the first DENY
		}
		return *prev
	}
	for i := range a.rules {
		ar := &a.rules[i]
		allow := ar.Action == Allow
		for _, t := range ar.Targets {
			switch {
			case t == "*":
				v := combine(a.star, allow, &ar.Rule)
				a.star = &v
			case !strings.Contains(t, "."):
				var prev *apiVerdict
				if v, ok := a.cats[t]; ok {
					prev = &v
				}
				a.cats[t] = combine(prev, allow, &ar.Rule)
			default:
				canon := apiCanonical[t]
				var prev *apiVerdict
				if v, ok := a.funcs[canon]; ok {
					prev = &v
				}
				a.funcs[canon] = combine(prev, allow, &ar.Rule)
			}
		}
	}
	ld.p.api = a

	// Warnings: one per dangerous grant that takes effect.
	var open []string // the ⚠ categories allowed as a whole
	for _, c := range apiCategoryNames {
		if ok, _ := a.Category(c); ok && APICategoryWarned(c) {
			open = append(open, c)
		}
	}
	for i := range a.rules {
		ar := &a.rules[i]
		if ar.Action != Allow {
			continue
		}
		for _, t := range ar.Targets {
			switch {
			case t == "*":
				if !a.star.allow {
					continue // a DENY:* elsewhere wins
				}
				msg := fmt.Sprintf("'%s' allows every sensitive function that no category or function rule denies", ar.Raw)
				if a.Disabled() {
					msg = fmt.Sprintf("'%s' turns the sensitive-API guard off: every sensitive function may be called", ar.Raw)
				}
				if len(open) > 0 {
					msg += ", including the dangerous categories " + strings.Join(open, ", ")
				}
				if slices.Contains(open, CatDynamicCode) {
					msg += "; eval/exec/compile run unguarded, whatever the eval-* rules"
				}
				ld.warn(ar.Ref, "%s", msg)
			case APICategoryWarned(t) && a.cats[t].allow:
				msg := fmt.Sprintf("'%s' grants the dangerous category %s (%s)", ar.Raw, t, APICategoryHelp(t))
				if t == CatDynamicCode {
					msg += "; it wins over the eval-* rules"
				}
				ld.warn(ar.Ref, "%s", msg)
			}
		}
	}
}

// API returns the resolved python-api= rules (never nil for a loaded policy).
func (p *Policy) API() *APIPolicy { return p.api }

// APIAllowed reports whether the registered sensitive function qualname may be
// called, its category, and the rule that decided (nil when no rule applies and the
// function is denied by default). A name that is not in the registry is reported as
// not allowed, with category "": the API guard only knows the registry, and a caller
// asking about another name has made a mistake that must fail closed.
func (p *Policy) APIAllowed(qualname string) (allowed bool, category string, rule *Rule) {
	return p.api.Allowed(qualname)
}

// Allowed is Policy.APIAllowed. A nil APIPolicy denies every function.
func (a *APIPolicy) Allowed(qualname string) (allowed bool, category string, rule *Rule) {
	category, ok := apiCategoryOf[qualname]
	if !ok {
		return false, "", nil
	}
	if a == nil {
		return false, category, nil
	}
	if v, ok := a.funcs[apiCanonical[qualname]]; ok {
		return v.allow, category, v.rule
	}
	allowed, rule = a.Category(category)
	return allowed, category, rule
}

// Category returns the decision for a category as a whole, function rules left
// aside: its category rules, else the "*" rules, else denied by default (nil rule).
// An unknown category is denied.
func (a *APIPolicy) Category(category string) (allowed bool, rule *Rule) {
	if a == nil || apiCategoryIndex[category] == nil {
		return false, nil
	}
	if v, ok := a.cats[category]; ok {
		return v.allow, v.rule
	}
	if a.star != nil {
		return a.star.allow, a.star.rule
	}
	return false, nil
}

// Disabled reports whether every registered function is allowed, as with
// python-api=ALLOW:* and no DENY: the guard then has nothing to refuse.
func (a *APIPolicy) Disabled() bool {
	if a == nil {
		return false
	}
	for name := range apiCategoryOf {
		if ok, _, _ := a.Allowed(name); !ok {
			return false
		}
	}
	return true
}

// Rules returns the accepted python-api= lines in load order.
func (a *APIPolicy) Rules() []APIRule {
	if a == nil {
		return nil
	}
	out := slices.Clone(a.rules)
	for i := range out {
		out[i].Targets = slices.Clone(out[i].Targets)
	}
	return out
}

func sortedCategories() []string {
	out := slices.Clone(apiCategoryNames)
	slices.Sort(out)
	return out
}

// pyRepr quotes s the way Python's repr() quotes a simple string, as the upstream
// messages do: 'x', or "x" when s holds a single quote and no double quote.
func pyRepr(s string) string {
	q := "'"
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = `"`
	}
	var b strings.Builder
	b.WriteString(q)
	for _, c := range s {
		switch {
		case c == '\\':
			b.WriteString(`\\`)
		case string(c) == q:
			b.WriteString(`\` + q)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteRune(c)
		}
	}
	b.WriteString(q)
	return b.String()
}

// pyList renders a list of strings as Python's repr() of a list.
func pyList(items []string) string {
	parts := make([]string, len(items))
	for i, s := range items {
		parts[i] = pyRepr(s)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
