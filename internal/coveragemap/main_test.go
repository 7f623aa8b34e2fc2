package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/security"
)

// jsonRun makes go test -json output: the root table logged by TestCorpus
// (indented as t.Logf does), the unprivileged one nested in
// TestCorpusUnprivileged's log, plus extra events.
func jsonRun(t *testing.T, root, unpriv string, extra ...map[string]string) string {
	t.Helper()
	var b strings.Builder
	emit := func(e map[string]string) {
		j, _ := json.Marshal(e)
		b.Write(j)
		b.WriteByte('\n')
	}
	emit(map[string]string{"Action": "run", "Test": "TestCorpus"})
	emit(map[string]string{"Action": "output", "Test": "TestCorpus", "Output": "    corpus_test.go:82: verdicts:\n"})
	for _, l := range strings.Split(strings.TrimSuffix(root, "\n"), "\n") {
		emit(map[string]string{"Action": "output", "Test": "TestCorpus", "Output": "        " + l + "\n"})
	}
	emit(map[string]string{"Action": "pass", "Test": "TestCorpus"})
	if unpriv != "" {
		emit(map[string]string{"Action": "output", "Test": "TestCorpusUnprivileged", "Output": "    corpus_test.go:243: as uid 65534:\n"})
		emit(map[string]string{"Action": "output", "Test": "TestCorpusUnprivileged", "Output": "        verdicts:\n"})
		for _, l := range strings.Split(strings.TrimSuffix(unpriv, "\n"), "\n") {
			emit(map[string]string{"Action": "output", "Test": "TestCorpusUnprivileged", "Output": "        " + l + "\n"})
		}
		emit(map[string]string{"Action": "output", "Test": "TestCorpusUnprivileged", "Output": "        --- PASS: TestCorpus (12.00s)\n"})
	}
	for _, e := range extra {
		emit(e)
	}
	return b.String()
}

const rootTable = `attack        capability    landlock  unshare  firejail
read-outside  files-read    blocked   blocked  blocked
stat-outside  files-meta    not enforced (got through)  blocked  blocked [1]
dns-exfil     udp-deny      skipped [2]  skipped [3]  blocked
[1] firejail hides what it does not whitelist
[2] listen udp4 127.0.94.53:53 in /tmp/pysb-1234/x: permission denied (pid 4242, 12.5ms)
[3] listen udp4 127.0.178.53:53 in /tmp/pysb-9999/x: permission denied (pid 77, 3s)
`

const unprivTable = `attack        capability  landlock  unshare
read-outside  files-read  blocked   blocked
`

// TestReadCorpus: both tables found at their indentation, notes normalised
// (temporary paths, pids, durations, loopback addresses) and merged when they
// become equal, cell references renumbered.
func TestReadCorpus(t *testing.T) {
	runs, err := ReadCorpus(strings.NewReader(jsonRun(t, rootTable, unprivTable)))
	if err != nil {
		t.Fatal(err)
	}
	r := runs.Root
	if strings.Join(r.Providers, ",") != "landlock,unshare,firejail" || strings.Join(r.Attacks, ",") != "read-outside,stat-outside,dns-exfil" {
		t.Fatalf("root table = %+v", r)
	}
	if got := r.Cells["stat-outside"]["landlock"]; got != "not enforced (got through)" {
		t.Errorf("cell = %q", got)
	}
	if len(r.Notes) != 2 || r.Cells["dns-exfil"]["landlock"] != "skipped [2]" || r.Cells["dns-exfil"]["unshare"] != "skipped [2]" {
		t.Errorf("notes %q, cells %q", r.Notes, r.Cells["dns-exfil"])
	}
	if want := "listen udp4 127.x.x.x:PORT in /tmp/…: permission denied (pid N, T)"; r.Notes[1] != want {
		t.Errorf("note = %q, want %q", r.Notes[1], want)
	}
	if u := runs.Unprivileged; len(u.Providers) != 2 || u.Cells["read-outside"]["unshare"] != "blocked" {
		t.Errorf("unprivileged table = %+v", u)
	}
}

// TestReadCorpusRefuses: a failed run, a FAILED cell, a missing unprivileged
// table or unreadable input make no map.
func TestReadCorpusRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"failed test", jsonRun(t, rootTable, unprivTable, map[string]string{"Action": "fail", "Test": "TestCorpus/providers/landlock/cpu-rlimit"}),
			"the corpus failed (TestCorpus/providers/landlock/cpu-rlimit)"},
		{"failed cell", jsonRun(t, strings.Replace(rootTable, "blocked   blocked  blocked", "blocked   FAILED [9]  blocked", 1), unprivTable),
			"read-outside under unshare FAILED"},
		{"not root", jsonRun(t, rootTable, "", map[string]string{"Action": "output", "Test": "TestCorpusUnprivileged", "Output": "--- SKIP: TestCorpusUnprivileged (0.00s)\n"}),
			"the unprivileged run needs a root host"},
		{"no unprivileged run", jsonRun(t, rootTable, ""), "TestCorpusUnprivileged did not run"},
		{"not json", "=== RUN TestCorpus\n", "line 1 of the go test -json output"},
	} {
		_, err := ReadCorpus(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestRenderStable: the map holds no timing and comes out the same from two
// runs that differ only in what is volatile; a provider missing from the
// unprivileged run is listed as skipped.
func TestRenderStable(t *testing.T) {
	a, err := ReadCorpus(strings.NewReader(jsonRun(t, rootTable, unprivTable)))
	if err != nil {
		t.Fatal(err)
	}
	other := strings.NewReplacer("4242", "5151", "12.5ms", "80ms", "127.0.94.53", "127.0.3.53", "pysb-1234", "pysb-77").Replace(rootTable)
	b, err := ReadCorpus(strings.NewReader(jsonRun(t, other, unprivTable)))
	if err != nil {
		t.Fatal(err)
	}
	suites := []Suite{{Package: ".", Tests: 3, Doc: "Package x does | things."}}
	ma, mb := Render(suites, a, security.Attacks()), Render(suites, b, security.Attacks())
	if ma != mb {
		t.Errorf("maps differ:\n%s", firstDifference(ma, mb))
	}
	for _, want := range []string{
		"| `read-outside` | blocked | blocked | blocked |",
		"| `dns-exfil` | skipped [2] | skipped [2] | blocked |",
		"provider `firejail`, not run as uid 65534",
		"`dns-exfil` under landlock, `dns-exfil` under unshare — listen udp4",
		`Package x does \| things.`,
		fmt.Sprintf("| attacks in the corpus | %d |", len(security.Attacks())),
	} {
		if !strings.Contains(ma, want) {
			t.Errorf("the map lacks %q", want)
		}
	}
}

// TestCountSuites counts the functions the go command would run.
func TestCountSuites(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"a/doc.go": "// Package a does things. More words.\npackage a\n",
		"a/a_test.go": "package a\nimport \"testing\"\nfunc TestMain(m *testing.M) {}\nfunc TestX(t *testing.T) {}\nfunc Test(t *testing.T) {}\n" +
			"func Testlower(t *testing.T) {}\nfunc FuzzY(f *testing.F) {}\nfunc BenchmarkZ(b *testing.B) {}\nfunc Example() {}\nfunc ExampleA() {}\n" +
			"type T struct{}\nfunc (T) TestMethod(t *testing.T) {}\n",
		"a/testdata/x_test.go": "package x\nfunc TestIgnored() {}\n",
		"b/b.go":               "package b\n",
	}
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := CountSuites(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 1 || s[0].Package != "a" || s[0].Tests != 2 || s[0].Fuzz != 1 || s[0].Benchmarks != 1 || s[0].Examples != 2 || s[0].Doc != "Package a does things." {
		t.Errorf("suites = %+v", s)
	}
}
