package cli

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse: any command line (arguments separated by NUL) is parsed by every
// command, and completed, without a panic; a refusal is always a usage error.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"--expose-r=/tmp\x00--\x00/bin/true", "--timeout\x00abc", "--=\x00-", "-v\x00--no-config\x00--learn",
		"--accept-unenforced=files-read,,all", "--landlok.x=1\x00--eval-syntax:p=arith", "--names\x00{}", "--\x00--",
		"--learn=\x00m:f\x00[1,{\"a\":null}]", "\x00\x00", "--a.=1\x00--.b=2\x00--eval-:=x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if len(line) > 4096 {
			return
		}
		args := strings.Split(line, "\x00")
		for _, c := range []*command{
			checkCommand(&checkOptions{}), runCommand(&runOptions{}), probeCommand(&probeOptions{}),
			callCommand(&callOptions{}), evalCommand(&evalOptions{}), versionCommand(), completionCommand(),
		} {
			if _, err := c.parse(args); err != nil {
				var ue *usageError
				if !errors.As(err, &ue) {
					t.Fatalf("%s %q: %v is not a usage error", c.name, args, err)
				}
			}
			completeWords(append([]string{c.name}, args[:len(args)-1]...), args[len(args)-1])
		}
		completeWords(args[:len(args)-1], args[len(args)-1])
	})
}
