package pylayer

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/policy"
)

// pgRules is the profile of the psycopg2 cases: TCP to 127.0.0.1:1 (where
// nothing listens) allowed, 127.0.0.2:5432 denied by a rule, the Unix socket
// directory ro/ read-only and rw/ read-write.
const pgRules = `python-import=psycopg2, os
net=ALLOW|tcp|127.0.0.1|1|OUT
net=DENY|tcp|127.0.0.2|5432|OUT
expose-ro=ro
expose-rw=rw
`

// TestGuardPsycopg2: psycopg2 connects through libpq (C), which no audit hook
// sees; its connection's targets, read from the DSN, the keyword arguments and
// the PG* variables as libpq reads them, are judged before libpq runs, and a
// refusal names the rule and its file(line), or the default deny, as for a
// socket: TCP by host, by hostaddr, by a name no rule can allow, each host of a
// list, a Unix socket directory (not exposed, read-only, libpq's default), an
// abstract socket. What the rules allow reaches libpq (which fails with its
// own error where no server listens).
func TestGuardPsycopg2(t *testing.T) {
	eachPython(t, func(t *testing.T, in *Interpreter) {
		if err := exec.Command(in.Path, "-I", "-c", "import psycopg2").Run(); err != nil {
			t.Skipf("psycopg2 is not installed for %s (Debian's python3-psycopg2 is /usr/bin/python3's): %v", in.Path, err)
		}
		dir := t.TempDir()
		for _, d := range []string{"ro", "rw", "out"} {
			if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		d := dir
		const refused = "RuleSocketConnectionRefusedError"
		implicit := func(name, code, target string) pyCase {
			return pyCase{name: name, code: code, exc: refused,
				msg: []string{"Guard network connection to '" + target + "' DENIED by implicit default policy."}}
		}
		denyRule := "net=DENY|tcp|127.0.0.2|5432|OUT"
		cases := []pyCase{
			implicit("a host no rule allows", "psycopg2.connect('host=127.0.0.3 dbname=x')", "[127.0.0.3]:5432"),
			{name: "a host a DENY rule refuses", code: "psycopg2.connect('host=127.0.0.2')", exc: refused,
				msg:  []string{"Connection to [127.0.0.2]:5432 DENIED by explicit rule '" + denyRule + "' from .py-sandboxes(3)"},
				rule: denyRule, ref: ".py-sandboxes(3)"},
			implicit("keyword arguments", "psycopg2.connect(host='127.0.0.1', port=5432)", "[127.0.0.1]:5432"),
			implicit("hostaddr is the address connected to", "psycopg2.connect('host=127.0.0.1 hostaddr=127.0.0.4 port=1')", "[127.0.0.4]:1"),
			implicit("a name no rule names", "psycopg2.connect('host=db.example.com')", "[db.example.com]:5432"),
			{name: "each host of a list", code: "psycopg2.connect('host=127.0.0.1,127.0.0.2 port=1,5432')", exc: refused,
				msg: []string{"DENIED by explicit rule '" + denyRule + "' from .py-sandboxes(3)"}, rule: denyRule, ref: ".py-sandboxes(3)"},
			implicit("PGHOST and PGPORT", "os.environ['PGHOST'] = '127.0.0.5'\nos.environ['PGPORT'] = '6000'\ntry:\n    psycopg2.connect('dbname=x')\n"+
				"finally:\n    del os.environ['PGHOST'], os.environ['PGPORT']", "[127.0.0.5]:6000"),
			{name: "a socket directory not exposed", code: "psycopg2.connect(host=D + '/out')", exc: refused,
				msg: []string{"Connection to Unix socket '" + d + "/out/.s.PGSQL.5432' DENIED: Access to '" + d + "/out/.s.PGSQL.5432' must be accepted by a rule."}},
			{name: "a read-only socket directory", code: "psycopg2.connect('host=' + D + '/ro port=5433')", exc: refused,
				msg:  []string{"Connection to Unix socket '" + d + "/ro/.s.PGSQL.5433' DENIED: Cannot write to '" + d + "/ro/.s.PGSQL.5433'. Rule 'expose-ro=ro' from .py-sandboxes(4)"},
				rule: "expose-ro=ro", ref: ".py-sandboxes(4)"},
			{name: "libpq's default socket directory", code: "psycopg2.connect('dbname=x')", exc: refused,
				msg: []string{"Connection to Unix socket '/var/run/postgresql/.s.PGSQL.5432' DENIED: Access to '/var/run/postgresql/.s.PGSQL.5432' must be accepted by a rule."}},
			{name: "an abstract socket", code: "psycopg2.connect('host=@pg')", exc: refused,
				msg: []string{"Guard network connection to abstract Unix socket 'pg' DENIED by implicit default policy."}},
			// Allowed: libpq runs, and fails by itself (nothing listens).
			{name: "an allowed host reaches libpq", code: "psycopg2.connect('host=127.0.0.1 port=1 connect_timeout=5')", exc: "OperationalError"},
			{name: "an allowed socket directory reaches libpq", code: "psycopg2.connect(host=D + '/rw')", exc: "OperationalError",
				msg: []string{".s.PGSQL.5432"}},
		}
		runCases(t, in, dir, pgRules, "import os, psycopg2\nD = os.getcwd()\n", cases)

		// A rule that takes any address on a port lets a name through to libpq
		// (the OS layer judges the address it picks), on that port only.
		runCases(t, in, dir, pgRules+"net=ALLOW|tcp|*|1|OUT\n", "import psycopg2\n", []pyCase{
			{name: "a name on the port of a rule for any address", code: "psycopg2.connect('host=pg.invalid port=1 connect_timeout=5')", exc: "OperationalError"},
			implicit("a name on another port", "psycopg2.connect('host=pg.invalid port=2')", "[pg.invalid]:2"),
		})
	})
}

// TestGuardLearnPsycopg2: in learning mode, psycopg2's connections are
// recorded (the TCP target, the Unix socket written in its directory) and go
// on to libpq; the PG* variables the layer reads for libpq are not taken for
// the program's reads.
func TestGuardLearnPsycopg2(t *testing.T) {
	eachPython(t, func(t *testing.T, in *Interpreter) {
		if err := exec.Command(in.Path, "-I", "-c", "import psycopg2").Run(); err != nil {
			t.Skipf("psycopg2 is not installed for %s (Debian's python3-psycopg2 is /usr/bin/python3's): %v", in.Path, err)
		}
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, "sock"), 0o755); err != nil {
			t.Fatal(err)
		}
		r := learnRun(t, in, dir, `import os, psycopg2
for dsn in ("host=127.0.0.1 port=1 connect_timeout=5", "host=" + os.getcwd() + "/sock"):
    try:
        psycopg2.connect(dsn)
    except psycopg2.OperationalError:
        print("libpq")
`)
		if strings.Count(r.stdout, "libpq") != 2 {
			t.Fatalf("both connections should reach libpq:\n%s", r)
		}
		obs := r.res.Observations
		want := policy.NetAccess{Proto: policy.TCP, Dir: policy.Out, IP: netip.MustParseAddr("127.0.0.1"), Port: 1}
		if !slices.Contains(obs.Net, want) {
			t.Errorf("%+v not learned: %+v", want, obs.Net)
		}
		if f := filesUnder(obs, dir); !slices.ContainsFunc(f, func(a policy.FileAccess) bool { return a.Path == "{dir}/sock/.s.PGSQL.5432" && a.Write }) {
			t.Errorf("the socket's write not learned: %+v", f)
		}
		for _, e := range obs.Env {
			if strings.HasPrefix(e, "PG") {
				t.Errorf("the layer's read of %s was learned as the program's", e)
			}
		}
	})
}
