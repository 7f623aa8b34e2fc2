package pysandboxes_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/policy"
)

// readmeBlock is a fenced block of README.md.
type readmeBlock struct {
	lang, text string
	line       int
}

func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []readmeBlock
	var cur *readmeBlock
	for i, l := range strings.Split(string(b), "\n") {
		switch {
		case cur == nil && strings.HasPrefix(l, "```"):
			cur = &readmeBlock{lang: strings.TrimPrefix(l, "```"), line: i + 1}
		case cur != nil && l == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += l + "\n"
		}
	}
	if cur != nil {
		t.Fatalf("README.md(%d): unterminated code block", cur.line)
	}
	return out
}

// buildSnippet compiles src as package main inside this module (through an
// overlay: nothing is written into the source tree) and returns the binary and
// the compiler's output.
func buildSnippet(t *testing.T, src string) (string, string, error) {
	t.Helper()
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	ov, _ := json.Marshal(map[string]any{"Replace": map[string]string{
		filepath.Join(root, "internal", "readmesnippet", "main.go"): file}})
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), ov, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "snippet")
	out, err := exec.Command("go", "build", "-overlay", filepath.Join(dir, "overlay.json"), "-o", bin,
		"./internal/readmesnippet").CombinedOutput()
	return bin, string(out), err
}

// TestReadmeRuleFile: the rule file the README opens with is valid as written.
func TestReadmeRuleFile(t *testing.T) {
	blocks := readmeBlocks(t)
	if len(blocks) == 0 || !strings.HasPrefix(blocks[0].text, "env=") {
		t.Fatal("README.md does not open with a rule file")
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, ".py-sandboxes")
	if err := os.WriteFile(file, []byte(blocks[0].text), 0o644); err != nil {
		t.Fatal(err)
	}
	// Host names are resolved when the policy loads: a hosts file gives the
	// README's one an address (the test uses no network).
	hosts := filepath.Join(dir, "hosts")
	if err := os.WriteFile(hosts, []byte("192.0.2.1 api.openai.com\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"OPENAI_API_KEY=k", "TMPDIR=" + t.TempDir(), "PATH=/usr/bin:/bin"}
	pol, err := policy.Load(context.Background(), file, &policy.Options{Env: env, Dir: dir, HostsFile: hosts})
	if err != nil {
		t.Fatalf("README.md(%d): the rule file is invalid: %v", blocks[0].line, err)
	}
	if w := pol.Warnings(); len(w) > 0 {
		t.Errorf("README.md(%d): the rule file warns: %v", blocks[0].line, w)
	}
}

// TestReadmeLibrarySnippet: the README's library program builds and runs as
// written, with only the imports it shows.
func TestReadmeLibrarySnippet(t *testing.T) {
	var prog *readmeBlock
	for _, b := range readmeBlocks(t) {
		if b.lang == "go" && strings.HasPrefix(b.text, "package main") {
			prog = &b
			break
		}
	}
	if prog == nil {
		t.Fatal("README.md has no complete Go program")
	}
	// The program imports the library alone: the root, which links the
	// providers, and policy.
	for _, imp := range regexp.MustCompile(`"(github\.com/pysandboxes/[^"]*)"`).FindAllStringSubmatch(prog.text, -1) {
		if imp[1] != "github.com/pysandboxes/pysandboxes" && imp[1] != "github.com/pysandboxes/pysandboxes/policy" {
			t.Errorf("README.md(%d): the program imports %s: the root and policy are all a program needs", prog.line, imp[1])
		}
	}
	bin, out, err := buildSnippet(t, prog.text)
	if err != nil {
		t.Fatalf("README.md(%d): the program does not build: %v\n%s", prog.line, err, out)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.py"), []byte("import json\nprint(json.dumps({'ran': True}))\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".py-sandboxes"), []byte("expose-ro=/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
	got, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(got)) != `{"ran": true}` {
		t.Fatalf("README.md(%d): the program ran with %v:\n%s", prog.line, err, got)
	}
}

var unusedVar = regexp.MustCompile(`declared and not used: (\w+)`)

// TestReadmeFragments: the README's Go fragments compile as written, in a
// function where ctx, pol, rows, src and sb are what their names say.
func TestReadmeFragments(t *testing.T) {
	n := 0
	for _, b := range readmeBlocks(t) {
		if b.lang != "go" || strings.HasPrefix(b.text, "package ") {
			continue
		}
		n++
		var uses []string
		for try := 0; ; try++ {
			src := `package main

import (
	"context"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
)

func main() {
	ctx := context.Background()
	pol, err := policy.Load(ctx, ".py-sandboxes", nil)
	rows := []int{1, 2, 3}
	src := "x = 1"
	var sb *pysandboxes.Sandbox
	_, _, _, _, _ = pol, err, rows, src, sb
	{
` + b.text + strings.Join(uses, "") + `	}
}
`
			_, out, err := buildSnippet(t, src)
			if err == nil {
				break
			}
			m := unusedVar.FindAllStringSubmatch(out, -1)
			if len(m) == 0 || try > 5 {
				t.Fatalf("README.md(%d): the fragment does not compile: %v\n%s", b.line, err, out)
			}
			for _, x := range m {
				uses = append(uses, "\t_ = "+x[1]+"\n")
			}
		}
	}
	if n == 0 {
		t.Fatal("README.md has no Go fragment")
	}
}

// TestReadmeDemo: the README's first command, ./scripts/demo, shows what it
// says: the policy's environment only, an exposed file read, a secret and a
// write refused, network by port, a provider that cannot enforce the policy
// refusing, then a profile learned and enforced.
func TestReadmeDemo(t *testing.T) {
	if os.Geteuid() != 0 {
		if _, err := exec.Command("./scripts/install-deps", "--check").CombinedOutput(); err != nil {
			t.Skip("the demo installs missing packages as root; not root here and packages are missing")
		}
	}
	out, err := exec.Command("./scripts/demo").CombinedOutput()
	if err != nil {
		t.Fatalf("./scripts/demo: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{
		"DEMO_TOKEN=t0k3n\nGREETING=hello from the policy\n",
		"public data",
		"cat: secret.txt: No such file or directory",
		"Read-only file system: 'out.txt'",
		"tcp 9090 -> ",
		"udp -> Operation not permitted",
		"os-sandbox subprocess cannot enforce",
		"python-sb: learning mode: nothing is enforced",
		"python-import=json, os",
		"Add `python-import=socket`.",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the demo does not show %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "\nSECRET_KEY=") || strings.Contains(text, "s3cr3t") {
		t.Errorf("the demo leaked a secret:\n%s", text)
	}
	if n := strings.Count(text, `{"greeting": "hi"}`); n != 2 {
		t.Errorf("the learned profile did not run the program the same (%d greetings):\n%s", n, text)
	}
}
