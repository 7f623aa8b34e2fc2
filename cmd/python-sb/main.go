// Command python-sb is a drop-in replacement for python that runs a Python
// program under a sandbox: the OS provider chosen by the rule file (landlock by
// default where the kernel has it) and the Python layer, which enforces the
// policy's imports and sensitive functions and names the rule behind every
// refusal.
//
//	python-sb [python options] [--RULE=VALUE ...] [--learn[=FILE]] [--pysandboxes-config=FILE]
//	          (-c cmd | -m mod | script | -) [args]
//	python-sb --pysandboxes-version
//
// The rule file is --pysandboxes-config, else the .py-sandboxes next to the script,
// inside the -m module's package, or in the current directory; a package's file
// that a sandbox under a file it comes before may write (it could have been
// planted there) is refused (policy.DiscoverChecked). When the file does not
// exist, python-sb learns it, and says so on stderr before the program starts: the
// program runs unconfined while everything it does is recorded, and the rules are
// written into a new file of that name when it ends (atomically; never into a file
// that appeared there meanwhile, which is left as it is).
//
// Exit status: the program's (128+N when signal N ended it); 2 for a usage error
// or a script that cannot be opened; 255 when the rules or the sandbox cannot be
// set up.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/buildinfo"
	"github.com/pysandboxes/pysandboxes/internal/hostprobe"
	"github.com/pysandboxes/pysandboxes/internal/pysb"
	"github.com/pysandboxes/pysandboxes/policy"
	"github.com/pysandboxes/pysandboxes/pylayer"
)

// ExitConfig is the exit status when the rules or the sandbox cannot be set up
// (upstream's -1).
const ExitConfig = 255

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx := context.Background()
	inv, err := pysb.Parse(args)
	if err != nil {
		var ue *pysb.UsageError
		if errors.As(err, &ue) {
			fmt.Fprintln(stderr, ue.Error())
			return pysb.ExitUsage
		}
		fmt.Fprintln(stderr, "python-sb:", err)
		return pysb.ExitUsage
	}
	if inv.Help {
		fmt.Fprint(stdout, pysb.Usage())
		return 0
	}
	if inv.SandboxVersion {
		fmt.Fprintln(stdout, buildinfo.Line("python-sb (pysandboxes)"))
		return 0
	}
	level := slog.LevelWarn
	if os.Getenv("PYSANDBOXES_DEBUG") != "" {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	if inv.Mode == pysb.Info {
		// -V, --help-env...: the interpreter prints, nothing runs.
		in, err := pylayer.ResolveInterpreter(ctx, "")
		if err != nil {
			fmt.Fprintln(stderr, "python-sb:", err)
			return ExitConfig
		}
		// Run confined (package hostprobe), like every program the host asks
		// about itself: the interpreter may be untrusted.
		out, err := hostprobe.Run(ctx, hostprobe.Request{Path: in.Path, Args: append([]string{in.Path}, inv.PythonArgs()...)})
		stdout.Write(out)
		if err != nil {
			var ee *hostprobe.ExitError
			if errors.As(err, &ee) && ee.Status.Exited() {
				if ee.Stderr != "" {
					fmt.Fprintln(stderr, ee.Stderr)
				}
				return ee.Status.ExitStatus()
			}
			fmt.Fprintln(stderr, "python-sb:", err)
			return ExitConfig
		}
		return 0
	}

	// Sandbox options: rules, plus the caller's explicit acceptance of what the
	// OS layer does not enforce.
	var rules []string
	var accept pysandboxes.Capability
	for _, r := range inv.Rules {
		key, value, _ := strings.Cut(r, "=")
		if key == "accept-unenforced" {
			c, err := pysandboxes.ParseCapabilities(value)
			if err != nil {
				fmt.Fprintln(stderr, "python-sb: --accept-unenforced:", err)
				return pysb.ExitUsage
			}
			accept |= c
			continue
		}
		rules = append(rules, r)
	}
	rules = append(rules, "env=TERM=${TERM}")

	d := policy.Discovery{Config: inv.Config}
	switch inv.Mode {
	case pysb.Script:
		d.Script = inv.Target
	case pysb.Module:
		d.Module = inv.Target
	}
	// A rule file of the module's package that a program sandboxed under
	// another file of the search could have planted is refused.
	file, how, err := policy.DiscoverChecked(ctx, d, &policy.Options{Logger: logger})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return ExitConfig
	}
	learnFile := ""
	learning := false
	if inv.Learn != nil {
		learning = true
		learnFile = *inv.Learn
		if learnFile == "" {
			if how == "explicit" {
				learnFile = file
			} else {
				learnFile = policy.DefaultName
			}
		}
	}
	opts := &policy.Options{Rules: rules, Learn: learning, Logger: logger}
	pol, err := policy.Load(ctx, file, opts)
	var me *policy.MissingError
	if errors.As(err, &me) && how == "explicit" && !learning {
		// A file the caller named that does not exist is a mistake (a typo),
		// never a reason to run unconfined and learn.
		fmt.Fprintf(stderr, "python-sb: --pysandboxes-config=%s: the rule file %s does not exist (to learn one, add --learn)\n", inv.Config, file)
		return ExitConfig
	}
	missing := false
	if errors.As(err, &me) {
		// No rule file: learn it, from the built-in template.
		if !learning {
			learning, learnFile, missing = true, file, true
		}
		opts.Learn = true
		pol, err = policy.Parse(ctx, file, []byte(policy.Template()), opts)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return ExitConfig
	}
	if f, _ := pol.Learn(); f != "" && !learning {
		learning, learnFile = true, f
	}
	sbOpts := []pysandboxes.Option{pysandboxes.WithLogger(logger), pysandboxes.AcceptUnenforced(accept)}
	if learning {
		abs := learnFile
		if !filepath.IsAbs(abs) {
			wd, _ := os.Getwd()
			abs = filepath.Join(wd, abs)
		}
		if missing {
			sbOpts = append(sbOpts, pysandboxes.WithLearningNew(abs))
		} else {
			sbOpts = append(sbOpts, pysandboxes.WithLearning(abs))
		}
	}
	if missing {
		fmt.Fprintf(stderr, "python-sb: no rule file: %s does not exist (nor --pysandboxes-config given), so this run learns one\n", learnFile)
	}
	if learning {
		fmt.Fprintf(stderr, "python-sb: learning mode: nothing is enforced; what the program does is recorded, "+
			"and the rules will be written to %s at exit (review them, then run again to enforce)\n", learnFile)
	}
	sb, err := pysandboxes.New(ctx, pol, sbOpts...)
	if err != nil {
		fmt.Fprintln(stderr, "python-sb:", err)
		return ExitConfig
	}
	defer sb.Close()
	cmd := sb.Python(ctx, inv.PythonArgs()...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if f, ok := stdin.(*os.File); ok {
		cmd.Stdin = f
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "python-sb:", err)
		return ExitConfig
	}
	stop := cmd.ForwardSignals()
	err = cmd.Wait()
	stop()
	if lr := cmd.Learned(); lr != nil {
		fmt.Fprintln(stderr, lr.Message)
	}
	var ee *pysandboxes.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ShellCode()
		var pe *pylayer.ProtocolError
		if errors.As(ee.Err, &pe) {
			fmt.Fprintln(stderr, "python-sb:", pe)
		}
	}
	// Errors other than the program's own status (learning could not write, the
	// layer could not start).
	for _, e := range unwrapJoined(err) {
		if errors.As(e, &ee) {
			continue
		}
		fmt.Fprintln(stderr, "python-sb:", e)
		if code == 0 {
			code = ExitConfig
		}
	}
	return code
}

func unwrapJoined(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
