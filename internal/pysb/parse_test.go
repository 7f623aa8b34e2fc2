package pysb

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func ptr(s string) *string { return &s }

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want Invocation
	}{
		{"nothing", nil, Invocation{Mode: Interactive}},
		{"flags only", []string{"-I", "-q"}, Invocation{PythonFlags: []string{"-I", "-q"}, Mode: Interactive}},
		{"script", []string{"app.py", "a", "-b"}, Invocation{Mode: Script, Target: "app.py", Args: []string{"a", "-b"}}},
		{"script without .py", []string{"tool", "--x"}, Invocation{Mode: Script, Target: "tool", Args: []string{"--x"}}},
		{"empty script name", []string{""}, Invocation{Mode: Script, Target: ""}},
		{"command", []string{"-c", "print(1)", "a"}, Invocation{Mode: Command, Target: "print(1)", Args: []string{"a"}}},
		{"command attached", []string{"-cprint(1)"}, Invocation{Mode: Command, Target: "print(1)"}},
		{"command clustered", []string{"-Ic", "pass"}, Invocation{PythonFlags: []string{"-I"}, Mode: Command, Target: "pass"}},
		{"command text is an option", []string{"-c", "-I"}, Invocation{Mode: Command, Target: "-I"}},
		{"command empty", []string{"-c", ""}, Invocation{Mode: Command, Target: ""}},
		{"module", []string{"-m", "json.tool", "--sort-keys"}, Invocation{Mode: Module, Target: "json.tool", Args: []string{"--sort-keys"}}},
		{"module attached", []string{"-mjson.tool"}, Invocation{Mode: Module, Target: "json.tool"}},
		{"module clustered", []string{"-Im", "json.tool"}, Invocation{PythonFlags: []string{"-I"}, Mode: Module, Target: "json.tool"}},
		{"module clustered attached", []string{"-Imjson.tool", "x"}, Invocation{PythonFlags: []string{"-I"}, Mode: Module, Target: "json.tool", Args: []string{"x"}}},
		{"stdin", []string{"-", "a"}, Invocation{Mode: Stdin, Args: []string{"a"}}},
		{"stdin after flags", []string{"-u", "-", "-c"}, Invocation{PythonFlags: []string{"-u"}, Mode: Stdin, Args: []string{"-c"}}},
		{"double dash then script", []string{"-I", "--", "-c", "x"}, Invocation{PythonFlags: []string{"-I"}, Mode: Script, Target: "-c", Args: []string{"x"}}},
		{"double dash then stdin", []string{"--", "-", "x"}, Invocation{Mode: Stdin, Args: []string{"x"}}},
		{"double dash alone", []string{"--"}, Invocation{Mode: Interactive}},
		{"OO", []string{"-OO", "-c", "pass"}, Invocation{PythonFlags: []string{"-O", "-O"}, Mode: Command, Target: "pass"}},
		{"uI", []string{"-uI", "s.py"}, Invocation{PythonFlags: []string{"-u", "-I"}, Mode: Script, Target: "s.py"}},
		{"bb vv qq", []string{"-bb", "-vv", "-qq"}, Invocation{PythonFlags: []string{"-b", "-b", "-v", "-v", "-q", "-q"}}},
		{"all flags", []string{"-bBdEiIOPqRsStuvx"}, Invocation{PythonFlags: strings.Split("-b -B -d -E -i -I -O -P -q -R -s -S -t -u -v -x", " ")}},
		{"W forms", []string{"-Wd", "-W", "error", "-Werror::DeprecationWarning", "-W", ""},
			Invocation{PythonFlags: []string{"-W", "d", "-W", "error", "-W", "error::DeprecationWarning", "-W", ""}}},
		{"X forms", []string{"-X", "dev", "-Xutf8", "-Xfrozen_modules=off", "-X", "-c"},
			Invocation{PythonFlags: []string{"-X", "dev", "-X", "utf8", "-X", "frozen_modules=off", "-X", "-c"}}},
		{"W then cluster rest", []string{"-IWignore", "-c", "x"}, Invocation{PythonFlags: []string{"-I", "-W", "ignore"}, Mode: Command, Target: "x"}},
		{"check-hash", []string{"--check-hash-based-pycs", "always", "x.py"}, Invocation{PythonFlags: []string{"--check-hash-based-pycs", "always"}, Mode: Script, Target: "x.py"}},
		{"check-hash inline", []string{"--check-hash-based-pycs=never"}, Invocation{PythonFlags: []string{"--check-hash-based-pycs", "never"}}},
		{"check-hash in cluster", []string{"-b-check-hash-based-pycs", "default"}, Invocation{PythonFlags: []string{"-b", "--check-hash-based-pycs", "default"}}},

		// Info and help.
		{"help", []string{"-h"}, Invocation{PythonFlags: []string{"-h"}, Mode: Info, Help: true}},
		{"help ?", []string{"-I?"}, Invocation{PythonFlags: []string{"-I", "-h"}, Mode: Info, Help: true}},
		{"help long", []string{"--help", "-z"}, Invocation{PythonFlags: []string{"-h"}, Mode: Info, Help: true}},
		{"help after version", []string{"-V", "-h"}, Invocation{PythonFlags: []string{"-V", "-h"}, Mode: Info, Help: true}},
		{"version", []string{"-V"}, Invocation{PythonFlags: []string{"-V"}, Mode: Info}},
		{"version long", []string{"--version"}, Invocation{PythonFlags: []string{"-V"}, Mode: Info}},
		{"VV", []string{"-VV"}, Invocation{PythonFlags: []string{"-V", "-V"}, Mode: Info}},
		{"version beats command", []string{"-V", "-c", "print(1)", "a"}, Invocation{PythonFlags: []string{"-V"}, Mode: Info}},
		{"version beats script", []string{"-V", "--learn", "s.py"}, Invocation{PythonFlags: []string{"-V"}, Mode: Info, Learn: ptr("")}},
		{"help-env", []string{"-E", "--help-env", "-z"}, Invocation{PythonFlags: []string{"-E", "--help-env"}, Mode: Info}},
		{"help-xoptions", []string{"--help-xoptions"}, Invocation{PythonFlags: []string{"--help-xoptions"}, Mode: Info}},
		{"help-all", []string{"--help-all"}, Invocation{PythonFlags: []string{"--help-all"}, Mode: Info}},
		{"help-env in cluster", []string{"-b-help-env"}, Invocation{PythonFlags: []string{"-b", "--help-env"}, Mode: Info}},
		{"pysandboxes version", []string{"--pysandboxes-version", "-c", "x"}, Invocation{Mode: Info, SandboxVersion: true}},
		{"pysandboxes version after rules", []string{"--expose-ro=/etc", "--pysandboxes-version", "s.py"},
			Invocation{Rules: []string{"expose-ro=/etc"}, Mode: Info, SandboxVersion: true}},

		// Sandbox options.
		{"rules", []string{"--expose-ro=/etc", "--net=ALLOW|tcp|example.com|443|OUT", "--py-sandbox", "-m", "m"},
			Invocation{Rules: []string{"expose-ro=/etc", "net=ALLOW|tcp|example.com|443|OUT", "py-sandbox="}, Mode: Module, Target: "m"}},
		{"rules accumulate", []string{"--env=A=1", "--env=B=2", "--env=A=3"}, Invocation{Rules: []string{"env=A=1", "env=B=2", "env=A=3"}}},
		{"rules between flags", []string{"-I", "--os-sandbox=none", "-u", "s.py"},
			Invocation{PythonFlags: []string{"-I", "-u"}, Rules: []string{"os-sandbox=none"}, Mode: Script, Target: "s.py"}},
		{"rule with empty value", []string{"--port="}, Invocation{Rules: []string{"port="}}},
		{"rule after the program is an argument", []string{"s.py", "--expose-ro=/x", "--learn"},
			Invocation{Mode: Script, Target: "s.py", Args: []string{"--expose-ro=/x", "--learn"}}},
		{"rule after -c is an argument", []string{"-c", "x", "--expose-ro=/x"}, Invocation{Mode: Command, Target: "x", Args: []string{"--expose-ro=/x"}}},
		{"rule after -m is an argument", []string{"-mjson.tool", "--pysandboxes-config=f"}, Invocation{Mode: Module, Target: "json.tool", Args: []string{"--pysandboxes-config=f"}}},
		{"rule after -- is the script", []string{"--", "--learn"}, Invocation{Mode: Script, Target: "--learn"}},
		{"config", []string{"--pysandboxes-config=conf/sb", "-c", "x"}, Invocation{Config: "conf/sb", Mode: Command, Target: "x"}},
		{"config separate", []string{"--pysandboxes-config", "-m", "x.py"}, Invocation{Config: "-m", Mode: Script, Target: "x.py"}},
		{"config last wins", []string{"--pysandboxes-config=a", "--pysandboxes-config", "b"}, Invocation{Config: "b"}},
		{"learn bare", []string{"--learn", "s.py"}, Invocation{Learn: ptr(""), Mode: Script, Target: "s.py"}},
		{"learn empty", []string{"--learn="}, Invocation{Learn: ptr("")}},
		{"learn file", []string{"--learn=.py-sandboxes.learn", "-m", "app"}, Invocation{Learn: ptr(".py-sandboxes.learn"), Mode: Module, Target: "app"}},
		{"learn and config", []string{"--pysandboxes-config=x", "--learn", "--expose-ro=/y"},
			Invocation{Config: "x", Learn: ptr(""), Rules: []string{"expose-ro=/y"}}},
		{"triple dash is a rule", []string{"---x=1"}, Invocation{Rules: []string{"-x=1"}}},
		{"rule with newline kept for the policy to refuse", []string{"--env=a\nb"}, Invocation{Rules: []string{"env=a\nb"}}},
		{"non-ASCII in values", []string{"-Wé", "-c", "é"}, Invocation{PythonFlags: []string{"-W", "é"}, Mode: Command, Target: "é"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.args)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.args, err)
			}
			if diff := cmp.Diff(&tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func TestParseDoesNotAlias(t *testing.T) {
	argv := []string{"-c", "x", "a", "b"}
	inv, err := Parse(argv)
	if err != nil {
		t.Fatal(err)
	}
	argv[2] = "changed"
	if inv.Args[0] != "a" {
		t.Errorf("Args alias argv: %q", inv.Args)
	}
}

// TestUsageErrorsOwn covers the usage errors that CPython cannot show (python-sb's
// own options, NUL bytes) or shows differently (see the comments).
func TestUsageErrorsOwn(t *testing.T) {
	tests := []struct {
		args []string
		msg  string
	}{
		{[]string{"--pysandboxes-config"}, "Argument expected for the --pysandboxes-config option"},
		{[]string{"--pysandboxes-config="}, "Argument expected for the --pysandboxes-config option"},
		{[]string{"--pysandboxes-config", ""}, "Argument expected for the --pysandboxes-config option"},
		{[]string{"--=x"}, "unknown option --=x"},
		{[]string{"--help=1"}, "unknown option --help=1"},
		{[]string{"--version=1"}, "unknown option --version=1"},
		{[]string{"--pysandboxes-version=1"}, "unknown option --pysandboxes-version=1"},
		{[]string{"--help-env=1"}, "unknown option --help-env=1"},
		{[]string{"--check-hash-based-pycs=bad"}, "--check-hash-based-pycs must be one of 'default', 'always', or 'never'"},
		{[]string{"--check-hash-based-pycs="}, "--check-hash-based-pycs must be one of 'default', 'always', or 'never'"},
		{[]string{"-c", "a\x00b"}, `Argument contains a NUL byte: "a\x00b"`},
		{[]string{"s.py", "\x00"}, `Argument contains a NUL byte: "\x00"`},
		// CPython prints this line, then takes the next argument as the script.
		{[]string{"-Ib-", "-c", "pass"}, "expected long option"},
		// Low byte of the code point, as CPython's (char) cast.
		{[]string{"-é"}, "Unknown option: -\xe9"},
		{[]string{"-€"}, "Unknown option: -\xac"},
		{[]string{"-\xff"}, "Unknown option: -\xff"},
		{[]string{"-I-learn"}, "unknown option -I-learn"},
	}
	for _, tt := range tests {
		inv, err := Parse(tt.args)
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("Parse(%q) = %+v, %v; want a UsageError", tt.args, inv, err)
			continue
		}
		if ue.Msg != tt.msg {
			t.Errorf("Parse(%q): message %q, want %q", tt.args, ue.Msg, tt.msg)
		}
		want := tt.msg + "\n" + UsageLine + "\nTry `python-sb -h' for more information."
		if ue.Error() != want {
			t.Errorf("Parse(%q): error %q, want %q", tt.args, ue.Error(), want)
		}
	}
}

func TestArgv0AndPythonArgs(t *testing.T) {
	tests := []struct {
		args  []string
		argv0 string
		py    []string
	}{
		{nil, "", nil},
		{[]string{"-I", "--expose-ro=/x", "-c", "pass", "a"}, "-c", []string{"-I", "-c", "pass", "a"}},
		{[]string{"-mjson.tool", "f"}, "-m", []string{"-m", "json.tool", "f"}},
		{[]string{"--learn", "dir/s.py", "x"}, "dir/s.py", []string{"dir/s.py", "x"}},
		{[]string{"--", "-c", "x"}, "-c", []string{"--", "-c", "x"}},
		{[]string{"-", "x"}, "-", []string{"-", "x"}},
		{[]string{"-OOWerror", "-X", "dev"}, "", []string{"-O", "-O", "-W", "error", "-X", "dev"}},
		{[]string{"-V", "s.py"}, "", []string{"-V"}},
		{[]string{"--help"}, "", []string{"-h"}},
	}
	for _, tt := range tests {
		inv, err := Parse(tt.args)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.args, err)
		}
		if got := inv.Argv0(); got != tt.argv0 {
			t.Errorf("Parse(%q).Argv0() = %q, want %q", tt.args, got, tt.argv0)
		}
		if diff := cmp.Diff(tt.py, inv.PythonArgs(), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Parse(%q).PythonArgs() (-want +got):\n%s", tt.args, diff)
		}
	}
}

func TestFlagHelpers(t *testing.T) {
	inv, err := Parse([]string{"-OO", "-W", "-O", "-Xdev", "-q", "--check-hash-based-pycs", "never", "-Wignore", "-X", "-q"})
	if err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]int{"-O": 2, "-q": 1, "-I": 0, "-W": 0} {
		if got := inv.FlagCount(flag); got != want {
			t.Errorf("FlagCount(%q) = %d, want %d", flag, got, want)
		}
	}
	for flag, want := range map[string][]string{"-W": {"-O", "ignore"}, "-X": {"dev", "-q"}, "--check-hash-based-pycs": {"never"}, "-O": nil} {
		if diff := cmp.Diff(want, inv.FlagValues(flag)); diff != "" {
			t.Errorf("FlagValues(%q) (-want +got):\n%s", flag, diff)
		}
	}
}

func TestModeString(t *testing.T) {
	for m, want := range map[Mode]string{Interactive: "Interactive", Command: "Command", Module: "Module", Script: "Script", Stdin: "Stdin", Info: "Info", Mode(9): "Mode(9)", Mode(-1): "Mode(-1)"} {
		if got := m.String(); got != want {
			t.Errorf("Mode(%d).String() = %q, want %q", int(m), got, want)
		}
	}
}

func TestUsage(t *testing.T) {
	u := Usage()
	for _, want := range []string{
		"usage: python-sb ", "Run a Python program in a SANDBOX.", "--pysandboxes-config FILE",
		"--learn[=FILE]", "--<sb-option>=<value>", "Add some Py-sandboxes parameters. They have priority.",
		"-m mod", "-c cmd", "--check-hash-based-pycs MODE", "-W arg", "-X opt", "--help-env", "--help-xoptions", "--help-all",
		"\nArguments:\nfile   : program read from script file\n-      : program read from stdin (default; interactive mode if a tty)\narg ...: arguments passed to program in sys.argv[1:]\n",
	} {
		if !strings.Contains(u, want) {
			t.Errorf("Usage() lacks %q", want)
		}
	}
	if strings.Contains(u, "SANBOX") {
		t.Error("Usage() keeps upstream's typo SANBOX")
	}
	for i, line := range strings.Split(u, "\n") {
		if len([]rune(line)) > 80 {
			t.Errorf("Usage() line %d is longer than 80 columns: %q", i+1, line)
		}
	}
}
