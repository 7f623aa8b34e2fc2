package nsutil

import (
	"context"
	"os"
	"os/exec"
	"regexp"
)

// HelpOptions runs "binary --help" and returns the option names it lists: the
// first submatch of each match of re (a missing or failing binary lists none).
func HelpOptions(ctx context.Context, binary string, re *regexp.Regexp) map[string]bool {
	help, _ := exec.CommandContext(ctx, binary, "--help").CombinedOutput()
	known := map[string]bool{}
	for _, m := range re.FindAllSubmatch(help, -1) {
		known[string(m[1])] = true
	}
	return known
}

// Env returns the env(1) binary the providers start the program with, to leave
// it exactly the policy's environment ("" when there is none).
func Env() string {
	for _, env := range []string{"/usr/bin/env", "/bin/env"} {
		if st, err := os.Stat(env); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return env
		}
	}
	return ""
}
