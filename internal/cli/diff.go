package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pysandboxes/pysandboxes/policy"
)

// Exit codes of pysandboxes diff.
const (
	ExitDiffError     = 1  // a file is missing or does not load, or the merge failed
	ExitNotMerged     = 3  // --approve (or the prompt) did not merge: a high-risk grant not named, the answer no, a stale --digest
	ExitDiffLow       = 10 // the highest grade granted is low
	ExitDiffMedium    = 11 // ... medium
	ExitDiffHigh      = 12 // ... high
	diffPromptMaxLine = 1024
)

type diffOptions struct {
	json      bool
	learned   string
	config    string
	approve   bool
	allowHigh []string
	digest    string
}

func diffCommand(o *diffOptions) *command {
	return &command{
		name:     "diff",
		synopsis: "[--json] OLD NEW | [--json] --learned FILE [--config PROFILE] [--approve [--allow-high=GRANT]... [--digest=D]]",
		summary:  "what a change to a profile grants, graded; review and merge a learned file",
		about: `Shows what the rule file NEW grants that OLD did not: each added or widened rule
(a new rule, a wider directory, mode, address range or category, a removed DENY,
unenv= or ignore=), graded low, medium or high with the reason. The files are
compared by what they allow, not by their text: a rule moved to an included file
or re-spelled grants nothing. Compare with /dev/null for a new profile.

With --learned FILE, compares the profile (--config, else the .py-sandboxes found
from the working directory; it may not exist yet) with the profile as it would be
with the rules of FILE merged, FILE being a learned file (python-sb --learn=FILE,
WithLearning(FILE), pysandboxes call --learn=FILE). Nothing is written unless:

  --approve       the diff is printed, then merged into the profile (a backup of
                  the profile is kept as PROFILE.old). A high-risk grant is merged
                  only when --allow-high names it (as the diff shows it, e.g.
                  --allow-high=python-import=ctypes); otherwise nothing is merged.
  a terminal      without --approve, when stdin and stdout are a terminal, the
                  diff is printed and a prompt asks whether to merge it (high-risk
                  grants again only when --allow-high names them).

--digest gives the digest a previous diff --json printed: the merge is refused if
the profile or the learned file changed since (the review a human saw is the one
merged).

With --json, prints one JSON object (the "format" field is 1; fields are only ever
added):

  {"format": 1, "old": "...", "new": "...", "highest": "high",
   "grants": [{"risk": "high", "family": "python-import", "grant": "python-import=ctypes",
               "file": "learned.rules", "line": 3, "rule": "python-import=ctypes",
               "removed": false, "reason": "..."}],
   "removed": [{"file": ".py-sandboxes", "line": 2, "rule": "..."}],
   "not_merged": [{"file": "learned.rules", "line": 1, "rule": "...", "reason": "..."}],
   "digest": "...", "merged": false, "backup": ""}

"not_merged", "digest", "merged" and "backup" are given with --learned.
`,
		options: []*option{
			jsonFlag(&o.json),
			{name: "learned", arg: "FILE", complete: valueFile,
				help: "review the learned rule file FILE against the profile",
				set:  func(v string) error { o.learned = v; return nil }},
			{name: "config", arg: "PROFILE", complete: valueFile,
				help: "with --learned: the profile (default: the .py-sandboxes found from the working directory)",
				set:  func(v string) error { o.config = v; return nil }},
			flag("approve", "", "with --learned: print the diff, then merge it into the profile", &o.approve),
			{name: "allow-high", arg: "GRANT",
				help: "with --approve or at the prompt: merge this high-risk grant, as the diff names it (repeat for each)",
				set: func(v string) error {
					if strings.TrimSpace(v) == "" {
						return errors.New("names a high-risk grant, as the diff shows it")
					}
					o.allowHigh = append(o.allowHigh, v)
					return nil
				}},
			{name: "digest", arg: "D",
				help: "with --approve: merge only if the files are those of the review with this digest",
				set:  func(v string) error { o.digest = v; return nil }},
		},
		operands: valueFile,
		exits: []exitCode{
			{"0", "nothing is granted; with --approve or at the prompt: merged (or nothing to merge)"},
			{"1", "a file is missing or does not load, or the merge failed"},
			{"2", "a bad command line"},
			{"3", "not merged: a high-risk grant not named by --allow-high, the prompt answered no, or a stale --digest"},
			{"10", "the highest grade granted is low"},
			{"11", "the highest grade granted is medium"},
			{"12", "the highest grade granted is high"},
		},
	}
}

// diffReport is diff's result, as --json prints it.
type diffReport struct {
	Format    int             `json:"format"`
	Old       string          `json:"old"`
	New       string          `json:"new"`
	Highest   policy.Risk     `json:"highest"`
	Grants    []diffGrant     `json:"grants"`
	Removed   []diffRule      `json:"removed"`
	NotMerged []diffNotMerged `json:"not_merged,omitempty"`
	Digest    string          `json:"digest,omitempty"`
	Merged    bool            `json:"merged"`
	Backup    string          `json:"backup,omitempty"`
	Refused   []string        `json:"refused,omitempty"`
}

type diffGrant struct {
	Risk    policy.Risk `json:"risk"`
	Family  string      `json:"family"`
	Grant   string      `json:"grant"`
	File    string      `json:"file"`
	Line    int         `json:"line"`
	Rule    string      `json:"rule"`
	Removed bool        `json:"removed"`
	Reason  string      `json:"reason"`
}

type diffRule struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Rule string `json:"rule"`
}

type diffNotMerged struct {
	diffRule
	Reason string `json:"reason"`
}

func ruleFile(r policy.Rule) string {
	if r.Ref.IsArg() {
		return "<arg>"
	}
	return refName(r.Ref)
}

func newDiffReport(old, new string, c *policy.Changes) *diffReport {
	rep := &diffReport{Format: 1, Old: old, New: new, Highest: c.Highest(), Grants: []diffGrant{}, Removed: []diffRule{}}
	for _, g := range c.Grants {
		rep.Grants = append(rep.Grants, diffGrant{Risk: g.Risk, Family: g.Family, Grant: g.Grant,
			File: ruleFile(g.Rule), Line: g.Rule.Ref.Line, Rule: g.Rule.Raw, Removed: g.Removed, Reason: g.Reason})
	}
	for _, r := range c.Removed {
		rep.Removed = append(rep.Removed, diffRule{File: ruleFile(r), Line: r.Ref.Line, Rule: r.Raw})
	}
	return rep
}

func diffExit(r policy.Risk) int {
	switch r {
	case policy.RiskLow:
		return ExitDiffLow
	case policy.RiskMedium:
		return ExitDiffMedium
	case policy.RiskHigh:
		return ExitDiffHigh
	}
	return ExitOK
}

func diffCmd(ctx context.Context, args []string, env *Env) int {
	o := &diffOptions{}
	c := diffCommand(o)
	p, code, ok := c.begin(args, env)
	if !ok {
		return code
	}
	switch {
	case o.learned == "" && len(p.operands) != 2:
		return usageFailure(env, c, usagef("give two rule files, OLD and NEW (or --learned FILE)"))
	case o.learned != "" && len(p.operands) > 0:
		return usageFailure(env, c, usagef("--learned compares with the profile (--config): no operand (got %q)", p.operands[0]))
	case o.learned == "" && (o.approve || o.config != "" || len(o.allowHigh) > 0 || o.digest != ""):
		return usageFailure(env, c, usagef("--config, --approve, --allow-high and --digest go with --learned"))
	case !o.approve && o.digest != "":
		return usageFailure(env, c, usagef("--digest goes with --approve"))
	}
	ropts := &policy.ReviewOptions{Options: policy.Options{Env: env.environ()}}
	if o.learned == "" {
		ch, err := policy.DiffFiles(ctx, p.operands[0], p.operands[1], ropts)
		if err != nil {
			fmt.Fprintf(env.Stderr, "pysandboxes diff: %v\n", err)
			return ExitDiffError
		}
		rep := newDiffReport(shownName(p.operands[0]), shownName(p.operands[1]), ch)
		printDiff(env, o, rep)
		return diffExit(rep.Highest)
	}
	profile := o.config
	if profile == "" {
		profile, _ = policy.Discover(policy.Discovery{})
	}
	r, err := policy.ReviewLearned(ctx, profile, o.learned, ropts)
	if err != nil {
		fmt.Fprintf(env.Stderr, "pysandboxes diff: %v\n", err)
		return ExitDiffError
	}
	rep := newDiffReport(shownName(r.Profile), shownName(r.Learned), r.Changes)
	rep.Digest = r.Digest
	for _, n := range r.NotMerged {
		rep.NotMerged = append(rep.NotMerged, diffNotMerged{diffRule{File: ruleFile(n.Rule), Line: n.Rule.Ref.Line, Rule: n.Rule.Raw}, n.Reason})
	}
	ask := !o.approve && !o.json && isTerminal(env.Stdin) && isTerminal(env.Stdout)
	if !o.approve && !ask {
		printDiff(env, o, rep)
		return diffExit(rep.Highest)
	}
	// Approval: the diff is shown first, always.
	if !o.json {
		printDiff(env, o, rep)
	}
	nothing := len(r.Added) == 0 && len(r.Superseded) == 0
	approval := policy.Approval{AllowHigh: o.allowHigh, Digest: o.digest}
	if un := r.Unapproved(approval); len(un) > 0 && !nothing {
		for _, g := range un {
			rep.Refused = append(rep.Refused, g.Grant)
		}
		if o.json {
			printDiff(env, o, rep)
		}
		fmt.Fprintf(env.Stderr, "pysandboxes diff: nothing merged: %d high-risk grant(s) need an approval that names each:\n", len(un))
		for _, g := range un {
			fmt.Fprintf(env.Stderr, "  --allow-high=%s\n", shellWord(g.Grant))
		}
		return ExitNotMerged
	}
	if ask && !nothing {
		fmt.Fprintf(env.Stdout, "\nMerge these rules into %s? [y/N] ", rep.Old)
		if !readYes(env.Stdin) {
			fmt.Fprintln(env.Stdout, "Nothing merged.")
			return ExitNotMerged
		}
	}
	backup, err := r.Apply(approval)
	if err != nil {
		if o.json {
			printDiff(env, o, rep)
		}
		fmt.Fprintf(env.Stderr, "pysandboxes diff: %v\n", err)
		if errors.Is(err, policy.ErrStaleReview) || errors.Is(err, policy.ErrHighRisk) {
			return ExitNotMerged
		}
		return ExitDiffError
	}
	rep.Merged = !nothing
	if backup != "" {
		rep.Backup = shownName(backup)
	}
	if o.json {
		printDiff(env, o, rep)
	} else if nothing {
		fmt.Fprintf(env.Stdout, "Nothing to merge: %s already holds what %s grants.\n", rep.Old, rep.New)
	} else {
		fmt.Fprintf(env.Stdout, "Merged %d rule(s) into %s", len(r.Added), rep.Old)
		if backup != "" {
			fmt.Fprintf(env.Stdout, " (the previous profile is kept as %s)", rep.Backup)
		}
		fmt.Fprintln(env.Stdout, ".")
	}
	return ExitOK
}

// printDiff prints the report: JSON, or one block per grant, riskiest first.
func printDiff(env *Env, o *diffOptions, rep *diffReport) {
	if o.json {
		out, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintf(env.Stdout, "%s\n", out)
		return
	}
	w := env.Stdout
	if o.learned != "" {
		fmt.Fprintf(w, "Merging %s into %s grants:\n", rep.New, rep.Old)
	} else {
		fmt.Fprintf(w, "%s grants over %s:\n", rep.New, rep.Old)
	}
	if len(rep.Grants) == 0 {
		fmt.Fprintln(w, "  nothing")
	}
	for _, g := range rep.Grants {
		where := g.File
		if g.Line > 0 {
			where = fmt.Sprintf("%s(%d)", g.File, g.Line)
		}
		fmt.Fprintf(w, "  %-6s %s   [%s]\n         %s\n", strings.ToUpper(g.Risk.String()), g.Grant, where, g.Reason)
	}
	if len(rep.NotMerged) > 0 {
		fmt.Fprintln(w, "Left out:")
		for _, n := range rep.NotMerged {
			fmt.Fprintf(w, "  %s(%d) %s: %s\n", n.File, n.Line, n.Rule, n.Reason)
		}
	}
	if len(rep.Grants) > 0 {
		fmt.Fprintf(w, "Highest: %s", rep.Highest)
		if rep.Digest != "" {
			fmt.Fprintf(w, " (review %s)", rep.Digest)
		}
		fmt.Fprintln(w)
	}
}

// readYes reads one line from r and reports whether it says yes.
func readYes(r io.Reader) bool {
	if r == nil {
		return false
	}
	line, err := bufio.NewReaderSize(io.LimitReader(r, diffPromptMaxLine), diffPromptMaxLine).ReadString('\n')
	if err != nil && line == "" {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r == '/' || r == '=' || r == ':' || r == ',' || r == '~' ||
			'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// isTerminal reports whether f is an *os.File open on a terminal.
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	return ok && file != nil && fileIsTerminal(file)
}
