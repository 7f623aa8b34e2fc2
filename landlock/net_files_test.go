package landlock_test

import (
	"os"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestResolverFilesOnlyWithNetwork: /etc/hosts, /etc/resolv.conf and the CA store
// are readable when a net= rule allows traffic, and not otherwise; the private key
// directory never is.
func TestResolverFilesOnlyWithNetwork(t *testing.T) {
	const code = providertest.TryPrelude + `
for p in sys.argv[1:]:
    attempt(p, lambda: len(open(p, "rb").read(1)) if os.path.isfile(p) else len(os.listdir(p)) > 0)
`
	var files []string
	for _, p := range []string{"/etc/hosts", "/etc/resolv.conf", "/etc/ssl/certs/ca-certificates.crt"} {
		if _, err := os.Stat(p); err == nil {
			files = append(files, p)
		}
	}
	if len(files) == 0 {
		t.Skip("no resolver file here")
	}
	without := providertest.Py(t, sandbox(t, nil), code, files...)
	with := providertest.Py(t, sandbox(t, []string{"net=ALLOW|tcp|*|443|OUT"}), code, files...)
	for _, f := range files {
		providertest.ExpectLine(t, without, f+" EACCES")
		providertest.ExpectLine(t, with, f+" OK 1")
	}
	if _, err := os.Stat("/etc/ssl/private"); err == nil {
		out := providertest.Py(t, sandbox(t, []string{"net=ALLOW|tcp|*|443|OUT"}), code, "/etc/ssl/private")
		providertest.ExpectLine(t, out, "/etc/ssl/private EACCES")
	}
}
