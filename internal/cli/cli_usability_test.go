package cli_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestVersion: --version and version print the module version and the commit
// the binary was built from, as the go command recorded them in the binary
// (go version -m), "modified" when the checkout had changes.
func TestVersion(t *testing.T) {
	dir := t.TempDir()
	out, errs, code := pysb(t, dir, "--version")
	if code != 0 || errs != "" {
		t.Fatalf("--version: exit %d, stderr %q", code, errs)
	}
	out2, _, code := pysb(t, dir, "version")
	if code != 0 || out2 != out {
		t.Errorf("version: exit %d, %q; want the output of --version %q", code, out2, out)
	}
	// The go command stamps "(devel)", or a pseudo-version made from the
	// commit when it builds from a checkout.
	if !(strings.HasPrefix(out, "pysandboxes (devel), ") || strings.HasPrefix(out, "pysandboxes v")) || !strings.Contains(out, " go1.") {
		t.Errorf("--version = %q, want pysandboxes (devel) or vX.Y.Z, ... go1...", out)
	}
	meta, err := exec.Command("go", "version", "-m", binary).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	settings := map[string]string{}
	for _, l := range strings.Split(string(meta), "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && f[0] == "build" {
			if k, v, ok := strings.Cut(f[1], "="); ok {
				settings[k] = v
			}
		}
	}
	rev := settings["vcs.revision"]
	switch {
	case rev == "":
		t.Logf("built without VCS information (a git worktree, or git unavailable): %s", out)
		if !strings.Contains(out, "commit unknown (built without VCS information)") {
			t.Errorf("--version = %q, want commit unknown", out)
		}
	default:
		if !strings.Contains(out, "commit "+rev+" (") {
			t.Errorf("--version = %q, want commit %s", out, rev)
		}
		if modified := strings.Contains(out, "modified)"); modified != (settings["vcs.modified"] == "true") {
			t.Errorf("--version = %q, vcs.modified=%s", out, settings["vcs.modified"])
		}
	}
	_, errs, code = pysb(t, dir, "version", "extra")
	if code != 2 || !strings.Contains(errs, `unexpected argument "extra"`) {
		t.Errorf("version extra: exit %d, %q", code, errs)
	}
}

// TestUsageErrorsExit2: a bad command line exits 2 in every command, names the
// problem and points to the command's help.
func TestUsageErrorsExit2(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"run", "--bogus"}, "pysandboxes run: unknown option or rule --bogus\n"},
		{[]string{"run", "--timeout", "abc", "--", "/bin/true"}, `pysandboxes run: --timeout "abc": expected a duration such as 30s or 1m30s`},
		{[]string{"run", "--timeout=abc", "--", "/bin/true"}, `--timeout "abc": expected a duration`},
		{[]string{"run", "--limit-nofile=x", "--", "/bin/true"}, `--limit-nofile "x": expected a whole number`},
		{[]string{"run", "--accept-unenforced=nope", "--", "/bin/true"}, `unknown capability "nope"`},
		{[]string{"run", "--no-config"}, "no command given"},
		{[]string{"run", "--config=x", "--no-config", "--", "/bin/true"}, "--config and --no-config exclude each other"},
		{[]string{"run", "--no-config=yes", "--", "/bin/true"}, `option --no-config takes no value (got "--no-config=yes")`},
		{[]string{"run", "-x", "--", "/bin/true"}, "unknown option -x"},
		{[]string{"run", "--=1", "--", "/bin/true"}, "a name must follow --"},
		{[]string{"run", "--expose-ro", "/data", "--", "/bin/true"}, "rule --expose-ro takes its value after '=' (--expose-ro=/data)"},
		{[]string{"eval", "--eval-syntax", "arith", "1+1"}, "rule --eval-syntax takes its value after '='"},
		{[]string{"call", "--bogus", "m:f"}, "unknown option or rule --bogus"},
		{[]string{"call", "--config"}, "option --config needs a value (FILE)"},
		{[]string{"call", "--no-config"}, "no function given"},
		{[]string{"call", "--no-config", "nofunc"}, `function "nofunc": expected MODULE:FUNC`},
		{[]string{"call", "--no-config", "m:f", "{bad"}, `argument 1 "{bad": not JSON`},
		{[]string{"eval", "--bogus", "1"}, "unknown option or rule --bogus"},
		{[]string{"eval", "--no-config"}, "no source given"},
		{[]string{"eval", "--no-config", "1", "2"}, "one source only"},
		{[]string{"eval", "--names={}x", "1"}, "--names"},
		{[]string{"eval", "--names=[1]", "1"}, "not a JSON object"},
		{[]string{"check", "--bogus"}, "unknown option --bogus"},
		{[]string{"check", "a", "b"}, "one file at a time"},
		{[]string{"check", "--json=1"}, "option --json takes no value"},
		{[]string{"probe", "--bogus"}, "unknown option --bogus"},
		{[]string{"probe", "nosuch"}, `unknown provider "nosuch" (the providers: `},
		{[]string{"completion"}, "name one shell: bash, zsh or fish"},
		{[]string{"completion", "tcsh"}, `unknown shell "tcsh" (bash, zsh or fish)`},
		{[]string{"version", "--bogus"}, "unknown option --bogus"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errs, code := pysb(t, dir, tc.args...)
			if code != 2 || !strings.Contains(errs, tc.msg) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errs, tc.msg)
			}
			if want := "Run 'pysandboxes " + tc.args[0] + " --help' for the options.\n"; !strings.HasSuffix(errs, want) {
				t.Errorf("stderr %q does not end with %q", errs, want)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
		})
	}
	for _, args := range [][]string{{}, {"nosuchcommand"}, {"--bogus"}} {
		_, errs, code := pysb(t, dir, args...)
		if code != 2 || errs == "" {
			t.Errorf("pysandboxes %q: exit %d, stderr %q; want 2 and a message", args, code, errs)
		}
	}
}

// TestDidYouMean: an unknown option, rule, provider, shell or command names the
// closest one; known rules (with an eval profile, for a provider) pass.
func TestDidYouMean(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"run", "--expose-r=/tmp", "--", "/bin/true"}, "pysandboxes run: unknown rule --expose-r; did you mean --expose-ro?\n"},
		{[]string{"run", "--expsoe-rw=/tmp", "--", "/bin/true"}, "unknown rule --expsoe-rw; did you mean --expose-rw?"},
		{[]string{"run", "--timout=3s", "--", "/bin/true"}, "unknown option --timout; did you mean --timeout?"},
		{[]string{"run", "--no-confg", "--", "/bin/true"}, "unknown option --no-confg; did you mean --no-config?"},
		{[]string{"run", "--python-imprt=json", "--", "/bin/true"}, "unknown rule --python-imprt; did you mean --python-import?"},
		{[]string{"run", "--landlok.namespaces=no", "--", "/bin/true"}, "unknown rule --landlok.namespaces (no provider landlok); did you mean --landlock.namespaces?"},
		{[]string{"eval", "--eval-sytnax=arith", "1"}, "unknown rule --eval-sytnax; did you mean --eval-syntax?"},
		{[]string{"eval", "--exce", "1"}, "unknown option --exce; did you mean --exec?"},
		{[]string{"call", "--lern", "m:f"}, "unknown option --lern; did you mean --learn?"},
		{[]string{"check", "--jsn"}, "unknown option --jsn; did you mean --json?"},
		{[]string{"check", "-verbose"}, "unknown option -verbose; did you mean --verbose?"},
		{[]string{"probe", "landlok"}, `unknown provider "landlok"; did you mean landlock?`},
		{[]string{"completion", "bsh"}, `unknown shell "bsh"; did you mean bash?`},
		{[]string{"prbe"}, `pysandboxes: unknown command "prbe"; did you mean probe?`},
		{[]string{"--verison"}, `pysandboxes: unknown option "--verison"; did you mean --version?`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, errs, code := pysb(t, dir, tc.args...)
			if code != 2 || !strings.Contains(errs, tc.msg) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errs, tc.msg)
			}
		})
	}
	// Rules that are known get through to the policy (and run).
	_, errs, code := pysb(t, dir, "run", "--no-config", "--accept-unenforced=all", "--expose-ro="+dir,
		"--eval-syntax:stmts=arith", "--landlock.namespaces=no", "--", "/bin/true")
	if code != 0 {
		t.Errorf("known rules: exit %d, stderr %q", code, errs)
	}
}

// TestCheckSuggestsTheKeyOfAnUnknownRule: check names the closest rule key of
// a line whose key is unknown.
func TestCheckSuggestsTheKeyOfAnUnknownRule(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".py-sandboxes"), "expose-r=/tmp\nfoo=bar\n")
	out, _, code := pysb(t, dir, "check")
	want := ".py-sandboxes(1): Invalid rule 'expose-r=/tmp': unknown key 'expose-r'; did you mean 'expose-ro'?\n" +
		".py-sandboxes(2): Invalid rule 'foo=bar': unknown key 'foo'\n"
	if code != 1 || out != want {
		t.Errorf("check: exit %d\n%s\nwant 1 and\n%s", code, out, want)
	}
}

// TestHelpListsEveryOption: every option a command takes (as completion offers
// it) is in its --help, with its exit status table; help COMMAND is the same.
func TestHelpListsEveryOption(t *testing.T) {
	dir := t.TempDir()
	for _, cmd := range []string{"check", "run", "probe", "call", "eval", "version", "completion"} {
		help, errs, code := pysb(t, dir, cmd, "--help")
		if code != 0 || errs != "" {
			t.Fatalf("%s --help: exit %d, stderr %q", cmd, code, errs)
		}
		if !strings.HasPrefix(help, "Usage: pysandboxes "+cmd) || !strings.Contains(help, "\nExit status:\n") ||
			!regexp.MustCompile(`(?m)^  2 +a bad command line`).MatchString(help) {
			t.Errorf("%s --help lacks its usage line or its exit status (2 for a bad command line):\n%s", cmd, help)
		}
		h2, _, _ := pysb(t, dir, "help", cmd)
		if h2 != help {
			t.Errorf("help %s differs from %s --help", cmd, cmd)
		}
		out, _, _ := pysb(t, dir, "__complete", cmd, "--")
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			opt, _, _ := strings.Cut(l, "\t")
			if !strings.HasPrefix(opt, "--") || strings.HasSuffix(opt, "=") {
				continue // the directive line; rules (--RULE=)
			}
			if !regexp.MustCompile(`(?m)^  (-., )?` + regexp.QuoteMeta(opt) + `\b`).MatchString(help) {
				t.Errorf("%s --help does not list %s:\n%s", cmd, opt, help)
			}
		}
	}
	help, _, _ := pysb(t, dir, "call", "--help")
	if !strings.Contains(help, "\n  --learn[=FILE] ") {
		t.Errorf("call --help does not list --learn[=FILE]:\n%s", help)
	}
	for _, cmd := range []string{"run", "call", "eval"} {
		help, _, _ := pysb(t, dir, cmd, "--help")
		if flat := strings.Join(strings.Fields(help), " "); !strings.Contains(flat, "--RULE=VALUE") || !strings.Contains(flat, "expose-ro, expose-rw") {
			t.Errorf("%s --help does not explain --RULE=VALUE with the rule names:\n%s", cmd, help)
		}
	}
	top, _, code := pysb(t, dir, "--help")
	for _, cmd := range []string{"check", "run", "probe", "call", "eval", "version", "completion", "--version"} {
		if code != 0 || !strings.Contains(top, "\n  "+cmd+" ") {
			t.Errorf("--help does not list %s:\n%s", cmd, top)
		}
	}
}

type checkJSON struct {
	Format int    `json:"format"`
	File   string `json:"file"`
	Valid  *bool  `json:"valid"`
	Errors []struct {
		File    string `json:"file"`
		Line    int    `json:"line"`
		Message string `json:"message"`
		Also    []struct {
			File string `json:"file"`
			Line int    `json:"line"`
		} `json:"also"`
	} `json:"errors"`
	Warnings []struct {
		File    string `json:"file"`
		Line    int    `json:"line"`
		Message string `json:"message"`
	} `json:"warnings"`
}

func checkAsJSON(t *testing.T, dir string, args ...string) (checkJSON, int) {
	t.Helper()
	out, errs, code := pysb(t, dir, append([]string{"check", "--json"}, args...)...)
	var r checkJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("check --json: %v\n%s\nstderr %s", err, out, errs)
	}
	if r.Format != 1 || r.Valid == nil || r.Errors == nil || r.Warnings == nil {
		t.Fatalf("check --json lacks format 1, valid, errors or warnings: %s", out)
	}
	if errs != "" {
		t.Errorf("check --json: stderr %q, want nothing", errs)
	}
	return r, code
}

// TestCheckJSON: the documented shape, for a valid file with a warning, a file
// with errors in several files, and a missing file.
func TestCheckJSON(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".py-sandboxes"), "expose-ro=.\nport=80\n")
	r, code := checkAsJSON(t, dir)
	if code != 0 || !*r.Valid || len(r.Errors) != 0 || r.File != ".py-sandboxes" {
		t.Errorf("valid file: exit %d, %+v", code, r)
	}
	if len(r.Warnings) != 1 || r.Warnings[0].File != ".py-sandboxes" || r.Warnings[0].Line != 2 ||
		!strings.HasPrefix(r.Warnings[0].Message, "port= has no effect") {
		t.Errorf("warnings = %+v, want the one of port= on line 2", r.Warnings)
	}

	writeFile(t, filepath.Join(dir, "main.profile"), "include \"common\"\nbogus line\nport=1\n")
	writeFile(t, filepath.Join(dir, "common"), "env=NOEQUALS\nos-sandbox=landlock\nos-sandbox=bwrap\n")
	r, code = checkAsJSON(t, dir, "main.profile")
	if code != 1 || *r.Valid || r.File != "main.profile" {
		t.Fatalf("invalid file: exit %d, %+v", code, r)
	}
	var got []string
	for _, e := range r.Errors {
		s := e.File + ":" + strings.Repeat("I", e.Line) + ":" + e.Message
		for _, a := range e.Also {
			s += " also " + a.File + ":" + strings.Repeat("I", a.Line)
		}
		got = append(got, s)
	}
	want := []string{
		"common:I:Invalid rule 'env=NOEQUALS': env= needs NAME=VALUE: write env=NOEQUALS=VALUE, or env=NOEQUALS=${NOEQUALS} to copy the host's value",
		"common:II:Multiple os-sandbox parameters. also common:III",
		"main.profile:II:Invalid rule 'bogus line': expected KEY=VALUE",
	}
	if !slices.Equal(got, want) {
		t.Errorf("errors:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A warning of a file that fails is still reported.
	if len(r.Warnings) != 1 || r.Warnings[0].File != "main.profile" || r.Warnings[0].Line != 3 {
		t.Errorf("warnings = %+v, want port= of main.profile(3)", r.Warnings)
	}

	r, code = checkAsJSON(t, dir, "nosuch")
	if code != 1 || *r.Valid || len(r.Errors) != 1 || r.Errors[0].File != "nosuch" || r.Errors[0].Line != 0 ||
		r.Errors[0].Message != "rule file not found" {
		t.Errorf("missing file: exit %d, %+v", code, r)
	}
}

// TestWarningsOnceAsFileLine: warnings reach the user as "FILE(LINE): warning:"
// (or "pysandboxes CMD: warning:"), once each, never as log records.
func TestWarningsOnceAsFileLine(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".py-sandboxes"), "expose-ro=.\nport=80\n")
	portWarning := ".py-sandboxes(2): warning: port= has no effect: the host talks to the sandbox over an inherited socket pair, never a TCP port\n"

	out, errs, code := pysb(t, dir, "check")
	if code != 0 || out != portWarning || errs != "" {
		t.Errorf("check: exit %d, stdout %q, stderr %q; want the warning once on stdout", code, out, errs)
	}

	_, errs, code = pysb(t, dir, "run", "--os-sandbox=subprocess", "--accept-unenforced=all", "--", "/bin/true")
	want := portWarning + "pysandboxes run: warning: accepted as not enforced by the OS layer (provider: subprocess; capabilities: "
	if code != 0 || !strings.HasPrefix(errs, want) || strings.Count(errs, "\n") != 2 {
		t.Errorf("run: exit %d, stderr:\n%s\nwant two lines starting with:\n%s", code, errs, want)
	}
	for _, bad := range []string{"time=", "level=", "msg="} {
		if strings.Contains(errs, bad) {
			t.Errorf("run: stderr has a log record (%s):\n%s", bad, errs)
		}
	}

	// With -v, debug lines come in the same form.
	_, errs, _ = pysb(t, dir, "run", "-v", "--os-sandbox=subprocess", "--accept-unenforced=all", "--", "/bin/true")
	if strings.Count(errs, portWarning) != 1 || !strings.Contains(errs, "pysandboxes run: debug: ") || strings.Contains(errs, "level=") {
		t.Errorf("run -v: stderr:\n%s", errs)
	}
}

// TestRunRefusesLearning: run cannot learn (only the Python layer does), so a
// learn= rule would only run the command with nothing enforced: refused.
func TestRunRefusesLearning(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".py-sandboxes"), "expose-ro=.\nlearn=learned\n")
	_, errs, code := pysb(t, dir, "run", "--", "/bin/true")
	if code != 125 || !strings.Contains(errs, "pysandboxes run: .py-sandboxes(2): 'learn=learned' asks for learning mode, which enforces nothing") {
		t.Errorf("run with learn=: exit %d, stderr %q; want 125 and the refusal naming the rule", code, errs)
	}
	_, errs, code = pysb(t, dir, "run", "--no-config", "--learn=", "--", "/bin/true")
	if code != 125 || !strings.Contains(errs, "<arg>: 'learn=' asks for learning mode") {
		t.Errorf("run --learn=: exit %d, stderr %q", code, errs)
	}
}

type probeJSON struct {
	Format    int `json:"format"`
	Providers []struct {
		Name           string   `json:"name"`
		Available      bool     `json:"available"`
		Error          *string  `json:"error"`
		DebuggingOnly  bool     `json:"debugging_only"`
		Enforces       []string `json:"enforces"`
		DoesNotEnforce []string `json:"does_not_enforce"`
		Details        []struct {
			Text  string   `json:"text"`
			Items []string `json:"items"`
		} `json:"details"`
	} `json:"providers"`
	Capabilities []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	} `json:"capabilities"`
}

// TestProbeJSON: the documented shape; every capability is either enforced or
// not by each provider; lists of paths come whole.
func TestProbeJSON(t *testing.T) {
	out, errs, code := pysb(t, t.TempDir(), "probe", "--json")
	if code != 0 {
		t.Fatalf("probe --json: exit %d, stderr %q", code, errs)
	}
	var r probeJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("probe --json: %v\n%s", err, out)
	}
	if r.Format != 1 || len(r.Capabilities) < 10 {
		t.Fatalf("probe --json: format %d, %d capabilities", r.Format, len(r.Capabilities))
	}
	var caps []string
	for _, c := range r.Capabilities {
		if c.Description == "" {
			t.Errorf("capability %s has no description", c.Name)
		}
		caps = append(caps, c.Name)
	}
	seen := map[string]bool{}
	for _, p := range r.Providers {
		seen[p.Name] = true
		all := append(slices.Clone(p.Enforces), p.DoesNotEnforce...)
		slices.Sort(all)
		sorted := slices.Sorted(slices.Values(caps))
		if !slices.Equal(all, sorted) || p.Error == nil || p.Details == nil {
			t.Errorf("%s: enforces %v and not %v: want a partition of %v (and error, details present)", p.Name, p.Enforces, p.DoesNotEnforce, caps)
		}
		if p.Available != (*p.Error == "") {
			t.Errorf("%s: available %v with error %q", p.Name, p.Available, *p.Error)
		}
		if p.DebuggingOnly != (p.Name == "none") {
			t.Errorf("%s: debugging_only %v", p.Name, p.DebuggingOnly)
		}
		for _, d := range p.Details {
			if m := regexp.MustCompile(`\((\d+) paths\)$`).FindStringSubmatch(d.Text); m != nil {
				if n, _ := strconv.Atoi(m[1]); len(d.Items) != n {
					t.Errorf("%s: list %q with %d items", p.Name, d.Text, len(d.Items))
				}
			}
		}
		if p.Name == "landlock" && p.Available && len(p.Details) > 0 {
			found := false
			for _, d := range p.Details {
				if strings.HasPrefix(d.Text, "implicit grants for ") && slices.ContainsFunc(d.Items, func(s string) bool { return strings.Contains(s, "(program)") }) {
					found = true
				}
			}
			if !found {
				t.Errorf("landlock: no list of implicit grants with the program in it: %+v", p.Details)
			}
		}
	}
	if !seen["subprocess"] || !seen["none"] {
		t.Errorf("providers %v lack subprocess or none", seen)
	}
}

// TestProbeFits100Columns: the report for people fits in 100 columns, lists of
// paths counted unless asked for (--verbose, or the provider named).
func TestProbeFits100Columns(t *testing.T) {
	dir := t.TempDir()
	short, _, code := pysb(t, dir, "probe")
	if code != 0 {
		t.Fatalf("probe: exit %d", code)
	}
	long, _, _ := pysb(t, dir, "probe", "--verbose")
	for name, out := range map[string]string{"probe": short, "probe --verbose": long} {
		for _, l := range strings.Split(out, "\n") {
			if len(l) > 100 {
				t.Errorf("%s: line of %d columns: %q", name, len(l), l)
			}
		}
	}
	if !regexp.MustCompile(`(?m)^subprocess +available$`).MatchString(short) ||
		!regexp.MustCompile(`(?m)^files-read +(yes|-)( +(yes|-))+$`).MatchString(short) {
		t.Errorf("probe: no status line for subprocess or no capability row for files-read:\n%s", short)
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		return
	}
	if m := regexp.MustCompile(`(?m)^  implicit grants for /usr/bin/python3: (\d+) paths \(pysandboxes probe --verbose lists them\)$`).FindStringSubmatch(short); m == nil {
		if strings.Contains(short, "\nlandlock:\n") {
			t.Errorf("probe: landlock's implicit grants are not summarised:\n%s", short)
		}
	} else {
		if strings.Contains(short, "(program)") {
			t.Errorf("probe lists the grants without --verbose")
		}
		if !strings.Contains(long, "    /usr/bin/python3") || !strings.Contains(long, " (program)\n") {
			t.Errorf("probe --verbose does not list the grants:\n%s", long)
		}
		one, _, _ := pysb(t, dir, "probe", "landlock")
		if !strings.HasPrefix(one, "PROVIDER  STATUS\nlandlock  available\n") || !strings.Contains(one, " (program)\n") || strings.Contains(one, "\nunshare:") {
			t.Errorf("probe landlock: not landlock alone with its grants listed:\n%s", one)
		}
	}
}
