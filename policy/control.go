package policy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pysandboxes/pysandboxes/internal/suggest"
)

// controlKeys are the single-valued keys: each may be set once across all files, and
// a value given by code or on the command line wins over a file's.
var controlKeys = []string{"py-sandbox", "os-sandbox", "learn", "port", "remote-result-mode", "remote-result-guard"}

func parseBool(s string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "true", "1", "on", "yes":
		return true, true
	case "false", "none", "0", "off", "no":
		return false, true
	}
	return false, false
}

func parseResultMode(s string) (ResultMode, bool) {
	switch strings.TrimSpace(s) {
	case "data-only", "data_only":
		return DataOnly, true
	case "objects", "default":
		return Objects, true
	}
	return "", false
}

func (ld *loader) knownProvider(name string) bool {
	return slices.Contains(Providers, name) || slices.Contains(ld.opts.Providers, name)
}

// controlRule validates a single-valued key and records it, refusing a second value.
func (ld *loader) controlRule(r Rule) {
	v := strings.TrimSpace(r.Value)
	switch r.Key {
	case "py-sandbox", "remote-result-guard":
		if _, ok := parseBool(v); !ok {
			ld.errs.add(r.Ref, "Invalid %s '%s': expected true or false.", r.Key, v)
			return
		}
	case "os-sandbox":
		if !ld.knownProvider(strings.ToLower(v)) {
			ld.errs.add(r.Ref, "Invalid os-sandbox '%s'. Use one of: %s.", v, strings.Join(append(slices.Clone(Providers), ld.opts.Providers...), ", "))
			return
		}
	case "remote-result-mode":
		if _, ok := parseResultMode(v); !ok {
			ld.errs.add(r.Ref, "Invalid remote-result-mode '%s': expected data-only or objects.", v)
			return
		}
	case "port":
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 65535 {
			ld.errs.add(r.Ref, "Invalid port '%s': expected a number from 0 to 65535.", v)
			return
		}
		ld.warn(r.Ref, "port= has no effect: the host talks to the sandbox over an inherited socket pair, never a TCP port")
	case "learn":
		if !ld.learnRule(&r) {
			return
		}
	}
	prev := ld.p.control[r.Key]
	switch {
	case prev == nil:
		ld.setControl(r)
		ld.record(r)
	case prev.Ref.IsArg() && !r.Ref.IsArg():
		// The <arg> value wins over a file value, but the files still may not set
		// the key twice (port= excepted: --port wins over any number of lines).
		if first, dup := ld.overridden[r.Key]; dup && r.Key != "port" {
			ld.errs.addAlso(first, []Ref{r.Ref}, "Multiple %s parameters.", r.Key)
			return
		}
		if ld.overridden == nil {
			ld.overridden = map[string]Ref{}
		}
		ld.overridden[r.Key] = r.Ref
		ld.debug("rule overridden by <arg>", "rule", r.Raw, "at", r.Ref.String())
	default:
		ld.errs.addAlso(prev.Ref, []Ref{r.Ref}, "Multiple %s parameters.", r.Key)
	}
}

func (ld *loader) setControl(r Rule) {
	rr := r
	ld.p.control[r.Key] = &rr
}

// learnRule handles learn=: the lock (learn=false in a file), the forbidden boolean
// spellings, and the file to learn into. It reports whether r is a learn= value to
// record as a control key.
func (ld *loader) learnRule(r *Rule) bool {
	v := strings.TrimSpace(r.Value)
	switch strings.ToLower(v) {
	case "false":
		if r.Ref.IsArg() {
			ld.errs.add(r.Ref, "learn=false locks a rule file: write it in the file, not on the command line or in code")
			return false
		}
		if ld.p.locked == nil {
			rr := *r
			ld.p.locked = &rr
		}
		ld.record(*r)
		return false
	case "true", "1", "0", "yes", "no", "on", "off", "none":
		ld.errs.add(r.Ref, "Invalid learn '%s'. Use the filename instead.", v)
		return false
	}
	if _, err := ld.learnPath(*r); err != nil {
		ld.errs.add(r.Ref, "Invalid learn '%s': %v", v, err)
		return false
	}
	return true
}

// providerRule records a "<provider>.<key>=value" line for that provider.
func (ld *loader) providerRule(r Rule) {
	name, param, _ := strings.Cut(r.Key, ".")
	if name == "" || param == "" {
		ld.errs.add(r.Ref, "Invalid rule '%s': expected PROVIDER.PARAM=VALUE (a provider parameter)", r.Raw)
		return
	}
	if name == "auto" || name == "none" {
		ld.errs.add(r.Ref, "Invalid rule '%s': os-sandbox=%s takes no parameters: a parameter names the provider it configures (landlock.%s=...)", r.Raw, name, param)
		return
	}
	if !ld.knownProvider(name) {
		var names []string
		for _, p := range append(slices.Clone(Providers), ld.opts.Providers...) {
			if p != "auto" && p != "none" {
				names = append(names, p)
			}
		}
		if s, ok := suggest.ClosestFold(name, names); ok && s != name {
			ld.errs.add(r.Ref, "Invalid rule '%s': unknown provider '%s'; did you mean '%s.%s'?", r.Raw, name, s, param)
		} else {
			ld.errs.add(r.Ref, "Invalid rule '%s': unknown provider '%s' (the providers: %s)", r.Raw, name, strings.Join(names, ", "))
		}
		return
	}
	ld.p.provider[name] = append(ld.p.provider[name], Param{Rule: r, Provider: name, Name: param})
	ld.record(r)
}

// learnPath resolves the file named by a learn= rule: a bare name lies next to the
// file holding the rule, "" means DefaultName, and the directory must exist.
func (ld *loader) learnPath(r Rule) (string, error) {
	v := strings.TrimSpace(r.Value)
	if strings.ContainsRune(v, 0) {
		return "", errors.New("path is invalid")
	}
	if v == "" {
		v = DefaultName
	}
	p, err := ld.expandHome(v)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(p) {
		base := ld.dir
		if !r.Ref.IsArg() && !strings.Contains(v, "/") {
			base = filepath.Dir(r.Ref.File)
		}
		p = filepath.Join(base, p)
	}
	p = filepath.Clean(p)
	if st, err := os.Stat(filepath.Dir(p)); err != nil || !st.IsDir() {
		return "", fmt.Errorf("the directory '%s' must exist", ld.show(filepath.Dir(p)))
	}
	return p, nil
}

// finishControl resolves learn= and applies the learn=false lock.
func (ld *loader) finishControl() {
	if r := ld.p.control["learn"]; r != nil {
		ld.p.learn, _ = ld.learnPath(*r)
	}
	lock := ld.p.locked
	if lock == nil {
		return
	}
	if r := ld.p.control["learn"]; r != nil {
		ld.errs.addErr(lock.Ref, ErrLocked, "learning mode is forbidden, but requested by %s.", r.Ref)
	} else if ld.opts.Learn {
		ld.errs.addErr(lock.Ref, ErrLocked, "learning mode is forbidden, but requested by %s.", ArgFile)
	}
	var keys []string
	for _, k := range ld.argKeys {
		if k != "learn" {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		ld.errs.addErr(lock.Ref, ErrLocked, "'learn=false' locks the rules, the API cannot add %s", strings.Join(keys, ", "))
	}
}
