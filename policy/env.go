package policy

import (
	"slices"
	"sort"
	"strings"
)

// EnvRule is one env= (Unset false) or unenv= (Unset true) rule.
type EnvRule struct {
	Rule
	// Name is the variable name, or a pattern where each '*' matches any text.
	Name string
	// Value is the value as written (env= only): "${PAT*}" with the same pattern as
	// Name copies the host values of the matching variables.
	Value string
	Unset bool
}

// Pattern reports whether the rule names variables by a '*' pattern.
func (e EnvRule) Pattern() bool { return strings.Contains(e.Name, "*") }

type envRules struct {
	rules []EnvRule
}

// envRule validates an env= or unenv= line (and their legacy spellings).
func (ld *loader) envRule(r Rule, unset bool) {
	if ld.p.env == nil {
		ld.p.env = &envRules{}
	}
	e := EnvRule{Rule: r, Unset: unset}
	if unset {
		e.Name = strings.TrimSpace(r.Value)
		if !validEnvPattern(e.Name) {
			ld.errs.add(r.Ref, "Invalid rule '%s': expected a variable name or a pattern with '*'", r.Raw)
			return
		}
	} else {
		name, value, ok := strings.Cut(r.Value, "=")
		if !ok {
			n := strings.TrimSpace(r.Value)
			if !validEnvPattern(n) || strings.Contains(n, "*") {
				n = "NAME"
			}
			ld.errs.add(r.Ref, "Invalid rule '%s': %s= needs NAME=VALUE: write %s=%s=VALUE, or %s=%s=${%s} to copy the host's value",
				r.Raw, r.Key, r.Key, n, r.Key, n, n)
			return
		}
		e.Name, e.Value = strings.TrimSpace(name), value
		if !validEnvPattern(e.Name) {
			ld.errs.add(r.Ref, "Invalid rule '%s': expected a variable name or a pattern with '*'", r.Raw)
			return
		}
		// Check the value's substitution now, so a broken form is reported at load.
		if !(e.Pattern() && e.Value == "${"+e.Name+"}") {
			if _, err := substitute(e.Value, ld.lookup); err != nil {
				ld.errs.add(r.Ref, "%v", err)
				return
			}
		}
	}
	ld.p.env.rules = append(ld.p.env.rules, e)
	ld.record(r)
}

// validEnvPattern accepts a variable name in which '*' may stand for any text.
func validEnvPattern(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '=' || c == 0 || c == ' ' || c == '\t' {
			return false
		}
	}
	return true
}

// envMatch reports whether name matches pattern, where each '*' matches any text
// and the match covers the whole name.
func envMatch(pattern, name string) bool { return starMatch(pattern, name) }

// finishEnv computes the child's environment from the host environment.
//
// For each variable, an exact rule beats a pattern whatever their order. At the
// same level the rules apply in order, as upstream's: an unenv= removes what the
// rules before it set (an env= after it sets the variable again), and among
// env= rules the first one wins, so rules given by code or on the command line
// (read first) take priority; an unenv= given by code or on the command line
// removes the variable whatever the files set. A rule whose value resolves to ""
// sets nothing.
func (ld *loader) finishEnv() {
	ld.p.envFrom = map[string]Ref{}
	if ld.p.env == nil {
		return
	}
	// Index the rules once: exact rules by name, patterns in load order, so that
	// deciding a variable does not scan every rule of a large profile.
	exact := map[string][]*EnvRule{}
	var patterns []*EnvRule
	for i := range ld.p.env.rules {
		e := &ld.p.env.rules[i]
		if e.Pattern() {
			patterns = append(patterns, e)
		} else {
			exact[e.Name] = append(exact[e.Name], e)
		}
	}
	// Every name a rule could set: exact names, and host names matching a pattern.
	names := map[string]bool{}
	for name, rules := range exact {
		for _, e := range rules {
			if !e.Unset {
				names[name] = true
				break
			}
		}
	}
	for _, e := range patterns {
		if e.Unset {
			continue
		}
		for k := range ld.env {
			if !names[k] && envMatch(e.Name, k) {
				names[k] = true
			}
		}
	}
	out := map[string]string{}
	for name := range names {
		if rule, ok := decideEnv(name, exact[name], patterns); ok {
			var v string
			if rule.Pattern() && rule.Value == "${"+rule.Name+"}" {
				v = ld.env[name]
			} else {
				v, _ = substitute(rule.Value, ld.lookup)
			}
			if v != "" {
				out[name] = v
				ld.p.envFrom[name] = rule.Ref
			}
		}
	}
	keys := make([]string, 0, len(out))
	for k := range out {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ld.p.environ = make([]string, len(keys))
	for i, k := range keys {
		ld.p.environ[i] = k + "=" + out[k]
	}
}

// decideEnv returns the env= rule that sets name, or false when no rule sets it or
// an unenv= removes it. exact are the rules naming it exactly, patterns every '*'
// rule, both in load order.
func decideEnv(name string, exact, patterns []*EnvRule) (*EnvRule, bool) {
	if set, removed, found := decideLevel(exact, ""); found {
		return set, !removed
	}
	set, removed, found := decideLevel(patterns, name)
	return set, found && !removed
}

// decideLevel applies the rules of one level, in load order (all of them when name
// is "", else those whose pattern matches name): found reports that one applies,
// removed that an unenv= removes the variable, set is the env= that sets it.
func decideLevel(rules []*EnvRule, name string) (set *EnvRule, removed, found bool) {
	argUnset := false
	for _, e := range rules {
		if name != "" && !envMatch(e.Name, name) {
			continue
		}
		found = true
		switch {
		case e.Unset && e.Ref.File == ArgFile:
			argUnset = true
		case e.Unset:
			set, removed = nil, true
		case set == nil:
			set, removed = e, false
		}
	}
	if argUnset {
		set, removed = nil, true
	}
	return set, removed, found
}

// Environ returns the environment the sandboxed program starts with, as sorted
// "KEY=value" strings: exactly what the env= rules grant, resolved against the host
// environment the policy was loaded with.
func (p *Policy) Environ() []string { return slices.Clone(p.environ) }

// EnvSource returns the rule that set the variable name in Environ.
func (p *Policy) EnvSource(name string) (Ref, bool) {
	r, ok := p.envFrom[name]
	return r, ok
}

// EnvRules returns the env= and unenv= rules in load order.
func (p *Policy) EnvRules() []EnvRule {
	if p.env == nil {
		return nil
	}
	return slices.Clone(p.env.rules)
}
