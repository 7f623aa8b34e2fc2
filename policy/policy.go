package policy

import (
	"slices"
	"strings"
)

// Rule is one rule line with its provenance.
type Rule struct {
	Ref Ref
	// Key is the rule's key as written, e.g. "net", "expose-ro", "eval-syntax:llm",
	// "bwrap.share-net".
	Key string
	// Value is the value after ${...} substitution (env= and unenv= values are kept
	// as written, because the environment family resolves them itself).
	Value string
	// Raw is the line as written, comments removed.
	Raw string
}

// String renders the rule as written, e.g. "net=DENY|*|10.0.0.0/8|*|OUT".
func (r Rule) String() string { return r.Raw }

// Policy is a loaded and validated rule set. The zero value is not useful: make one
// with Load, Parse or a Builder. A Policy is immutable once loaded and safe for
// concurrent use.
type Policy struct {
	// Path is the absolute path of the main rule file, or "" for a policy built by code.
	Path string

	rules    []Rule
	warnings []Warning

	env      *envRules
	environ  []string
	envFrom  map[string]Ref
	exposes  []Expose
	exposeAt map[int]string // index in rules of every expose-*/bind rule (duplicates too) -> its directory
	ignores  []Ignore
	net      *Network
	imports  *Imports
	api      *APIPolicy
	eval     *EvalPolicy
	control  map[string]*Rule
	provider map[string][]Param
	locked   *Rule
	learn    string
	files    []string // the files included, or attempted (see RuleFiles)
}

// Rules returns every rule of the policy in load order: rules given by code or on
// the command line first, then the files, includes spliced in place.
func (p *Policy) Rules() []Rule { return slices.Clone(p.rules) }

// Warnings returns the remarks made while loading (for example a net= ALLOW rule
// dropped because its host name does not resolve).
func (p *Policy) Warnings() []Warning { return slices.Clone(p.warnings) }

// Param is one provider parameter, a line "<provider>.<key>=<value>".
type Param struct {
	Rule
	Provider string
	Name     string
}

// ProviderParams returns the <name>.<key>= lines of the policy for the provider name,
// in load order.
func (p *Policy) ProviderParams(name string) []Param { return slices.Clone(p.provider[name]) }

// PySandbox reports whether the Python layer is on (py-sandbox=, default true) and
// the rule that decided it (nil for the default).
func (p *Policy) PySandbox() (bool, *Rule) {
	r := p.control["py-sandbox"]
	if r == nil {
		return true, nil
	}
	on, _ := parseBool(r.Value)
	return on, r
}

// OSSandbox returns the provider named by os-sandbox= ("auto" when absent) and the
// rule that named it (nil for the default).
func (p *Policy) OSSandbox() (string, *Rule) {
	r := p.control["os-sandbox"]
	if r == nil {
		return "auto", nil
	}
	return strings.ToLower(strings.TrimSpace(r.Value)), r
}

// Learn returns the file named by learn=, resolved to an absolute path, and its rule;
// "" and nil when the policy does not ask for learning.
func (p *Policy) Learn() (string, *Rule) {
	if p.learn == "" {
		return "", nil
	}
	return p.learn, p.control["learn"]
}

// Locked returns the learn=false rule that locks the policy, or nil.
func (p *Policy) Locked() *Rule { return p.locked }

// ResultMode is the decoding mode of values returned from the sandbox.
type ResultMode string

const (
	// DataOnly accepts only plain data types (the default).
	DataOnly ResultMode = "data-only"
	// Objects surfaces other objects as inert descriptions.
	Objects ResultMode = "objects"
)

// RemoteResultMode returns remote-result-mode= (DataOnly by default) and its rule.
func (p *Policy) RemoteResultMode() (ResultMode, *Rule) {
	r := p.control["remote-result-mode"]
	if r == nil {
		return DataOnly, nil
	}
	m, _ := parseResultMode(r.Value)
	return m, r
}

// RemoteResultGuard returns remote-result-guard= (true by default) and its rule.
func (p *Policy) RemoteResultGuard() (bool, *Rule) {
	r := p.control["remote-result-guard"]
	if r == nil {
		return true, nil
	}
	on, _ := parseBool(r.Value)
	return on, r
}
