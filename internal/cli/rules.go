package cli

import (
	"slices"
	"strings"

	"github.com/pysandboxes/pysandboxes/internal/suggest"
	"github.com/pysandboxes/pysandboxes/policy"
)

// ruleKey is a key of the rule language, as package policy lists it
// (policy.Keys, policy.LegacyKeys), with what the command says of it. hidden
// keys (the legacy ones) are accepted but neither suggested nor completed. The
// order is policy's, the order of suggestions: on a tie the first wins, so the
// narrower grant comes first (expose-ro before expose-rw).
type ruleKey struct {
	name     string
	help     string
	complete valueKind
	hidden   bool
	// fileOnly keys are not offered as --KEY= options: learn= (call has
	// --learn, run and eval cannot learn).
	fileOnly bool
}

// ruleHelp is what the command says of each key of policy.Keys.
var ruleHelp = map[string]ruleKey{
	"env":                     {help: "set or copy an environment variable: NAME=VALUE, NAME=${NAME}, PAT*=${PAT*}"},
	"unenv":                   {help: "remove environment variables: NAME or PAT*"},
	"expose-ro":               {help: "a directory the program may read", complete: valueDir},
	"expose-rw":               {help: "a directory the program may read and change", complete: valueDir},
	"ignore":                  {help: "paths that look absent (a glob)", complete: valueFile},
	"net":                     {help: "a network rule: ALLOW|proto|host|port|OUT or IN"},
	"python-import":           {help: "modules the Python program may import"},
	"python-api":              {help: "sensitive Python functions: ALLOW:CATEGORY or DENY:CATEGORY"},
	"eval-syntax":             {help: "eval: the syntax allowed (groups or ast node names)"},
	"eval-call":               {help: "eval: the functions that may be called"},
	"eval-attribute":          {help: "eval: the attributes that may be read"},
	"eval-import":             {help: "eval: the modules that may be imported"},
	"eval-magic":              {help: "eval: the dunder names allowed"},
	"eval-namespace":          {help: "eval: adaptive, closed or caller", complete: valueNamespace},
	"eval-timeout":            {help: "eval: the wall-clock limit"},
	"eval-max-iterations":     {help: "eval: loop iterations"},
	"eval-max-call-depth":     {help: "eval: call depth"},
	"eval-max-depth":          {help: "eval: nesting of the source"},
	"eval-max-nodes":          {help: "eval: size of the source"},
	"eval-max-alloc":          {help: "eval: bytes one operation may allocate"},
	"eval-max-leaked-threads": {help: "eval: threads left running"},
	"py-sandbox":              {help: "the Python layer on or off", complete: valueBool},
	"os-sandbox":              {help: "the OS provider", complete: valueProvider},
	"learn":                   {help: "learn the rules into FILE instead of enforcing them", complete: valueFile, fileOnly: true},
	"remote-result-mode":      {help: "results of calls: data-only or objects", complete: valueResultMode},
	"remote-result-guard":     {help: "the guarded decoder of call results", complete: valueBool},
}

// ruleKeys are the keys of the rule language: policy.Keys, then the hidden
// policy.LegacyKeys.
var ruleKeys = func() []ruleKey {
	var out []ruleKey
	for _, name := range policy.Keys() {
		k := ruleHelp[name]
		k.name = name
		out = append(out, k)
	}
	for _, name := range policy.LegacyKeys() {
		out = append(out, ruleKey{name: name, hidden: true})
	}
	return out
}()

// ruleNames lists the rule keys people are shown.
func ruleNames() string {
	var names []string
	for _, k := range ruleKeys {
		if !k.hidden && (!strings.HasPrefix(k.name, "eval-") || k.name == "eval-syntax") {
			names = append(names, k.name)
		}
	}
	i := slices.Index(names, "eval-syntax")
	names[i] = "eval-*"
	return strings.Join(names, ", ")
}

// findRuleKey returns the rule key of a rule's key: eval-KEY:PROFILE is eval-KEY.
func findRuleKey(key string) (ruleKey, bool) {
	if strings.HasPrefix(key, "eval-") {
		key, _, _ = strings.Cut(key, ":")
	}
	for _, k := range ruleKeys {
		if k.name == key {
			return k, true
		}
	}
	return ruleKey{}, false
}

// checkRuleKey accepts the key of a rule given on c's command line when policy
// knows it, and returns the usage error that names the closest option or rule
// otherwise. A provider parameter (PROVIDER.PARAM) is for the provider to judge;
// only an unknown provider name is refused here.
func checkRuleKey(key string, c *command) error {
	if _, ok := findRuleKey(key); ok {
		return nil
	}
	if prov, param, ok := strings.Cut(key, "."); ok && prov != "" && param != "" {
		if slices.Contains(policy.Providers, prov) {
			return nil
		}
		if s, ok := suggest.Closest(prov, policy.Providers); ok {
			return usagef("unknown rule --%s (no provider %s); did you mean --%s.%s?", key, prov, s, param)
		}
		return usagef("unknown rule --%s (no provider %s; see pysandboxes probe)", key, prov)
	}
	return c.unknown("--" + key)
}
