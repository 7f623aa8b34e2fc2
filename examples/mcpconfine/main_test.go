package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// bin holds pysandboxes and python-sb, built once for these tests.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcpconfine-bin-")
	if err != nil {
		panic(err)
	}
	bin = dir
	for _, c := range []string{"pysandboxes", "python-sb"} {
		build := exec.Command("go", "build", "-buildvcs=false", "-o", filepath.Join(dir, c), "github.com/pysandboxes/pysandboxes/cmd/"+c)
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			os.RemoveAll(dir)
			panic("building " + c + ": " + err.Error())
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// dirs makes the directory the servers may read (with a file) and, beside
// it, one they may not (with a secret).
func dirs(t *testing.T) (data, secret string) {
	t.Helper()
	root := t.TempDir()
	data, other := filepath.Join(root, "data"), filepath.Join(root, "other")
	for _, d := range []string{data, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret = filepath.Join(other, "secret.txt")
	if err := os.WriteFile(filepath.Join(data, "notes.txt"), []byte("readable\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("TOPSECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return data, secret
}

// TestFilesystemServerConfined: the official filesystem server, told it may
// serve "/" and DIR, runs under pysandboxes run with DIR exposed read-only: a
// client of the SDK lists and reads DIR, and reading a file beside it fails
// with the OS's own error (EACCES or ENOENT from the kernel, as Node reports
// it), not the server's own path check, which the arguments passed.
func TestFilesystemServerConfined(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed (scripts/install-deps installs nodejs and npm)")
	}
	prefix := os.Getenv("PYSANDBOXES_NODE_PREFIX")
	if prefix == "" {
		prefix = DefaultNodePrefix
	}
	if _, err := os.Stat(filepath.Join(prefix, FilesystemServerJS)); err != nil {
		t.Skipf("@modelcontextprotocol/server-filesystem is not installed under %s (scripts/install-deps installs it; PYSANDBOXES_NODE_PREFIX names another prefix)", prefix)
	}
	data, secret := dirs(t)
	ctx := context.Background()
	cs, err := Connect(ctx, FilesystemCommand(ctx, filepath.Join(bin, "pysandboxes"), node, prefix, data), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	text, isErr, err := Text(ctx, cs, "list_allowed_directories", map[string]any{})
	if err != nil || isErr || !strings.Contains(text, "\n/\n") && !strings.HasSuffix(text, "\n/") {
		t.Fatalf("list_allowed_directories: %q %v %v; want / among them (the server's own check allows everything)", text, isErr, err)
	}
	if text, isErr, err = Text(ctx, cs, "list_directory", map[string]any{"path": data}); err != nil || isErr || text != "[FILE] notes.txt" {
		t.Errorf("list_directory %s: %q %v %v", data, text, isErr, err)
	}
	if text, isErr, err = Text(ctx, cs, "read_text_file", map[string]any{"path": filepath.Join(data, "notes.txt")}); err != nil || isErr || text != "readable\n" {
		t.Errorf("read_text_file in DIR: %q %v %v", text, isErr, err)
	}
	for _, path := range []string{secret, filepath.Dir(secret), "/etc/passwd"} {
		tool := "read_text_file"
		if !strings.HasSuffix(path, ".txt") && path != "/etc/passwd" {
			tool = "list_directory"
		}
		text, isErr, err = Text(ctx, cs, tool, map[string]any{"path": path})
		if err != nil {
			t.Fatalf("%s %s: a protocol error: %v", tool, path, err)
		}
		osErr := strings.HasPrefix(text, "EACCES: permission denied") || strings.HasPrefix(text, "ENOENT: no such file or directory")
		if !isErr || !osErr || strings.Contains(text, "TOPSECRET") || strings.Contains(text, "root:") || strings.Contains(text, "Access denied - path outside") {
			t.Errorf("%s %s: %q (error %v); want the OS's EACCES or ENOENT", tool, path, text, isErr)
		}
	}
}

// TestPythonServerConfined: the Python MCP server under python-sb: DIR is
// read, a file beside it is refused by the Python layer (RuleFileNotFoundError)
// and a connection by the network guard, both reported as tool errors the
// client can show.
func TestPythonServerConfined(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	data, secret := dirs(t)
	rules, err := writeRules(PythonRules(data))
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(rules)
	ctx := context.Background()
	cmd := PythonCommand(ctx, filepath.Join(bin, "python-sb"), rules)
	cs, err := Connect(ctx, cmd, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	cases := []struct {
		tool    string
		args    map[string]any
		isErr   bool
		want    string
		without string
	}{
		{"list_dir", map[string]any{"path": data}, false, "notes.txt", ""},
		{"read_file", map[string]any{"path": filepath.Join(data, "notes.txt")}, false, "readable\n", ""},
		{"read_file", map[string]any{"path": secret}, true, "RuleFileNotFoundError: [Errno 2] Access to '" + secret + "' must be accepted by a rule", "TOPSECRET"},
		{"list_dir", map[string]any{"path": filepath.Dir(secret)}, true, "RuleFileNotFoundError", "secret.txt"},
		{"connect", map[string]any{"host": "127.0.0.1", "port": 9}, true, "RuleSocketConnectionRefusedError: [Errno 111] Guard network connection to '[127.0.0.1]:9' DENIED by implicit default policy", ""},
	}
	for _, c := range cases {
		text, isErr, err := Text(ctx, cs, c.tool, c.args)
		if err != nil || isErr != c.isErr || !strings.Contains(text, c.want) || (c.without != "" && strings.Contains(text, c.without)) {
			t.Errorf("%s %v: %q (error %v, %v); want error %v with %q", c.tool, c.args, text, isErr, err, c.isErr, c.want)
		}
	}
}
