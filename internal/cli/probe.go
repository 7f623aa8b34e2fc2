package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/suggest"
)

type probeOptions struct {
	json    bool
	verbose bool
}

func probeCommand(o *probeOptions) *command {
	return &command{
		name:     "probe",
		synopsis: "[--json] [-v] [PROVIDER ...]",
		summary:  "show which OS providers work here and what each enforces",
		about: `Lists every OS provider (or the ones named), whether it works on this host (and why
not), which capabilities it enforces here and which not, and how. Long lists (the
paths a provider grants implicitly) are counted; --verbose, or naming the provider,
lists them.

With --json, prints one JSON object instead (the "format" field is 1; fields are only
ever added):

  {"format": 1,
   "providers": [{"name": "landlock", "available": true, "error": "",
                  "debugging_only": false,
                  "enforces": ["env", "files-read", ...],
                  "does_not_enforce": ["hide", ...],
                  "details": [{"text": "Landlock ABI 7: ..."},
                              {"text": "implicit grants for /usr/bin/python3 (57 paths)",
                               "items": ["/etc/ld.so.cache (loader cache)", ...]}]}],
   "capabilities": [{"name": "env", "description": "..."}]}

"error" says what is missing when "available" is false; "details" are empty then.
Lists in "details" are always complete.
`,
		options: []*option{
			jsonFlag(&o.json),
			flag("verbose", "-v", "list the implicit grants and other long lists in full", &o.verbose),
		},
		operands: valueProvider,
		exits: []exitCode{
			{"0", "the report was printed (whether or not a provider is available)"},
			{"2", "a bad command line (an unknown provider)"},
		},
	}
}

// probeReport is probe's result, as --json prints it.
type probeReport struct {
	Format       int             `json:"format"`
	Providers    []probeProvider `json:"providers"`
	Capabilities []probeCap      `json:"capabilities"`
}

type probeProvider struct {
	Name           string        `json:"name"`
	Available      bool          `json:"available"`
	Error          string        `json:"error"`
	DebuggingOnly  bool          `json:"debugging_only"`
	Enforces       []string      `json:"enforces"`
	DoesNotEnforce []string      `json:"does_not_enforce"`
	Details        []probeDetail `json:"details"`
}

type probeDetail struct {
	Text  string   `json:"text"`
	Items []string `json:"items,omitempty"`
}

type probeCap struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// probeWidth is the width of probe's report.
const probeWidth = 100

func probe(ctx context.Context, args []string, env *Env) int {
	o := &probeOptions{}
	c := probeCommand(o)
	p, code, ok := c.begin(args, env)
	if !ok {
		return code
	}
	all := pysandboxes.Providers()
	var names []string
	for _, pr := range all {
		names = append(names, pr.Name())
	}
	chosen := all
	if len(p.operands) > 0 {
		chosen = nil
		for _, n := range p.operands {
			pr, ok := pysandboxes.Lookup(n)
			if !ok {
				msg := fmt.Sprintf("unknown provider %q", n)
				if s, ok := suggest.Closest(n, names); ok {
					msg += "; did you mean " + s + "?"
				} else {
					msg += " (the providers: " + strings.Join(names, ", ") + ")"
				}
				return usageFailure(env, c, usagef("%s", msg))
			}
			chosen = append(chosen, pr)
		}
		o.verbose = true
	}
	rep := probeReport{Format: 1}
	for _, pr := range chosen {
		caps := pr.Capabilities()
		pp := probeProvider{
			Name: pr.Name(), Available: true, DebuggingOnly: pr.Name() == "none",
			Enforces: capNames(caps), DoesNotEnforce: capNames(pysandboxes.AllCapabilities &^ caps),
			Details: []probeDetail{},
		}
		if err := pr.Probe(ctx); err != nil {
			pp.Available, pp.Error = false, err.Error()
		} else if d, ok := pr.(interface{ Details() []string }); ok {
			pp.Details = parseDetails(d.Details())
		}
		rep.Providers = append(rep.Providers, pp)
	}
	for _, cp := range pysandboxes.AllCapabilities.List() {
		rep.Capabilities = append(rep.Capabilities, probeCap{Name: cp.String(), Description: cp.Describe()})
	}
	if o.json {
		out, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintf(env.Stdout, "%s\n", out)
		return ExitOK
	}
	printProbe(env, rep, o.verbose)
	return ExitOK
}

func capNames(c pysandboxes.Capability) []string {
	out := []string{}
	for _, b := range c.List() {
		out = append(out, b.String())
	}
	return out
}

// listHeader is a detail line that heads a list of paths: "implicit grants for
// /usr/bin/python3 (57 paths):", followed by the paths on lines of their own
// (indented) or on the same line, separated by ", ".
var listHeader = regexp.MustCompile(`^((.*) \((\d+) paths\)):\s*(.*)$`)

// parseDetails reads a provider's detail lines into texts and lists.
func parseDetails(lines []string) []probeDetail {
	out := []probeDetail{}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		m := listHeader.FindStringSubmatch(l)
		if m == nil {
			out = append(out, probeDetail{Text: strings.TrimSpace(l)})
			continue
		}
		d := probeDetail{Text: m[1], Items: []string{}}
		if m[4] != "" {
			d.Items = strings.Split(m[4], ", ")
		}
		for i+1 < len(lines) && strings.HasPrefix(lines[i+1], " ") {
			i++
			d.Items = append(d.Items, strings.TrimSpace(lines[i]))
		}
		out = append(out, d)
	}
	return out
}

// printProbe prints the report for people, in probeWidth columns.
func printProbe(env *Env, rep probeReport, verbose bool) {
	w := env.Stdout
	nameW := len("PROVIDER")
	for _, p := range rep.Providers {
		nameW = max(nameW, len(p.Name))
	}
	nameW += 2
	fmt.Fprintf(w, "%-*s%s\n", nameW, "PROVIDER", "STATUS")
	for _, p := range rep.Providers {
		status := "available"
		switch {
		case !p.Available:
			status = "unavailable: " + p.Error
		case p.DebuggingOnly:
			status += " (debugging only: no sandbox)"
		}
		printWrapped(env, fmt.Sprintf("%-*s", nameW, p.Name), status, nameW+2)
	}

	// The capability matrix: one row per capability, one column per provider.
	capW := len("CAPABILITY")
	for _, c := range rep.Capabilities {
		capW = max(capW, len(c.Name))
	}
	capW += 2
	fmt.Fprintf(w, "\n%-*s", capW, "CAPABILITY")
	for i, p := range rep.Providers {
		if i < len(rep.Providers)-1 {
			fmt.Fprintf(w, "%-*s", len(p.Name)+2, p.Name)
		} else {
			fmt.Fprint(w, p.Name)
		}
	}
	fmt.Fprintln(w)
	for _, c := range rep.Capabilities {
		row := fmt.Sprintf("%-*s", capW, c.Name)
		for _, p := range rep.Providers {
			mark := "-"
			for _, e := range p.Enforces {
				if e == c.Name {
					mark = "yes"
				}
			}
			row += fmt.Sprintf("%-*s", len(p.Name)+2, mark)
		}
		fmt.Fprintln(w, strings.TrimRight(row, " "))
	}

	for _, p := range rep.Providers {
		if !p.Available || len(p.Details) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", p.Name)
		for _, d := range p.Details {
			if d.Items == nil {
				printWrapped(env, "  ", d.Text, 4)
				continue
			}
			if !verbose {
				text := d.Text
				if m := listHeader.FindStringSubmatch(d.Text + ":"); m != nil {
					text = fmt.Sprintf("%s: %s paths", m[2], m[3])
				}
				printWrapped(env, "  ", text+" (pysandboxes probe --verbose lists them)", 4)
				continue
			}
			printWrapped(env, "  ", d.Text+":", 4)
			for _, it := range d.Items {
				printWrapped(env, "    ", it, 6)
			}
		}
	}

	fmt.Fprintln(w, "\nCapabilities:")
	for _, c := range rep.Capabilities {
		printWrapped(env, fmt.Sprintf("  %-*s", capW, c.Name), c.Description, capW+2)
	}
}

// printWrapped prints lead then text wrapped to probeWidth, the lines after the
// first indented by indent.
func printWrapped(env *Env, lead, text string, indent int) {
	first := true
	for _, l := range wrap(text, probeWidth-max(len(lead), indent)) {
		if first {
			fmt.Fprintln(env.Stdout, lead+l)
			first = false
			continue
		}
		fmt.Fprintln(env.Stdout, strings.Repeat(" ", indent)+l)
	}
}
