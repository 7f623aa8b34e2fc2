package landlock_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
)

// TestVanishedPathFailsClosed: an exposed directory removed (or replaced by a
// symbolic link) between New and Start fails the start, and the program never
// runs.
func TestVanishedPathFailsClosed(t *testing.T) {
	for _, how := range []string{"removed", "symlink"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			exposed := filepath.Join(dir, "exposed")
			marks := filepath.Join(dir, "marks")
			providertest.WriteFile(t, filepath.Join(exposed, "f.txt"), "f")
			providertest.WriteFile(t, filepath.Join(marks, "keep"), "")
			sb := sandbox(t, []string{"expose-ro=" + exposed, "expose-rw=" + marks})
			mark := filepath.Join(marks, "ran")
			// It runs while the directory is there.
			providertest.Py(t, sb, `import sys; open(sys.argv[1], "w").write("1")`, mark)
			if _, err := os.Stat(mark); err != nil {
				t.Fatal("the program did not run:", err)
			}
			os.Remove(mark)
			if err := os.RemoveAll(exposed); err != nil {
				t.Fatal(err)
			}
			if how == "symlink" {
				if err := os.Symlink(dir, exposed); err != nil {
					t.Fatal(err)
				}
			}
			out, err := providertest.Run(t, sb, providertest.Python(t), "-I", "-c", `import sys; open(sys.argv[1], "w").write("1")`, mark)
			if err == nil {
				t.Fatalf("the start succeeded:\n%s", out)
			}
			var se *supervise.StartError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), exposed) {
				t.Errorf("want a start error naming %s, got %v", exposed, err)
			}
			if errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a sandbox that cannot be set up looks like a missing program: %v", err)
			}
			if _, err := os.Stat(mark); err == nil {
				t.Error("the program ran")
			}
		})
	}
}

// TestMissingProgram: a program that does not exist fails like with any provider.
func TestMissingProgram(t *testing.T) {
	sb := sandbox(t, nil)
	_, err := providertest.Run(t, sb, "/nonexistent/program")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("want ErrNotExist, got %v", err)
	}
}
