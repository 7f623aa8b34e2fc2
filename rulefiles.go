package pysandboxes

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/policy"
)

// guardRuleFiles returns the policy the OS layer enforces for p: p itself, or,
// when an expose-rw= directory holds one of p's rule files
// (Policy.WritableRuleFiles) and the provider
// enforces hide (caps), p with an implicit ignore= of each such file (its
// absolute path), so that the program can neither read, write, replace nor
// create it. Without hide, each such file is a warning on logger: the program
// may rewrite it.
func guardRuleFiles(p *policy.Policy, caps Capability, logger *slog.Logger) driver.Policy {
	ws := p.WritableRuleFiles()
	if len(ws) == 0 {
		return p
	}
	if !caps.Has(CapHide) {
		for _, w := range ws {
			logger.Warn("a sandboxed program may rewrite a rule file of its policy, and the next run would obey what it wrote: keep the rule file out of the expose-rw= directory, or use a provider that enforces hide (it is then hidden from the program)",
				"file", w.File, "rule", w.By.Ref.String()+": "+w.By.Raw)
		}
		return p
	}
	g := &guardedPolicy{Policy: p}
	for _, w := range ws {
		g.extra = append(g.extra, policy.Ignore{
			Rule:     policy.Rule{Ref: w.By.Ref, Raw: fmt.Sprintf("ignore=%s (implicit: a rule file in %s)", w.File, w.By.Raw), Key: "ignore", Value: w.File},
			Pattern:  w.File,
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
// command there that the host runs later, outside any sandbox (a command of the
// user's shell, or a provider's own tool when no system directory holds it:
// package internal/systool looks there first).
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
