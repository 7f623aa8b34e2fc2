package needs

import (
	"os"
	"path/filepath"
	"testing"
)

// TestShebang: the interpreter of a "#!" line, the command of
// "#!/usr/bin/env NAME" on the environment's PATH (the default path with no
// PATH or no resolver), and nothing for a relative interpreter.
func TestShebang(t *testing.T) {
	dir := t.TempDir()
	tool := filepath.Join(dir, "tool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := &Resolver{Env: []string{"PATH=/nowhere", "PATH=" + dir}}
	for _, c := range []struct {
		r               *Resolver
		head            string
		interp, command string
	}{
		{r, "#!/bin/sh -e\necho", "/bin/sh", ""},
		{r, "#! /usr/bin/env -S tool -x\n", "/usr/bin/env", tool},
		{r, "#!/usr/bin/env A=B missing-tool\n", "/usr/bin/env", ""},
		{nil, "#!/usr/bin/env sh\n", "/usr/bin/env", "/bin/sh"},
		{&Resolver{}, "#!/usr/bin/env sh\n", "/usr/bin/env", "/bin/sh"},
		{r, "#!bin/sh\n", "", ""},
		{r, "echo\n", "", ""},
	} {
		interp, command := c.r.Shebang([]byte(c.head))
		if interp != c.interp || command != c.command {
			t.Errorf("Shebang(%q) = %q, %q; want %q, %q", c.head, interp, command, c.interp, c.command)
		}
	}
}
