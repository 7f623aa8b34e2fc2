package landlock_test

import (
	"os"
	"testing"
)

// TestResolverFilesOnlyWithNetwork: /etc/hosts, /etc/resolv.conf and the CA store
// are readable when a net= rule allows traffic, and not otherwise; the private key
// directory never is.
func TestResolverFilesOnlyWithNetwork(t *testing.T) {
	const code = tryPrelude + `
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
	without := py(t, sandbox(t, nil), code, files...)
	with := py(t, sandbox(t, []string{"net=ALLOW|tcp|*|443|OUT"}), code, files...)
	for _, f := range files {
		expectLine(t, without, f+" EACCES")
		expectLine(t, with, f+" OK 1")
	}
	if _, err := os.Stat("/etc/ssl/private"); err == nil {
		out := py(t, sandbox(t, []string{"net=ALLOW|tcp|*|443|OUT"}), code, "/etc/ssl/private")
		expectLine(t, out, "/etc/ssl/private EACCES")
	}
}
