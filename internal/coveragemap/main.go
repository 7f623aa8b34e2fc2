// Command coveragemap writes docs/coverage.md, the test coverage map of
// pysandboxes, from the output of the security corpus run with go test -json
// and from the test sources themselves:
//
//	go test -count=1 -json -run '^(TestCorpus|TestCorpusUnprivileged)$' ./security > corpus.json
//	go run ./internal/coveragemap -o docs/coverage.md < corpus.json
//	go run ./internal/coveragemap -check docs/coverage.md < corpus.json
//
// The map has the suites (the test, fuzz, benchmark and example functions of each
// package, counted from the sources), the attacks of the corpus, the provider ×
// attack matrix with the verdicts of the run as root (TestCorpus) and as an
// unprivileged user (TestCorpusUnprivileged, which runs the corpus again as uid
// 65534), the scenarios skipped and why, and the counts.
//
// The map must come out the same from every passing run on the same kind of
// machine, so that -check can fail when the committed file is stale and only
// then: it holds no timing, and the notes of the verdict tables (skip reasons,
// exceptions) are normalised (temporary paths, process ids, durations). A run
// that failed, or that lacks one of the two tables (the unprivileged one needs a
// root host), is refused: the map is made from a complete, passing run.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/pysandboxes/pysandboxes/security"
)

func main() {
	out := flag.String("o", "", "write the map to this file (default: standard output)")
	check := flag.String("check", "", "compare the map with this file, and fail if it differs")
	root := flag.String("root", ".", "the module's root directory (where the test sources are counted)")
	flag.Parse()
	if err := run(os.Stdin, *root, *out, *check); err != nil {
		fmt.Fprintln(os.Stderr, "coveragemap:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, root, out, check string) error {
	runs, err := ReadCorpus(in)
	if err != nil {
		return err
	}
	suites, err := CountSuites(root)
	if err != nil {
		return err
	}
	md := Render(suites, runs, security.Attacks())
	switch {
	case check != "":
		old, err := os.ReadFile(check)
		if err != nil {
			return err
		}
		if !bytes.Equal(old, []byte(md)) {
			return fmt.Errorf("%s is stale: regenerate it with go run ./internal/coveragemap -o %s (see CONTRIBUTING.md)\n%s",
				check, check, firstDifference(string(old), md))
		}
		return nil
	case out != "":
		return os.WriteFile(out, []byte(md), 0o644)
	default:
		_, err := io.WriteString(os.Stdout, md)
		return err
	}
}

// firstDifference shows the first line that differs.
func firstDifference(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  committed: %s\n  generated: %s", i+1, x, y)
		}
	}
	return ""
}

// Suite is one package's test functions.
type Suite struct {
	Package                           string // import path relative to the module ("." for the root)
	Doc                               string // the first sentence of the package's doc comment
	Tests, Fuzz, Benchmarks, Examples int
}

// CountSuites counts the Test, Fuzz, Benchmark and Example functions of every
// package under root, from the sources (testdata and hidden directories left
// out).
func CountSuites(root string) ([]Suite, error) {
	byDir := map[string]*Suite{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		s := byDir[dir]
		if s == nil {
			s = &Suite{Package: filepath.ToSlash(dir)}
			byDir[dir] = s
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if !strings.HasSuffix(name, "_test.go") {
			if f.Doc != nil && s.Doc == "" {
				s.Doc = firstSentence(f.Doc.Text())
			}
			return nil
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil {
				continue
			}
			n := fn.Name.Name
			switch {
			case isTestFunc(n, "Test") && n != "TestMain":
				s.Tests++
			case isTestFunc(n, "Fuzz"):
				s.Fuzz++
			case isTestFunc(n, "Benchmark"):
				s.Benchmarks++
			case n == "Example" || strings.HasPrefix(n, "Example"):
				s.Examples++
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []Suite
	for _, s := range byDir {
		if s.Tests+s.Fuzz+s.Benchmarks+s.Examples > 0 {
			out = append(out, *s)
		}
	}
	slices.SortFunc(out, func(a, b Suite) int { return strings.Compare(a.Package, b.Package) })
	return out, nil
}

// isTestFunc reports whether name is prefix followed by nothing or by a
// character that is not a lower-case letter, as the go command reads it.
func isTestFunc(name, prefix string) bool {
	if !strings.HasPrefix(name, prefix) {
		return false
	}
	rest := name[len(prefix):]
	return rest == "" || !(rest[0] >= 'a' && rest[0] <= 'z')
}

func firstSentence(doc string) string {
	doc = strings.Join(strings.Fields(doc), " ")
	if i := strings.Index(doc, ". "); i >= 0 {
		doc = doc[:i+1]
	}
	return doc
}

// Table is one verdict table of the corpus: the providers (columns), the
// verdict of each attack (rows) by provider, and the numbered notes.
type Table struct {
	Providers []string
	Cells     map[string]map[string]string // attack → provider → cell ("blocked", "skipped [2]")
	Attacks   []string                     // in the table's order
	Notes     []string                     // note n is Notes[n-1]
}

// Runs are what the corpus run printed.
type Runs struct {
	Root, Unprivileged *Table
	// Unavailable are the providers the root run skipped, with the reason.
	Unavailable map[string]string
}

type event struct {
	Action, Test, Output string
}

// ReadCorpus reads go test -json output of the security package.
func ReadCorpus(r io.Reader) (*Runs, error) {
	outputs := map[string]*strings.Builder{}
	failed := map[string]bool{}
	skipped := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("line %d of the go test -json output: %w", line, err)
		}
		top, _, _ := strings.Cut(e.Test, "/")
		switch e.Action {
		case "output":
			if top != "" {
				if outputs[top] == nil {
					outputs[top] = &strings.Builder{}
				}
				outputs[top].WriteString(e.Output)
			}
			if parts := strings.Split(e.Test, "/"); len(parts) == 3 && parts[0] == "TestCorpus" {
				if i := strings.Index(e.Output, "is not available here: "); i >= 0 {
					skipped[parts[2]] += e.Output[i+len("is not available here: "):]
				}
			}
		case "fail":
			failed[e.Test] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(failed) > 0 {
		var names []string
		for n := range failed {
			if n == "" {
				n = "(the package)"
			}
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("the corpus failed (%s): the map is made from a passing run", strings.Join(names, ", "))
	}
	runs := &Runs{Unavailable: map[string]string{}}
	for p, why := range skipped {
		runs.Unavailable[p] = normalise(strings.TrimSpace(why))
	}
	var err error
	for _, t := range []struct {
		name string
		dst  **Table
	}{{"TestCorpus", &runs.Root}, {"TestCorpusUnprivileged", &runs.Unprivileged}} {
		b := outputs[t.name]
		if b == nil {
			return nil, fmt.Errorf("%s did not run (go test -json -run '^(TestCorpus|TestCorpusUnprivileged)$' ./security, as root)", t.name)
		}
		if *t.dst, err = parseTable(b.String()); err != nil {
			return nil, fmt.Errorf("%s: %w", t.name, err)
		}
	}
	return runs, nil
}

var (
	spaces   = regexp.MustCompile(`\s{2,}`)
	noteLine = regexp.MustCompile(`^\[(\d+)\] (.*)$`)
)

// parseTable finds the verdict table security.Format printed (after
// "verdicts:") in a test's output, whatever its indentation.
func parseTable(out string) (*Table, error) {
	lines := strings.Split(out, "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasSuffix(strings.TrimSpace(l), "verdicts:") })
	if i < 0 {
		if strings.Contains(out, "--- SKIP") {
			return nil, errors.New("skipped: the unprivileged run needs a root host; the map is made as root")
		}
		return nil, errors.New("no verdict table in its output")
	}
	lines = lines[i+1:]
	if len(lines) == 0 {
		return nil, errors.New("empty verdict table")
	}
	head := spaces.Split(strings.TrimSpace(lines[0]), -1)
	if len(head) < 3 || head[0] != "attack" || head[1] != "capability" {
		return nil, fmt.Errorf("unexpected table header %q", lines[0])
	}
	t := &Table{Providers: head[2:], Cells: map[string]map[string]string{}}
	lines = lines[1:]
	for len(lines) > 0 {
		f := spaces.Split(strings.TrimSpace(lines[0]), -1)
		if len(f) != len(head) {
			break
		}
		t.Attacks = append(t.Attacks, f[0])
		t.Cells[f[0]] = map[string]string{}
		for j, p := range t.Providers {
			t.Cells[f[0]][p] = f[j+2]
		}
		lines = lines[1:]
	}
	var notes []string
	for len(lines) > 0 {
		m := noteLine.FindStringSubmatch(strings.TrimSpace(lines[0]))
		if m == nil || m[1] != fmt.Sprint(len(notes)+1) {
			break
		}
		notes = append(notes, normalise(m[2]))
		lines = lines[1:]
	}
	renumber(t, notes)
	if len(t.Attacks) == 0 {
		return nil, errors.New("the verdict table has no row")
	}
	for _, a := range t.Attacks {
		for _, p := range t.Providers {
			if strings.HasPrefix(t.Cells[a][p], "FAILED") {
				return nil, fmt.Errorf("%s under %s FAILED: the map is made from a passing run", a, p)
			}
		}
	}
	return t, nil
}

// renumber sets t.Notes from notes, normalised: notes that became equal are
// one, numbered in the order the cells (attack by attack, provider by
// provider) first refer to them, and the cells' references follow.
func renumber(t *Table, notes []string) {
	newRef := map[int]int{}
	for _, a := range t.Attacks {
		for _, p := range t.Providers {
			v, ref, ok := strings.Cut(t.Cells[a][p], " [")
			var n int
			if !ok {
				continue
			}
			if _, err := fmt.Sscanf(strings.TrimSuffix(ref, "]"), "%d", &n); err != nil || n < 1 || n > len(notes) {
				continue
			}
			if _, done := newRef[n]; !done {
				i := slices.Index(t.Notes, notes[n-1])
				if i < 0 {
					t.Notes = append(t.Notes, notes[n-1])
					i = len(t.Notes) - 1
				}
				newRef[n] = i + 1
			}
			t.Cells[a][p] = fmt.Sprintf("%s [%d]", v, newRef[n])
		}
	}
}

var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`/tmp/[^\s:;,)'"]+`), "/tmp/…"},
	{regexp.MustCompile(`\b(pid|process) \d+`), "$1 N"},
	{regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|ms|s)\b`), "T"},
	{regexp.MustCompile(`\b127\.\d+\.\d+\.\d+`), "127.x.x.x"},
	{regexp.MustCompile(`(127\.x\.x\.x|localhost|\]):\d+`), "$1:PORT"},
	{regexp.MustCompile(`\bport \d{4,5}\b`), "port PORT"},
}

// normalise takes out of a note what differs from run to run: temporary paths,
// process ids, durations, ports chosen by the kernel.
func normalise(s string) string {
	for _, v := range volatile {
		s = v.re.ReplaceAllString(s, v.with)
	}
	return s
}
