package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pysandboxes/pysandboxes/policy"
)

type checkOptions struct {
	json    bool
	verbose bool
}

func checkCommand(o *checkOptions) *command {
	return &command{
		name:     "check",
		synopsis: "[--json] [-v] [FILE]",
		summary:  "validate a rule file (default: the .py-sandboxes of the current directory)",
		about: `Validates a rule file (default: the .py-sandboxes of the current directory) and its
includes. Prints one line per problem, "FILE(LINE): message", sorted by file and line;
warnings are printed the same way, "FILE(LINE): warning: message", and do not fail the
check.

With --json, prints one JSON object instead (the "format" field is 1; fields are only
ever added):

  {"format": 1, "file": ".py-sandboxes", "valid": false,
   "errors":   [{"file": "common", "line": 1, "message": "...",
                 "also": [{"file": "sub/extra", "line": 1}]}],
   "warnings": [{"file": ".py-sandboxes", "line": 4, "message": "..."}]}

"file" is the file as shown to people (relative to the working directory when under
it); "line" is 0 when the problem has none; "also" lists the other rules involved, when
there are any. A missing rule file is one error, "rule file not found", on line 0.
`,
		options: []*option{
			jsonFlag(&o.json),
			flag("verbose", "-v", "debug output on stderr; say when the file is valid", &o.verbose),
		},
		operands: valueFile,
		exits: []exitCode{
			{"0", "the rule file is valid (warnings may have been printed)"},
			{"1", "the rule file has errors, or does not exist"},
			{"2", "a bad command line"},
		},
	}
}

// checkReport is check's result, as --json prints it.
type checkReport struct {
	Format   int            `json:"format"`
	File     string         `json:"file"`
	Valid    bool           `json:"valid"`
	Errors   []checkProblem `json:"errors"`
	Warnings []checkProblem `json:"warnings"`
}

type checkProblem struct {
	File    string     `json:"file"`
	Line    int        `json:"line"`
	Message string     `json:"message"`
	Also    []checkRef `json:"also,omitempty"`
}

type checkRef struct {
	File string `json:"file"`
	Line int    `json:"line"`
}

func check(ctx context.Context, args []string, env *Env) int {
	o := &checkOptions{}
	c := checkCommand(o)
	p, code, ok := c.begin(args, env)
	if !ok {
		return code
	}
	switch {
	case len(p.operands) > 1:
		return usageFailure(env, c, usagef("one file at a time (got %q and %q)", p.operands[0], p.operands[1]))
	}
	file := ""
	if len(p.operands) == 1 {
		file = p.operands[0]
	}
	if file == "" {
		file, _ = policy.Discover(policy.Discovery{})
	}
	log, st := newLogger(env.Stderr, "pysandboxes check", o.verbose)
	var logged []warning
	st.collect = func(w warning) { logged = append(logged, w) }
	pol, err := policy.Load(ctx, file, &policy.Options{Env: env.environ(), Logger: log})

	rep := checkReport{Format: 1, File: shownName(file), Errors: []checkProblem{}, Warnings: []checkProblem{}}
	var ce policy.ConfigErrors
	var me *policy.MissingError
	switch {
	case errors.As(err, &ce):
		for _, e := range ce {
			pr := checkProblem{File: refName(e.Ref), Line: e.Ref.Line, Message: e.Msg}
			for _, a := range e.Also {
				pr.Also = append(pr.Also, checkRef{File: refName(a), Line: a.Line})
			}
			rep.Errors = append(rep.Errors, pr)
		}
	case errors.As(err, &me):
		rep.Errors = append(rep.Errors, checkProblem{File: me.Name, Message: "rule file not found"})
	case err != nil:
		rep.Errors = append(rep.Errors, checkProblem{File: rep.File, Message: err.Error()})
	}
	// The warnings: the policy's own when it loaded, else what was logged.
	if pol != nil {
		for _, w := range pol.Warnings() {
			rep.Warnings = append(rep.Warnings, checkProblem{File: refName(w.Ref), Line: w.Ref.Line, Message: w.Msg})
		}
	} else {
		for _, w := range logged {
			f, l := splitRef(w.where)
			if w.where == "" {
				f = rep.File
			}
			rep.Warnings = append(rep.Warnings, checkProblem{File: f, Line: l, Message: w.msg})
		}
	}
	// A rule file an expose-rw= directory holds: a sandbox could rewrite it
	// unless the provider hides it (one that enforces hide does).
	if pol != nil {
		for _, w := range pol.WritableRuleFiles() {
			msg := fmt.Sprintf("expose-rw=%s holds the rule file %s: a sandbox could rewrite it, and the next run "+
				"would obey what it wrote, unless the provider hides it (one that enforces hide does); keep the "+
				"rule file out of that directory", w.By.Path, w.File)
			rep.Warnings = append(rep.Warnings, checkProblem{File: refName(w.By.Ref), Line: w.By.Ref.Line, Message: msg})
		}
	}
	rep.Warnings = slices.CompactFunc(rep.Warnings, func(a, b checkProblem) bool { return a.File == b.File && a.Line == b.Line && a.Message == b.Message })
	rep.Valid = len(rep.Errors) == 0

	if o.json {
		out, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintf(env.Stdout, "%s\n", out)
	} else {
		printCheck(env, rep, ce)
	}
	if !rep.Valid {
		return ExitInvalid
	}
	if o.verbose && !o.json {
		fmt.Fprintf(env.Stderr, "%s: valid, %d rules\n", rep.File, len(pol.Rules()))
	}
	return ExitOK
}

// printCheck prints the errors and warnings, sorted by file and line (the
// errors as policy renders them: "a(1) and b(2): message" for several rules).
func printCheck(env *Env, rep checkReport, ce policy.ConfigErrors) {
	type item struct {
		file string
		line int
		text string
	}
	var items []item
	for i, e := range rep.Errors {
		text := e.File + ": " + e.Message
		switch {
		case i < len(ce):
			text = ce[i].Error()
			if e.Message != ce[i].Msg {
				text += e.Message[len(ce[i].Msg):]
			}
		case e.Line > 0:
			text = fmt.Sprintf("%s(%d): %s", e.File, e.Line, e.Message)
		}
		items = append(items, item{e.File, e.Line, text})
	}
	for _, w := range rep.Warnings {
		where := w.File
		if w.Line > 0 {
			where = fmt.Sprintf("%s(%d)", w.File, w.Line)
		}
		items = append(items, item{w.File, w.Line, where + ": warning: " + w.Message})
	}
	slices.SortStableFunc(items, func(a, b item) int {
		if c := cmp.Compare(a.file, b.file); c != 0 {
			return c
		}
		return cmp.Compare(a.line, b.line)
	})
	for _, it := range items {
		fmt.Fprintln(env.Stdout, it.text)
	}
}

// shownName is a file name as shown to people: relative to the working
// directory when it lies under it.
func shownName(file string) string {
	if !filepath.IsAbs(file) {
		return file
	}
	wd, err := os.Getwd()
	if err != nil {
		return file
	}
	if rel, err := filepath.Rel(wd, file); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return rel
	}
	return file
}

// refName is the file of a rule as shown to people.
func refName(r policy.Ref) string {
	if r.Name != "" {
		return r.Name
	}
	return r.File
}
