package cli

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/pysandboxes/pysandboxes/internal/shim"
)

// unshim returns command with a version manager's shim as CMD replaced by the
// executable the shim would run, found without running it (package shim), and
// says so on stderr. A shim whose executable cannot be found that way is an
// error saying what to do; any other CMD is returned as it is.
func unshim(env *Env, command []string) ([]string, error) {
	name := command[0]
	path := name
	if !strings.Contains(name, "/") {
		p, err := exec.LookPath(name) // as Sandbox.Command finds it
		if err != nil {
			return command, nil // not found: starting it says so
		}
		path = p
	}
	vars := map[string]string{}
	for _, kv := range env.environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, dup := vars[k]; !dup {
				vars[k] = v
			}
		}
	}
	res, err := shim.Resolve(path, shim.Env{Getenv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	var se *shim.Error
	switch {
	case errors.Is(err, shim.ErrNotShim):
		return command, nil
	case errors.As(err, &se):
		return nil, fmt.Errorf("%s, which cannot run inside the sandbox: it runs %s's own code, which the sandbox does not hold, to choose the %s to start; "+
			"and which one it would start cannot be found without running it on the host: %s.\n"+
			"Give the real executable as CMD instead (`%s` prints its path), or use --keep-shim to run the shim itself, with %s's files exposed to the sandbox",
			describe(name, se.Manager, se.Shim), se.Manager, se.Program, se.Reason, se.Which, se.Manager)
	case err != nil:
		return nil, err
	}
	fmt.Fprintf(env.Stderr, "pysandboxes run: %s, which cannot run inside the sandbox: running %s instead (%s; --keep-shim runs the shim itself)\n",
		describe(name, res.Manager, res.Shim), res.Path, res.Selection())
	return append([]string{res.Path}, command[1:]...), nil
}

// describe renders "python3 is a pyenv shim (/root/.pyenv/shims/python3)".
func describe(name, manager, path string) string {
	if name == path {
		return fmt.Sprintf("%s is %s shim", name, shim.Indefinite(manager))
	}
	return fmt.Sprintf("%s is %s shim (%s)", name, shim.Indefinite(manager), path)
}
