package landlock_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestSymlinkAndHardLinkEscapes: a symbolic link planted in an exposed directory
// that points outside gives nothing (Landlock checks the file it resolves to); the
// program can plant a symbolic link but not read through it, and cannot make a
// hard link to a file outside (Landlock refuses the link that would grant it more
// rights).
func TestSymlinkAndHardLinkEscapes(t *testing.T) {
	dir := t.TempDir()
	rw := filepath.Join(dir, "rw")
	secret := filepath.Join(dir, "outside", "secret.txt")
	providertest.WriteFile(t, secret, "TOPSECRET")
	providertest.WriteFile(t, filepath.Join(rw, "ok.txt"), "ok")
	if err := os.Symlink(secret, filepath.Join(rw, "planted")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(secret), filepath.Join(rw, "planted-dir")); err != nil {
		t.Fatal(err)
	}
	sb := sandbox(t, []string{"expose-rw=" + rw})
	out := providertest.Py(t, sb, providertest.TryPrelude+`
rw, secret = sys.argv[1], sys.argv[2]
attempt("planted", lambda: open(rw + "/planted").read())
attempt("planted-dir", lambda: open(rw + "/planted-dir/secret.txt").read())
attempt("planted-list", lambda: os.listdir(rw + "/planted-dir"))
attempt("symlink", lambda: os.symlink(secret, rw + "/mine"))
attempt("through-mine", lambda: open(rw + "/mine").read())
attempt("hardlink", lambda: os.link(secret, rw + "/hard"))
attempt("through-hard", lambda: open(rw + "/hard").read())
attempt("inside-link", lambda: os.symlink(rw + "/ok.txt", rw + "/ok-link"))
attempt("through-inside", lambda: open(rw + "/ok-link").read())
`, rw, secret)
	providertest.ExpectLine(t, out, "planted EACCES")
	providertest.ExpectLine(t, out, "planted-dir EACCES")
	providertest.ExpectLine(t, out, "planted-list EACCES")
	providertest.ExpectLine(t, out, "symlink OK None")
	providertest.ExpectLine(t, out, "through-mine EACCES")
	if !strings.Contains(out, "hardlink EXDEV") && !strings.Contains(out, "hardlink EACCES") && !strings.Contains(out, "hardlink EPERM") {
		t.Errorf("the hard link to a file outside was not refused:\n%s", out)
	}
	providertest.ExpectLine(t, out, "through-hard ENOENT")
	providertest.ExpectLine(t, out, "through-inside OK ok")
	if strings.Contains(out, "TOPSECRET") {
		t.Errorf("the secret leaked:\n%s", out)
	}
}
