package policy

import (
	"maps"
	"slices"
	"strings"
	"unicode"
)

// Imports is the resolved python-import= rule set: the top-level modules the
// sandboxed program may import.
//
// Lines accumulate; "*" anywhere allows every module; with no python-import= rule
// at all nothing may be imported (an empty set denies all, it is not "no filter").
// A dotted entry such as "os.path" is kept but never matches (rules name top-level
// modules), and is warned about at load.
type Imports struct {
	all      *Rule            // the first rule holding "*", or nil
	modules  map[string]*Rule // top-level name -> the first rule naming it
	declared bool
}

// importLoad is the loading state of the python-import= family.
type importLoad struct {
	all      *Rule
	modules  map[string]*Rule
	declared bool
}

// importRule validates one python-import=a, b, c line. Every bad entry of the line is
// reported; a line with any error is dropped whole. An empty value (for example
// python-import=${EXTRA_MODULES} with the variable unset) is accepted and grants
// nothing.
func (ld *loader) importRule(r Rule) {
	st := &ld.importState
	value := strings.TrimSpace(r.Value)
	var names, dotted []string
	star, failed := false, false
	if value != "" {
		for name := range strings.SplitSeq(value, ",") {
			name = strings.TrimSpace(name)
			switch {
			case name == "":
				ld.errs.add(r.Ref, "Invalid rule '%s': empty module name.", r.Raw)
				failed = true
			case name == "*":
				star = true
			case !validModuleName(name):
				ld.errs.add(r.Ref, "Invalid rule '%s': %s is not a valid module name.", r.Raw, pyRepr(name))
				failed = true
			case strings.Contains(name, "."):
				dotted = append(dotted, name)
			default:
				names = append(names, name)
			}
		}
	}
	if failed {
		return
	}
	rr := new(Rule)
	*rr = r
	st.declared = true
	if star && st.all == nil {
		st.all = rr
	}
	if st.modules == nil {
		st.modules = map[string]*Rule{}
	}
	for _, n := range names {
		if _, ok := st.modules[n]; !ok {
			st.modules[n] = rr
		}
	}
	for _, d := range dotted {
		top, _, _ := strings.Cut(d, ".")
		ld.warn(r.Ref, "python-import entry '%s' never matches: rules name top-level modules, write '%s' to allow it (and all of %s's submodules)", d, top, top)
	}
	ld.record(r)
}

// finishImports publishes the python-import= rule set.
func (ld *loader) finishImports() {
	st := &ld.importState
	ld.p.imports = &Imports{all: st.all, modules: maps.Clone(st.modules), declared: st.declared}
	if ld.p.imports.modules == nil {
		ld.p.imports.modules = map[string]*Rule{}
	}
}

// validModuleName accepts a Python identifier, or several joined by dots.
func validModuleName(s string) bool {
	for part := range strings.SplitSeq(s, ".") {
		if !validIdentifier(part) {
			return false
		}
	}
	return true
}

// validIdentifier approximates Python's str.isidentifier(): a letter or '_', then
// letters, digits, '_' and combining marks.
func validIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_' || unicode.IsLetter(c) || unicode.Is(unicode.Nl, c):
		case i > 0 && (unicode.IsDigit(c) || unicode.In(c, unicode.Mn, unicode.Mc, unicode.Nd, unicode.Pc)):
		default:
			return false
		}
	}
	return true
}

// Imports returns the resolved python-import= rules (never nil for a loaded policy).
func (p *Policy) Imports() *Imports { return p.imports }

// ImportAllowed reports whether module may be imported, judging its top-level name
// ("os.path" is judged as "os"), and returns the granting rule: the rule naming the
// module, else the "*" rule. false and nil mean "not allowed by a rule". A relative
// name (leading '.') must be resolved by the caller first; as given it is refused.
func (p *Policy) ImportAllowed(module string) (bool, *Rule) { return p.imports.Allowed(module) }

// Allowed is Policy.ImportAllowed. A nil Imports allows nothing.
func (i *Imports) Allowed(module string) (bool, *Rule) {
	top, _, _ := strings.Cut(strings.TrimSpace(module), ".")
	if i == nil || top == "" {
		return false, nil
	}
	if r := i.modules[top]; r != nil {
		return true, r
	}
	if i.all != nil {
		return true, i.all
	}
	return false, nil
}

// All reports whether a python-import= rule holds "*" (every module allowed).
func (i *Imports) All() bool { return i != nil && i.all != nil }

// AllRule returns the first rule holding "*", or nil.
func (i *Imports) AllRule() *Rule {
	if i == nil {
		return nil
	}
	return i.all
}

// Modules returns the top-level module names the rules allow, sorted ("*" and
// dotted entries, which never match, left out).
func (i *Imports) Modules() []string {
	if i == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(i.modules))
}

// Declared reports whether the policy has at least one python-import= rule. Without
// one nothing may be imported.
func (i *Imports) Declared() bool { return i != nil && i.declared }
