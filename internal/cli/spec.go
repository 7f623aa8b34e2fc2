package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pysandboxes/pysandboxes/internal/suggest"
)

// valueKind says how the value of an option (or of a rule, or an operand) is
// completed by the shell.
type valueKind int

const (
	valueNone       valueKind = iota // nothing to offer
	valueFile                        // a file name
	valueDir                         // a directory name
	valueCommand                     // a command name
	valueProvider                    // an OS provider name
	valueCaps                        // a comma list of capabilities
	valueBool                        // true or false
	valueShell                       // bash, zsh or fish
	valueResultMode                  // data-only or objects
	valueNamespace                   // an eval-namespace mode
)

// option is one option of a command: its names, its value, its help line, and
// what setting it does.
type option struct {
	name  string // the long name, without "--"
	short string // "-v", or ""
	// arg is the placeholder of the value ("FILE"); "" for an option that takes
	// none. optional means the value may be left out (--learn or --learn=FILE;
	// never --learn FILE).
	arg      string
	optional bool
	help     string
	complete valueKind
	// set receives the value ("" for an option without one). Its error is a
	// usage error; the caller names the option.
	set func(value string) error
}

// flag is an option without a value.
func flag(name, short, help string, p *bool) *option {
	return &option{name: name, short: short, help: help, set: func(string) error { *p = true; return nil }}
}

// exitCode is one line of a command's exit status table.
type exitCode struct {
	code string
	text string
}

// command describes a subcommand for its parser, its help and shell completion.
type command struct {
	name     string
	synopsis string // after "pysandboxes NAME "
	summary  string // one line for the list of commands
	about    string // the description paragraphs of its help
	options  []*option
	// rules reports that the command takes --RULE=VALUE rule lines.
	rules bool
	// operands completes the operands; firstOperand the first one when it
	// differs (run: a command, then its arguments).
	operands, firstOperand valueKind
	exits                  []exitCode
}

// usageError is a bad command line: the caller prints it with a pointer to the
// command's help and exits with ExitUsage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// lookup returns the option named by a long name ("config") or a short one
// ("-v").
func (c *command) lookup(long, short string) *option {
	for _, o := range c.options {
		if (long != "" && o.name == long) || (short != "" && o.short == short) {
			return o
		}
	}
	return nil
}

// parsed is what parse read from a command line.
type parsed struct {
	help     bool
	rules    []string // "key=value"
	operands []string
}

// parse reads the options at the head of args, then the operands: after "--",
// or from the first argument that is not an option ("-" is an operand). Options
// take their value as --NAME=VALUE or --NAME VALUE; -h and --help ask for the
// help; any other --KEY[=VALUE] is a rule line KEY=VALUE when the command takes
// rules and KEY is a rule, else a usage error that suggests the closest option
// or rule.
func (c *command) parse(args []string) (*parsed, error) {
	p := &parsed{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			p.operands = args[i+1:]
			return p, nil
		case a == "-h" || a == "--help":
			p.help = true
			return p, nil
		case a == "-" || !strings.HasPrefix(a, "-"):
			p.operands = args[i:]
			return p, nil
		}
		var o *option
		name, value, hasValue := "", "", false
		if strings.HasPrefix(a, "--") {
			name, value, hasValue = strings.Cut(a[2:], "=")
			if name == "" {
				return nil, usagef("bad option %s: a name must follow --", strconv.Quote(a))
			}
			o = c.lookup(name, "")
		} else {
			o = c.lookup("", a)
			if o == nil {
				return nil, c.unknown(a)
			}
			name = o.name
		}
		if o == nil {
			if !c.rules {
				return nil, c.unknown(a)
			}
			if err := checkRuleKey(name, c); err != nil {
				return nil, err
			}
			if next := i + 1; !hasValue && next < len(args) && args[next] != "-" && !strings.HasPrefix(args[next], "-") {
				// "--expose-ro /data": the value of a rule follows "=", always;
				// taking /data for the command would run the wrong thing.
				return nil, usagef("rule --%s takes its value after '=' (--%s=%s); to give it empty before the operands, write --%s= or end the options with --",
					name, name, args[next], name)
			}
			p.rules = append(p.rules, name+"="+value)
			continue
		}
		switch {
		case o.arg == "" && hasValue:
			return nil, usagef("option --%s takes no value (got %s)", o.name, strconv.Quote(a))
		case o.arg != "" && !o.optional && !hasValue:
			if i+1 >= len(args) {
				return nil, usagef("option --%s needs a value (%s)", o.name, o.arg)
			}
			i++
			value = args[i]
		}
		if err := o.set(value); err != nil {
			return nil, usagef("--%s %s: %v", o.name, quoteArg(value), err)
		}
	}
	return p, nil
}

// unknown is the usage error for an option the command does not take: it names
// the closest option (or rule, when the command takes rules).
func (c *command) unknown(a string) error {
	word := strings.TrimLeft(a, "-")
	word, _, _ = strings.Cut(word, "=")
	var cands []string
	for _, o := range c.options {
		cands = append(cands, o.name)
	}
	cands = append(cands, "help")
	isRule := map[string]bool{}
	if c.rules {
		for _, k := range ruleKeys {
			if !k.hidden && !k.fileOnly && !slices.Contains(cands, k.name) {
				cands = append(cands, k.name)
				isRule[k.name] = true
			}
		}
	}
	kind := "option"
	if c.rules && strings.HasPrefix(a, "--") {
		kind = "option or rule"
	}
	shown, _, _ := strings.Cut(a, "=")
	if s, ok := suggest.Closest(word, cands); ok {
		if isRule[s] {
			kind = "rule"
		} else if kind == "option or rule" {
			kind = "option"
		}
		return usagef("unknown %s %s; did you mean --%s?", kind, shown, s)
	}
	return usagef("unknown %s %s", kind, shown)
}

// help renders the command's help: usage, description, options, exit status.
func (c *command) help() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: pysandboxes %s %s\n\n", c.name, c.synopsis)
	b.WriteString(c.about)
	b.WriteString("\nOptions:\n")
	for _, o := range c.options {
		helpLine(&b, o.label(), o.help)
	}
	helpLine(&b, "-h, --help", "show this help")
	if c.rules {
		helpLine(&b, "--RULE=VALUE", "a rule line RULE=VALUE, as in a rule file (e.g. --expose-ro=/data, "+
			"--net='ALLOW|tcp|example.com|443|OUT'), the value always after '='; --RULE= is RULE=. The rules: "+ruleNames()+
			", PROVIDER.PARAM")
	}
	if len(c.exits) > 0 {
		b.WriteString("\nExit status:\n")
		for _, e := range c.exits {
			helpLineAt(&b, e.code, e.text, 8)
		}
	}
	return b.String()
}

// label is an option as its help shows it: "-v, --verbose", "--config FILE",
// "--learn[=FILE]".
func (o *option) label() string {
	s := "--" + o.name
	if o.short != "" {
		s = o.short + ", " + s
	}
	switch {
	case o.arg != "" && o.optional:
		s += "[=" + o.arg + "]"
	case o.arg != "":
		s += " " + o.arg
	}
	return s
}

// helpWidth is the width of help texts; helpIndent the column of the
// explanations.
const (
	helpWidth  = 80
	helpIndent = 29
)

// helpLine writes "  label   text", the text wrapped under its column.
func helpLine(b *strings.Builder, label, text string) { helpLineAt(b, label, text, helpIndent) }

// helpLineAt writes "  label   text", the text wrapped from column indent.
func helpLineAt(b *strings.Builder, label, text string, indent int) {
	lines := wrap(text, helpWidth-indent)
	first := "  " + label
	if len(first) >= indent-1 {
		b.WriteString(first + "\n")
	} else {
		b.WriteString(first + strings.Repeat(" ", indent-len(first)) + lines[0] + "\n")
		lines = lines[1:]
	}
	for _, l := range lines {
		b.WriteString(strings.Repeat(" ", indent) + l + "\n")
	}
}

// wrap breaks text into lines of at most width columns at spaces, and a word
// longer than width after its commas (a longer piece stands alone on its line).
// Line breaks in text are kept.
func wrap(text string, width int) []string {
	var out []string
	for _, para := range strings.Split(text, "\n") {
		line := ""
		put := func(piece, sep string) {
			switch {
			case line == "":
				line = piece
			case len(line)+len(sep)+len(piece) <= width:
				line += sep + piece
			default:
				out = append(out, line)
				line = piece
			}
		}
		for _, w := range strings.Fields(para) {
			if len(w) <= width || !strings.Contains(w, ",") {
				put(w, " ")
				continue
			}
			for i, piece := range strings.SplitAfter(w, ",") {
				sep := ""
				if i == 0 {
					sep = " "
				}
				if piece != "" {
					put(piece, sep)
				}
			}
		}
		out = append(out, line)
	}
	return out
}

// begin parses a command line. On a bad one, or --help, it has answered (the
// usage error on stderr, or the help on stdout) and returns ok false with the
// exit code.
func (c *command) begin(args []string, env *Env) (p *parsed, code int, ok bool) {
	p, err := c.parse(args)
	switch {
	case err != nil:
		return nil, usageFailure(env, c, err), false
	case p.help:
		fmt.Fprint(env.Stdout, c.help())
		return nil, ExitOK, false
	}
	return p, ExitOK, true
}

// jsonFlag is the --json option of the commands that can print their result as
// one JSON object.
func jsonFlag(to *bool) *option { return flag("json", "", "print the result as one JSON object", to) }
