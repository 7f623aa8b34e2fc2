package pysandboxes

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

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
//
// watch, when not nil, is given the files left writable: the sandbox's Close
// says which of them changed (ruleWatch).
func guardRuleFiles(p *policy.Policy, caps Capability, logger *slog.Logger, watch *ruleWatch) driver.Policy {
	ws := p.WritableRuleFiles()
	if len(ws) == 0 {
		return p
	}
	if !caps.Has(CapHide) {
		for _, w := range ws {
			logger.Warn("a sandboxed program may rewrite a rule file of its policy, and the next run would obey what it wrote: keep the rule file out of the expose-rw= directory, or use a provider that enforces hide (it is then hidden from the program)",
				"file", w.File, "rule", w.By.Ref.String()+": "+w.By.Raw)
			if watch != nil {
				watch.add(w)
			}
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

// ruleWatch keeps what the rule files a sandboxed program may rewrite held
// when the sandbox was made (a provider without hide cannot keep them from
// the program: guardRuleFiles), so that the sandbox's Close can say which of
// them changed meanwhile: the next run would obey what a program wrote there.
// It reports; it restores nothing (the user may have edited the file).
type ruleWatch struct {
	files []watchedRuleFile
	once  sync.Once
}

type watchedRuleFile struct {
	w      policy.WritableRuleFile
	sum    [sha256.Size]byte
	exists bool
}

// ruleFileSum returns the digest of path's content, and whether it exists
// (a file that cannot be read counts as missing).
func ruleFileSum(path string) ([sha256.Size]byte, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return [sha256.Size]byte{}, false
	}
	return sha256.Sum256(b), true
}

func (rw *ruleWatch) add(w policy.WritableRuleFile) {
	sum, ok := ruleFileSum(w.File)
	rw.files = append(rw.files, watchedRuleFile{w: w, sum: sum, exists: ok})
}

// changed returns the watched files whose content changed, that appeared or
// that went away since they were added; it looks once (later calls: nil).
func (rw *ruleWatch) changed() []policy.WritableRuleFile {
	var out []policy.WritableRuleFile
	rw.once.Do(func() {
		for _, f := range rw.files {
			sum, ok := ruleFileSum(f.w.File)
			if ok != f.exists || !bytes.Equal(sum[:], f.sum[:]) {
				out = append(out, f.w)
			}
		}
	})
	return out
}

// report warns, on logger, of each watched rule file that changed.
func (rw *ruleWatch) report(logger *slog.Logger) {
	for _, w := range rw.changed() {
		logger.Warn("a rule file of this sandbox's policy changed while the sandbox was open, and the sandbox could not keep its programs from writing it: review it before the next run, which would obey it",
			"file", w.File, "rule", w.By.Ref.String()+": "+w.By.Raw)
	}
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
