// Package pysb parses the command line of python-sb, the drop-in replacement for
// python that runs a Python program under a sandbox.
//
// A python-sb command line is a CPython command line in which sandbox options may
// appear among the interpreter options:
//
//	python-sb [cpython-options] [--sb-option[=value] ...] [-c cmd | -m mod | file | -] [arg ...]
//
// Parse splits it the way CPython itself does (Python/getopt.c and the option loop
// of Python/initconfig.c, 3.11): short options cluster (-Im json.tool, -cprint(1),
// -Werror, -OO), -c, -m, -W and -X take the rest of their cluster or the next
// argument, and the first -c, -m, lone -, "--" or non-option argument starts the
// program, whose arguments are then passed on unchanged, even when they look like
// options. Before the program, every --name[=value] that CPython does not know is a
// sandbox option.
package pysb

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Mode says what the interpreter is asked to run.
type Mode int

const (
	// Interactive: no program was given. CPython reads the program from stdin
	// when stdin is not a terminal, and starts a REPL when it is.
	Interactive Mode = iota
	// Command: -c cmd; Target is the command text.
	Command
	// Module: -m mod; Target is the module name.
	Module
	// Script: a file (or a directory or zip file holding __main__.py); Target is
	// the path as given.
	Script
	// Stdin: a lone "-": the program is read from stdin.
	Stdin
	// Info: an option that only prints something and exits (-V, --version,
	// --help-env, --help-xoptions, --help-all, and -h when Help is set). Run the
	// real interpreter with PythonArgs() outside any sandbox, or print Usage()
	// when Help is set.
	Info
)

var modeNames = [...]string{"Interactive", "Command", "Module", "Script", "Stdin", "Info"}

func (m Mode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// ExitUsage is the exit status of python-sb after a UsageError, as CPython's.
const ExitUsage = 2

// Invocation is a parsed python-sb command line.
type Invocation struct {
	// PythonFlags are the CPython options to forward to the inner interpreter, in
	// the order given and split canonically: one element per option ("-OO" is
	// "-O", "-O"; "-Ib" is "-I", "-b"; "--version" is "-V"), and an option's value
	// as its own element ("-Werror" is "-W", "error"; "-Xdev" is "-X", "dev";
	// "--check-hash-based-pycs", "always"). -t, accepted and ignored by CPython, is
	// kept. In Info mode the list ends with (or, for -V, holds) the option that
	// prints; with Help it ends with "-h".
	PythonFlags []string
	// Mode is what to run.
	Mode Mode
	// Target is the -c command text, the -m module name or the script path, as
	// given; "" for the other modes.
	Target string
	// Args are the program's arguments (sys.argv[1:]), passed on unchanged.
	Args []string
	// Rules are the sandbox options given before the program, as rule lines:
	// --expose-ro=/etc is "expose-ro=/etc", a bare --key is "key=". Repeated options
	// accumulate in order. --learn and --pysandboxes-config are not rules.
	// The values are not checked here: the policy loader refuses bad rules (and
	// line breaks, which could inject other rules).
	Rules []string
	// Config is the file named by --pysandboxes-config ("" when not given; the
	// last one wins).
	Config string
	// Learn is nil when learning is not asked; "" for a bare --learn (or
	// --learn=); otherwise the file of --learn=FILE. The last one wins.
	Learn *string
	// Help reports python-sb's own help (-h, -?, --help): print Usage() and exit
	// with status 0. Mode is then Info.
	Help bool
	// SandboxVersion reports --pysandboxes-version: print the version of
	// pysandboxes (not Python's) and exit with status 0. Mode is then Info.
	SandboxVersion bool
}

// UsageError is a command line that python-sb refuses. Print it (with a final
// newline, as fmt.Fprintln does) on stderr and exit with ExitUsage: the text is
// CPython's, with python-sb as the program name.
type UsageError struct {
	// Msg is the first line, e.g. "Argument expected for the -m option".
	Msg string
}

// UsageLine is the usage line that CPython prints after a usage error.
const UsageLine = "usage: python-sb [option] ... [-c cmd | -m mod | file | -] [arg] ..."

func (e *UsageError) Error() string {
	return e.Msg + "\n" + UsageLine + "\nTry `python-sb -h' for more information."
}

func usageErr(msg string) error { return &UsageError{Msg: msg} }

// Argv0 is what sys.argv[0] must be in the child: "-c" for Command, "-m" for
// Module (the child replaces it with the module's file, as runpy does), the
// script path as given for Script, "-" for Stdin and "" for Interactive and Info.
func (inv *Invocation) Argv0() string {
	switch inv.Mode {
	case Command:
		return "-c"
	case Module:
		return "-m"
	case Script:
		return inv.Target
	case Stdin:
		return "-"
	}
	return ""
}

// PythonArgs is the command line (without the program name) that gives a plain
// CPython interpreter the same view as the python-sb command line: PythonFlags,
// then the program and its arguments, without the sandbox options. A script whose
// path starts with "-" is preceded by "--".
func (inv *Invocation) PythonArgs() []string {
	out := slices.Clone(inv.PythonFlags)
	switch inv.Mode {
	case Command:
		out = append(out, "-c", inv.Target)
	case Module:
		out = append(out, "-m", inv.Target)
	case Script:
		if strings.HasPrefix(inv.Target, "-") {
			out = append(out, "--")
		}
		out = append(out, inv.Target)
	case Stdin:
		out = append(out, "-")
	default:
		return out
	}
	return append(out, inv.Args...)
}

// FlagCount counts a CPython option without value in PythonFlags, given as "-O",
// "-v", "-I"...: FlagCount("-O") is 2 after -OO.
func (inv *Invocation) FlagCount(flag string) int {
	n := 0
	for i := 0; i < len(inv.PythonFlags); i++ {
		switch f := inv.PythonFlags[i]; {
		case takesValue(f):
			i++
		case f == flag:
			n++
		}
	}
	return n
}

// FlagValues lists the values of a CPython option with a value in PythonFlags, in
// order: FlagValues("-W") are the warning options, FlagValues("-X") the -X options,
// FlagValues("--check-hash-based-pycs") the pyc modes.
func (inv *Invocation) FlagValues(flag string) []string {
	var out []string
	for i := 0; i < len(inv.PythonFlags); i++ {
		if f := inv.PythonFlags[i]; takesValue(f) {
			if i+1 < len(inv.PythonFlags) && f == flag {
				out = append(out, inv.PythonFlags[i+1])
			}
			i++
		}
	}
	return out
}

// isHelpOnly reports CPython's long options that print a help text and exit.
func isHelpOnly(name string) bool {
	return name == "help-all" || name == "help-xoptions" || name == "help-env"
}

func takesValue(flag string) bool {
	return flag == "-W" || flag == "-X" || flag == checkHash
}

const (
	checkHash     = "--check-hash-based-pycs"
	configOption  = "pysandboxes-config"
	versionOption = "pysandboxes-version"
	learnOption   = "learn"
	shortNoValue  = "bBdEiIOPqRsStuvtx" // CPython's short options without value (CPython ignores -t)
)

// parser holds the state of CPython's getopt: the index of the next argument and
// the rest of the current cluster of short options.
type parser struct {
	argv    []string
	next    int    // _PyOS_optind
	cluster string // opt_ptr: what remains of the current "-abc" argument
	arg     string // the whole argument of the current cluster, for messages
	inv     Invocation
	version int
}

// Parse parses a python-sb command line (argv without the program name). The
// error is always a *UsageError.
func Parse(argv []string) (*Invocation, error) {
	for _, a := range argv {
		// CPython cannot receive one (argv holds C strings), and exec refuses it.
		if strings.IndexByte(a, 0) >= 0 {
			return nil, usageErr("Argument contains a NUL byte: " + strconv.Quote(a))
		}
	}
	p := &parser{argv: argv}
	if err := p.parse(); err != nil {
		return nil, err
	}
	inv := &p.inv
	if inv.Mode != Info && p.version > 0 {
		// CPython prints the version after its option loop, instead of running
		// the program.
		inv.Mode, inv.Target, inv.Args = Info, "", nil
	}
	return inv, nil
}

// parse runs the option loop; it returns when the program starts, or at an option
// that prints and exits.
func (p *parser) parse() error {
	inv := &p.inv
	for {
		if p.cluster == "" {
			if p.next >= len(p.argv) {
				inv.Mode = Interactive
				return nil
			}
			a := p.argv[p.next]
			if len(a) < 2 || a[0] != '-' {
				p.program()
				return nil
			}
			p.next++
			if a == "--" {
				p.program()
				return nil
			}
			if strings.HasPrefix(a, "--") {
				if done, err := p.long(a); done || err != nil {
					return err
				}
				continue
			}
			p.arg, p.cluster = a, a[1:]
		}
		c, size := utf8.DecodeRuneInString(p.cluster)
		raw := p.cluster[0]
		p.cluster = p.cluster[size:]
		switch {
		case c == 'c' || c == 'm':
			val, err := p.optarg(c)
			if err != nil {
				return err
			}
			inv.Mode, inv.Target = Command, val
			if c == 'm' {
				inv.Mode = Module
			}
			inv.Args = slices.Clone(p.argv[p.next:])
			return nil
		case c == 'W' || c == 'X':
			val, err := p.optarg(c)
			if err != nil {
				return err
			}
			inv.PythonFlags = append(inv.PythonFlags, "-"+string(c), val)
		case c == 'h' || c == '?':
			inv.PythonFlags = append(inv.PythonFlags, "-h")
			inv.Mode, inv.Help = Info, true
			return nil
		case c == 'V':
			inv.PythonFlags = append(inv.PythonFlags, "-V")
			p.version++
		case c == 'J':
			return usageErr("-J is reserved for Jython")
		case c == '-':
			// CPython reads the rest of the cluster as a long option: -b-help-env.
			name := p.cluster
			p.cluster = ""
			if name == "" {
				// CPython prints this and ends the options, taking the next
				// argument as the program: refuse instead of guessing.
				return usageErr("expected long option")
			}
			if name == checkHash[2:] {
				if err := p.checkHash(""); err != nil {
					return err
				}
				continue
			}
			if isHelpOnly(name) {
				inv.PythonFlags = append(inv.PythonFlags, "--"+name)
				inv.Mode = Info
				return nil
			}
			return usageErr("unknown option " + p.arg)
		case c < utf8.RuneSelf && strings.IndexByte(shortNoValue, byte(c)) >= 0:
			inv.PythonFlags = append(inv.PythonFlags, "-"+string(c))
		default:
			// CPython prints the option with "%c" of (char)wchar: the low byte of
			// the code point, or the byte itself when it was not valid UTF-8.
			b := byte(c)
			if c == utf8.RuneError && size == 1 {
				b = raw
			}
			return usageErr("Unknown option: -" + string([]byte{b}))
		}
	}
}

// program takes the argument at p.next, if any, as the program: "-" is stdin,
// anything else a script.
func (p *parser) program() {
	inv := &p.inv
	switch {
	case p.next >= len(p.argv):
		inv.Mode = Interactive
	case p.argv[p.next] == "-":
		inv.Mode = Stdin
	default:
		inv.Mode, inv.Target = Script, p.argv[p.next]
	}
	if p.next < len(p.argv) {
		inv.Args = slices.Clone(p.argv[p.next+1:])
	}
}

// optarg is the value of the short option c: the rest of the cluster, or the
// next argument whatever it looks like.
func (p *parser) optarg(c rune) (string, error) {
	if p.cluster != "" {
		v := p.cluster
		p.cluster = ""
		return v, nil
	}
	if p.next >= len(p.argv) {
		return "", usageErr("Argument expected for the -" + string(c) + " option")
	}
	p.next++
	return p.argv[p.next-1], nil
}

// checkHash handles --check-hash-based-pycs, whose value is inline (python-sb
// only; see long) or the next argument.
func (p *parser) checkHash(inline string) error {
	val := inline
	if inline == "" {
		if p.next >= len(p.argv) {
			// sic: CPython says "options".
			return usageErr("Argument expected for the " + p.argv[p.next-1] + " options")
		}
		val = p.argv[p.next]
		p.next++
	}
	switch val {
	case "always", "never", "default":
	default:
		return usageErr("--check-hash-based-pycs must be one of 'default', 'always', or 'never'")
	}
	p.inv.PythonFlags = append(p.inv.PythonFlags, checkHash, val)
	return nil
}

// long handles an argument "--name[=value]" (not "--" itself): CPython's long
// options, then python-sb's. done reports an option that ends the parsing.
func (p *parser) long(a string) (done bool, err error) {
	inv := &p.inv
	name, value, hasValue := strings.Cut(a[2:], "=")
	switch {
	case a == "--help":
		inv.PythonFlags = append(inv.PythonFlags, "-h")
		inv.Mode, inv.Help = Info, true
		return true, nil
	case a == "--version":
		inv.PythonFlags = append(inv.PythonFlags, "-V")
		p.version++
		return false, nil
	case name == checkHash[2:]:
		if hasValue && value == "" {
			return false, usageErr("--check-hash-based-pycs must be one of 'default', 'always', or 'never'")
		}
		// CPython refuses the "=" form as an unknown option; python-sb accepts it
		// rather than turning it into a meaningless rule.
		return false, p.checkHash(value)
	case name == "help" || name == "version":
		// --help=x: CPython's long options take no inline value.
		return false, usageErr("unknown option " + a)
	case isHelpOnly(name):
		if hasValue {
			return false, usageErr("unknown option " + a)
		}
		inv.PythonFlags = append(inv.PythonFlags, a)
		inv.Mode = Info
		return true, nil
	case name == versionOption:
		if hasValue {
			return false, usageErr("unknown option " + a)
		}
		inv.Mode, inv.SandboxVersion = Info, true
		return true, nil
	case name == configOption:
		if !hasValue {
			if p.next >= len(p.argv) {
				return false, usageErr("Argument expected for the --" + configOption + " option")
			}
			value = p.argv[p.next]
			p.next++
		}
		if value == "" {
			return false, usageErr("Argument expected for the --" + configOption + " option")
		}
		inv.Config = value
	case name == learnOption:
		inv.Learn = &value
	case name == "":
		return false, usageErr("unknown option " + a)
	default:
		inv.Rules = append(inv.Rules, name+"="+value)
	}
	return false, nil
}
