package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Reviewing a learned file before it joins a profile.
//
// Learning into a separate file (python-sb --learn=FILE, WithLearning(FILE),
// pysandboxes call --learn=FILE) leaves the profile untouched. ReviewLearned
// computes the text the profile would have with the learned rules merged into
// its marker blocks (comments and layout kept, as Learn merges), and Diff of the
// profile against that text: the grants, graded. LearnedReview.Apply writes that
// very text, and only under an approval that names every high-risk grant.

// ErrHighRisk is wrapped by the error of LearnedReview.Apply when a high-risk
// grant is not named by the approval (see HighRiskError).
var ErrHighRisk = errors.New("a high-risk grant needs an approval that names it")

// ErrStaleReview is wrapped by the error of LearnedReview.Apply when the approval
// was given for another review (its digest differs: a file changed since).
var ErrStaleReview = errors.New("the review approved is not this one")

// HighRiskError lists the high-risk grants an approval does not name.
type HighRiskError struct {
	Grants []Grant
}

func (e *HighRiskError) Error() string {
	names := make([]string, len(e.Grants))
	for i, g := range e.Grants {
		names[i] = g.Grant
	}
	return fmt.Sprintf("%v: %s", ErrHighRisk, strings.Join(names, "; "))
}

// Is makes errors.Is(err, ErrHighRisk) true.
func (e *HighRiskError) Is(target error) bool { return target == ErrHighRisk }

// ReviewOptions tune ReviewLearned and DiffFiles.
type ReviewOptions struct {
	// Options load the profile, the learned file and the merged text: Env, Dir,
	// Home (also the home directory whose credentials a grant may reach),
	// HostsFile, Resolver, Providers. Rules and Learn are not used. The loads log
	// nothing: their warnings are the profile's own.
	Options
	// Now dates the header of the merged rules. Zero means time.Now().
	Now time.Time
}

// NotMerged is a line of the learned file that the merge leaves out.
type NotMerged struct {
	// Rule is the line, with its place in the learned file.
	Rule Rule
	// Reason says why: not a learned rule (include, os-sandbox=...), already in
	// the profile, already granted, or does not load.
	Reason string
}

// LearnedReview is the review of merging a learned file into a profile.
type LearnedReview struct {
	// Profile and Learned are the absolute paths of the two files.
	Profile, Learned string
	// Exists reports that the profile exists; otherwise the merge creates it from
	// Template.
	Exists bool
	// Before is the profile's text; After the text the merge writes.
	Before, After []byte
	// Added are the learned rules merged, in the order of the learned file, each
	// with its place there.
	Added []Rule
	// NotMerged are the rule lines of the learned file left out, with the reason.
	NotMerged []NotMerged
	// Superseded are the rules of the profile that the merge comments out: an
	// expose-ro= of a directory learned read-write, a remote-result-mode= learned
	// otherwise.
	Superseded []Rule
	// Changes is what After grants that Before did not. A grant of a learned rule
	// names its place in the learned file.
	Changes *Changes
	// Digest identifies the review: the two files' paths and contents. An
	// approval that gives it is refused when any of them changed.
	Digest string

	perm fs.FileMode
}

// learnedSections maps the keys a learned file may hold to the section of the
// profile (its marker block) they are merged into. Any other line of a learned
// file (include, os-sandbox=, learn=, py-sandbox=, remote-result-guard=, a
// provider parameter) is not a learned rule and is never merged.
func learnedSection(key string) (int, bool) {
	switch {
	case key == "env" || key == "unenv" || key == "set-env" || key == "unset-env":
		return secEnv, true
	case key == "expose-ro" || key == "expose-rw" || key == "ignore":
		return secFiles, true
	case key == "net":
		return secNet, true
	case key == "python-import":
		return secImport, true
	case key == "python-api":
		return secAPI, true
	case strings.HasPrefix(key, "eval-"):
		return secEval, true
	case key == "remote-result-mode":
		return secResult, true
	}
	return 0, false
}

// ReviewLearned reviews merging the learned rule file into the profile (which may
// not exist yet: it is then made from Template). Nothing is written: Apply does
// that, after an approval.
//
// The rule lines of the learned file whose key is one that learning writes (env,
// unenv, expose-ro, expose-rw, ignore, net, python-import, python-api, eval-*,
// remote-result-mode) are the candidates; a candidate already in the profile as
// written, one that does not load on its own, and an expose of a directory the
// profile already exposes with the same or a stronger mode are left out (see
// NotMerged). The others are merged into the profile's marker blocks as Learn
// merges ("# Add rules (...)" headers, the comment lines just above each rule in
// the learned file kept with it, the blocks of a profile without markers
// appended at the end); an expose-ro= of the profile for a directory learned
// read-write, and a remote-result-mode= learned otherwise, are commented out.
// The merged text must load, or ReviewLearned returns the load error.
func ReviewLearned(ctx context.Context, profile, learned string, opts *ReviewOptions) (*LearnedReview, error) {
	o, err := resolveReviewOptions(opts)
	if err != nil {
		return nil, err
	}
	lopts := o.Options
	lopts.Rules, lopts.Learn, lopts.Logger = nil, false, slog.New(slog.DiscardHandler)
	abs := func(p string) string {
		if !filepath.IsAbs(p) {
			p = filepath.Join(o.Dir, p)
		}
		return filepath.Clean(p)
	}
	r := &LearnedReview{Profile: abs(profile), Learned: abs(learned)}
	showLearned := displayPath(r.Learned, o.Dir, o.Home)
	showProfile := displayPath(r.Profile, o.Dir, o.Home)

	learnedData, err := readRuleFile(r.Learned, true)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("policy: review: the learned file '%s' does not exist: %w", showLearned, err)
	}
	if err != nil {
		return nil, fmt.Errorf("policy: review: %w", err)
	}
	old, perm, existed, err := readLearnTarget(r.Profile)
	if err != nil {
		return nil, fmt.Errorf("policy: review: %w", err)
	}
	if existed {
		if a, err1 := os.Stat(r.Profile); err1 == nil {
			if b, err2 := os.Stat(r.Learned); err2 == nil && os.SameFile(a, b) {
				return nil, fmt.Errorf("policy: review: '%s' is the profile itself: learn into a file of its own", showLearned)
			}
		}
	}
	r.Exists, r.Before, r.perm = existed, old, perm
	if !existed {
		r.perm = 0o644
	}
	base := old
	var before *Policy
	if existed {
		if before, err = Parse(ctx, r.Profile, old, &lopts); err != nil {
			return nil, fmt.Errorf("policy: review: the profile '%s' does not load: %w", showProfile, err)
		}
	} else {
		base = []byte(Template())
	}
	basePol, err := Parse(ctx, r.Profile, base, &lopts)
	if err != nil {
		return nil, fmt.Errorf("policy: review: the profile '%s' does not load: %w", showProfile, err)
	}
	present := map[string]bool{}
	baseLines := strings.Split(string(base), "\n")
	for _, l := range baseLines {
		if s := strings.TrimSpace(l); s != "" {
			present[s] = true
		}
	}

	var plan learnPlan
	plan.edits = map[int][]string{}
	date := o.Now.Format(learnHeaderFormat)
	supersede := func(rule Rule, what string) bool {
		if rule.Ref.File != r.Profile || rule.Ref.Line < 1 || rule.Ref.Line > len(baseLines) {
			return false
		}
		i := rule.Ref.Line - 1
		plan.edits[i] = []string{"# Previous " + what + " superseded by approved learning on " + date + ":", "# " + strings.TrimSpace(baseLines[i])}
		r.Superseded = append(r.Superseded, rule)
		return true
	}
	learnedRef := Ref{File: r.Learned, Name: showLearned}
	var comments []string
	seen := map[string]bool{}
	origin := map[string]Rule{} // merged line -> the learned rule
	for i, raw := range strings.Split(string(learnedData), "\n") {
		trimmed := strings.TrimSpace(raw)
		text := stripComment(raw)
		if text == "" {
			switch {
			case trimmed == "" || markerRE.MatchString(trimmed):
				comments = nil
			case strings.HasPrefix(trimmed, "# Add rules (") || strings.HasPrefix(trimmed, "# not learned:") ||
				strings.HasPrefix(trimmed, "# Previous "):
			case strings.HasPrefix(trimmed, "#"):
				comments = append(comments, trimmed)
			}
			continue
		}
		ref := learnedRef
		ref.Line = i + 1
		key, value, _ := strings.Cut(text, "=")
		rule := Rule{Ref: ref, Key: key, Value: value, Raw: text}
		above := comments
		comments = nil
		if seen[text] {
			continue
		}
		seen[text] = true
		sec, ok := learnedSection(key)
		switch {
		case includeRE.MatchString(text):
			rule.Key, rule.Value = "include", ""
			r.NotMerged = append(r.NotMerged, NotMerged{rule, "an include is not a learned rule: add it by hand if the profile needs it"})
			continue
		case !ok:
			r.NotMerged = append(r.NotMerged, NotMerged{rule, "not a learned rule: learning writes env, files, net, imports, python-api, eval and result rules only; set it by hand if the profile needs it"})
			continue
		case present[text]:
			r.NotMerged = append(r.NotMerged, NotMerged{rule, "already in the profile"})
			continue
		}
		alone, err := Parse(ctx, r.Profile, []byte(text), &lopts)
		if err != nil {
			msg := err.Error()
			var ce ConfigErrors
			if errors.As(err, &ce) && len(ce) > 0 {
				msg = ce[0].Msg
			}
			r.NotMerged = append(r.NotMerged, NotMerged{rule, "does not load: " + msg})
			continue
		}
		if skip := r.checkCandidate(basePol, alone, supersede); skip != "" {
			r.NotMerged = append(r.NotMerged, NotMerged{rule, skip})
			continue
		}
		block := learnBlock{entries: []string{text}}
		if len(plan.sections[sec]) == 0 {
			block.headers = []string{"# Approved from '" + showLearned + "' after review (pysandboxes diff --approve)"}
		}
		block.headers = append(block.headers, above...)
		plan.sections[sec] = append(plan.sections[sec], block)
		r.Added = append(r.Added, rule)
		origin[text] = rule
	}
	if len(plan.edits) == 0 {
		plan.edits = nil
	}
	merged, _ := mergeLearned(string(base), plan, o.Now)
	if !existed && len(r.Added) == 0 {
		merged = "" // nothing to create
	}
	r.After = []byte(merged)
	after := before
	if len(r.Added) > 0 || len(r.Superseded) > 0 {
		if after, err = Parse(ctx, r.Profile, r.After, &lopts); err != nil {
			return nil, fmt.Errorf("policy: review: the profile '%s' with the rules of '%s' does not load: %w", showProfile, showLearned, err)
		}
	}
	var afterText []byte
	if after != nil {
		afterText = r.After
	}
	r.Changes = diffPolicies(before, after, &DiffOptions{Home: o.Home}, old, afterText)
	for i := range r.Changes.Grants {
		g := &r.Changes.Grants[i]
		if lr, ok := origin[strings.TrimSpace(g.Rule.Raw)]; ok && g.Rule.Ref.File == r.Profile {
			g.Rule.Ref = lr.Ref
		}
	}
	r.Digest = reviewDigest(r.Profile, old, r.Learned, learnedData)
	return r, nil
}

// checkCandidate returns why a learned rule that loads alone is left out, or ""
// to merge it; it supersedes the profile's rule that the candidate replaces.
func (r *LearnedReview) checkCandidate(base, alone *Policy, supersede func(Rule, string) bool) string {
	switch {
	case len(alone.exposes) == 1:
		e := alone.exposes[0]
		for i, br := range base.rules {
			dir, ok := base.exposeAt[i]
			if !ok || dir != e.Path {
				continue
			}
			mode := ReadOnly
			if br.Key == "expose-rw" || br.Key == "bind" {
				mode = ReadWrite
			}
			if mode >= e.Mode {
				return fmt.Sprintf("already exposed %s by '%s' (%s)", mode.words(), br.Raw, br.Ref)
			}
			// Learned read-write where the profile says read-only: the learned
			// rule replaces it (in an included file it stays, and the merge
			// does not load).
			supersede(br, "rule")
		}
	case alone.control["remote-result-mode"] != nil:
		m, _ := alone.RemoteResultMode()
		if was, rule := base.RemoteResultMode(); rule != nil {
			if was == m {
				return fmt.Sprintf("already set by '%s' (%s)", rule.Raw, rule.Ref)
			}
			supersede(*rule, "mode")
		}
	}
	return ""
}

// reviewDigest identifies a review by the files it read.
func reviewDigest(profile string, old []byte, learned string, data []byte) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte("pysandboxes review 1"), []byte(profile), old, []byte(learned), data} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// Approval is what a reviewer approves.
type Approval struct {
	// AllowHigh names each high-risk grant to merge, by its Grant text (for
	// example "python-import=ctypes") or by the rule line that carries it. A
	// high-risk grant not named here refuses the whole merge, and a name that is
	// not a high-risk grant of the review is an error (a typo must not pass).
	AllowHigh []string
	// Digest, when set, must be the review's Digest: the approval was given for
	// this very review.
	Digest string
}

// Unapproved returns the high-risk grants of the review that a does not name.
func (r *LearnedReview) Unapproved(a Approval) []Grant {
	var out []Grant
	for _, g := range r.Changes.Grants {
		if g.Risk == RiskHigh && !slices.Contains(a.AllowHigh, g.Grant) && !slices.Contains(a.AllowHigh, g.Rule.Raw) {
			out = append(out, g)
		}
	}
	return out
}

// Apply writes After over the profile under approval a, and returns the backup
// made of the previous profile ("" for a new one, and when there was nothing to
// merge: then nothing is written).
//
// It refuses, writing nothing, when a.Digest is set and is not the review's
// (ErrStaleReview), when a high-risk grant is not named by a.AllowHigh
// (*HighRiskError, ErrHighRisk), when a.AllowHigh names something that is not a
// high-risk grant of the review, and when the profile changed since the review.
// The write is Learn's: the previous file copied to PROFILE.old (or .old_N),
// the new text written next to it and renamed over it, a symbolic link refused.
func (r *LearnedReview) Apply(a Approval) (string, error) {
	if a.Digest != "" && a.Digest != r.Digest {
		return "", fmt.Errorf("policy: approve: %w: the approval is for review %s, the files now give %s", ErrStaleReview, a.Digest, r.Digest)
	}
	for _, name := range a.AllowHigh {
		if !slices.ContainsFunc(r.Changes.Grants, func(g Grant) bool {
			return g.Risk == RiskHigh && (g.Grant == name || g.Rule.Raw == name)
		}) {
			return "", fmt.Errorf("policy: approve: '%s' is not a high-risk grant of this review", name)
		}
	}
	if un := r.Unapproved(a); len(un) > 0 {
		return "", fmt.Errorf("policy: approve: %w", &HighRiskError{Grants: un})
	}
	if len(r.Added) == 0 && len(r.Superseded) == 0 {
		return "", nil
	}
	backup, err := writeLearned(r.Profile, r.After, r.Before, r.perm, r.Exists)
	if err != nil {
		return "", fmt.Errorf("policy: approve: %w", err)
	}
	return backup, nil
}

// DiffFiles loads the rule files before and after (with their includes) and
// returns what after grants that before did not (see Diff), their include lines
// compared too. A missing file is an error wrapping ErrMissing (compare with
// /dev/null for a new profile).
func DiffFiles(ctx context.Context, before, after string, opts *ReviewOptions) (*Changes, error) {
	o, err := resolveReviewOptions(opts)
	if err != nil {
		return nil, err
	}
	lopts := o.Options
	lopts.Rules, lopts.Learn, lopts.Logger = nil, false, slog.New(slog.DiscardHandler)
	load := func(path string) (*Policy, []byte, error) {
		abs := path
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(o.Dir, abs)
		}
		abs = filepath.Clean(abs)
		data, err := readRuleFile(abs, false)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, &MissingError{Path: abs, Name: displayPath(abs, o.Dir, o.Home)}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("policy: %w", err)
		}
		p, err := Parse(ctx, abs, data, &lopts)
		return p, data, err
	}
	bp, bt, err := load(before)
	if err != nil {
		return nil, err
	}
	ap, at, err := load(after)
	if err != nil {
		return nil, err
	}
	return diffPolicies(bp, ap, &DiffOptions{Home: o.Home}, bt, at), nil
}

// resolveReviewOptions fills the defaults of opts.
func resolveReviewOptions(opts *ReviewOptions) (ReviewOptions, error) {
	var o ReviewOptions
	if opts != nil {
		o = *opts
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.Dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return o, fmt.Errorf("policy: current directory: %w", err)
		}
		o.Dir = wd
	}
	if !filepath.IsAbs(o.Dir) {
		a, err := filepath.Abs(o.Dir)
		if err != nil {
			return o, fmt.Errorf("policy: current directory: %w", err)
		}
		o.Dir = a
	}
	if o.Home == "" {
		o.Home, _ = os.UserHomeDir()
	}
	return o, nil
}
