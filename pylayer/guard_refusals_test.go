package pylayer

import (
	"os"
	"path/filepath"
	"testing"
)

// TestGuardOpenDirFdUnresolved: os.open of a relative path with a dir_fd the
// layer cannot resolve (here a closed descriptor) is refused as a path no rule
// accepts, and the host is told of the refusal as of every other; a dir_fd it
// resolves opens the file the rules allow, and other arguments reach the
// original os.open.
func TestGuardOpenDirFdUnresolved(t *testing.T) {
	eachPython(t, func(t *testing.T, in *Interpreter) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "ro"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "ro", "f"), []byte("data"), 0o644); err != nil {
			t.Fatal(err)
		}
		msg := "Access to 'f' must be accepted by a rule (its dir_fd cannot be resolved)."
		r := runCases(t, in, dir, "expose-ro=ro\npython-import=os\n", "import os\nD = os.getcwd()\n", []pyCase{
			{name: "a closed dir_fd", code: "os.open('f', os.O_RDONLY, dir_fd=987)", exc: "RuleFileNotFoundError", msg: []string{msg}},
			{name: "a dir_fd of an exposed directory", code: "fd = os.open(D + '/ro', os.O_RDONLY)\nf = os.open('f', os.O_RDONLY, dir_fd=fd)\nreturn os.read(f, 10)",
				value: "b'data'"},
			{name: "an argument os.open does not take", code: "os.open('f', os.O_RDONLY, dir_fd=None, bogus=1)", exc: "TypeError"},
		})
		for _, d := range r.res.Denials {
			if d.Exception == "RuleFileNotFoundError" && d.Message == msg && d.Target == "f" {
				return
			}
		}
		t.Errorf("no denial reported for the unresolved dir_fd; denials %+v", r.res.Denials)
	})
}
