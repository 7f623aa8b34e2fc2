package pysandboxes

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/policy"
)

// writableRuleFiles returns the policy's rule files (policy.RuleFiles: the main
// file, its includes, missing ones too, and the learn= file) that an expose-rw=
// directory holds without a deeper expose-ro= or an ignore= rule over them,
// with the expose-rw= rule of each: a sandboxed program could rewrite them, and
// the next run would obey what it wrote.
func writableRuleFiles(p *policy.Policy) (files []string, by []policy.Expose) {
	for _, f := range p.RuleFiles() {
		e, ok := p.Exposed(f)
		if !ok || e.Mode != policy.ReadWrite {
			continue
		}
		if _, hidden := p.Ignored(f); hidden {
			continue
		}
		files, by = append(files, f), append(by, e)
	}
	return files, by
}

// guardRuleFiles returns the policy the OS layer enforces for p: p itself, or,
// when an expose-rw= directory holds one of p's rule files and the provider
// enforces hide (caps), p with an implicit ignore= of each such file (its
// absolute path), so that the program can neither read, write, replace nor
// create it. Without hide, each such file is a warning on logger: the program
// may rewrite it.
func guardRuleFiles(p *policy.Policy, caps Capability, logger *slog.Logger) driver.Policy {
	files, by := writableRuleFiles(p)
	if len(files) == 0 {
		return p
	}
	if !caps.Has(CapHide) {
		for i, f := range files {
			logger.Warn("a sandboxed program may rewrite a rule file of its policy, and the next run would obey what it wrote: keep the rule file out of the expose-rw= directory, or use a provider that enforces hide (it is then hidden from the program)",
				"file", f, "rule", by[i].Ref.String()+": "+by[i].Raw)
		}
		return p
	}
	g := &guardedPolicy{Policy: p}
	for i, f := range files {
		g.extra = append(g.extra, policy.Ignore{
			Rule:     policy.Rule{Ref: by[i].Ref, Raw: fmt.Sprintf("ignore=%s (implicit: a rule file in %s)", f, by[i].Raw), Key: "ignore", Value: f},
			Pattern:  f,
			Absolute: true,
		})
	}
	return g
}

// guardedPolicy is a policy with implicit ignore= rules added (guardRuleFiles).
type guardedPolicy struct {
	*policy.Policy
	extra []policy.Ignore
}

// Ignores returns the policy's ignore= rules and the implicit ones.
func (g *guardedPolicy) Ignores() []policy.Ignore { return append(g.Policy.Ignores(), g.extra...) }

// warnWritablePath warns, on logger, of each directory of the host's PATH (path)
// that an expose-rw= directory of p holds: a sandboxed program could plant a
// command there that the host runs later, outside any sandbox (a provider's
// own tool, found on PATH, or a command of the user's shell).
func warnWritablePath(p *policy.Policy, path string, logger *slog.Logger) {
	seen := map[string]bool{}
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			continue
		}
		real, err := filepath.EvalSymlinks(d)
		if err != nil || seen[real] {
			continue
		}
		seen[real] = true
		if e, ok := p.Exposed(real); ok && e.Mode == policy.ReadWrite {
			logger.Warn("a directory of the host's PATH lies where the sandbox may write: a program could plant a command there that the host runs later, outside any sandbox (a provider's own tool, a command of your shell)",
				"dir", d, "rule", e.Ref.String()+": "+e.Raw)
		}
	}
}
