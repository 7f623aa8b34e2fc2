// Command mcpconfine runs someone else's MCP servers confined, and talks to
// them with the official Go SDK's client:
//
//   - the official filesystem server (@modelcontextprotocol/server-filesystem,
//     from npm) under `pysandboxes run`, with one directory exposed read-only
//     and no network. Its own arguments allow the whole file system ("/"): the
//     server would serve any file, and the kernel refuses all but that
//     directory (the server's read fails with the OS's EACCES or ENOENT);
//   - a small Python MCP server (server.py beside this file, written without the
//     MCP SDK) under python-sb: the OS provider and the Python layer, whose
//     refusals (RuleFileNotFoundError, RuleSocketConnectionRefusedError) the
//     server returns as tool errors naming the rule line that would allow them.
//
// An MCP client that starts servers itself (a desktop client, an IDE) gets the
// same by starting the same command lines; docs/mcp.md shows them.
//
//	npm install --prefix /var/cache/pysandboxes/node @modelcontextprotocol/server-filesystem
//	go run ./examples/mcpconfine -dir DIR -node-prefix /var/cache/pysandboxes/node
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// pythonServerSource is the Python MCP server, run as python-sb -c SOURCE (the
// sandbox need not expose the file it comes from).
//
//go:embed server.py
var pythonServerSource string

// FilesystemServerJS is the filesystem server's program under an npm prefix.
const FilesystemServerJS = "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"

// DefaultNodePrefix is where scripts/install-deps installs the filesystem
// server (npm install --prefix).
const DefaultNodePrefix = "/var/cache/pysandboxes/node"

// minimalEnv is the environment of the confined servers: nothing of the
// host's but a PATH.
var minimalEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}

// FilesystemCommand is the command line that runs the filesystem server under
// pysandboxes run: dir exposed read-only, the npm prefix too (the server's
// code), nothing else, no network (nothing grants any). The server is told it
// may serve "/" and dir.
func FilesystemCommand(ctx context.Context, pysandboxes, node, prefix, dir string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, pysandboxes, "run", "--no-config",
		"--expose-ro="+dir, "--expose-ro="+prefix,
		"--", node, filepath.Join(prefix, FilesystemServerJS), dir, "/")
	cmd.Env = minimalEnv
	return cmd
}

// PythonRules is the policy of the Python server: dir read-only, the modules
// it imports, nothing else.
func PythonRules(dir string) string {
	return "expose-ro=" + dir + "\npython-import=json, os, socket, sys\n"
}

// PythonCommand is the command line that runs the Python server under
// python-sb with the rule file rules.
func PythonCommand(ctx context.Context, pythonSB, rules string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, pythonSB, "--pysandboxes-config", rules, "-c", pythonServerSource)
	cmd.Env = minimalEnv
	return cmd
}

// Connect starts cmd and connects the SDK's client to it over stdio; the
// server's standard error goes to stderr.
func Connect(ctx context.Context, cmd *exec.Cmd, stderr io.Writer) (*sdk.ClientSession, error) {
	cmd.Stderr = stderr
	client := sdk.NewClient(&sdk.Implementation{Name: "mcpconfine", Version: "v0.1.0"}, nil)
	return client.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
}

// Text calls a tool and returns its text, and whether it is a tool error.
func Text(ctx context.Context, cs *sdk.ClientSession, tool string, args map[string]any) (string, bool, error) {
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", false, err
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n"), res.IsError, nil
}

func main() {
	dir := flag.String("dir", "", "the directory the servers may read (default: a temporary one with a file)")
	prefix := flag.String("node-prefix", DefaultNodePrefix, "the npm prefix the filesystem server is installed under")
	pysb := flag.String("pysandboxes", "pysandboxes", "the pysandboxes command")
	pythonSB := flag.String("python-sb", "python-sb", "the python-sb command")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *dir, *prefix, *pysb, *pythonSB); err != nil {
		fmt.Fprintln(os.Stderr, "mcpconfine:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer, dir, prefix, pysb, pythonSB string) error {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "mcpconfine-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
		if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("readable by the servers\n"), 0o644); err != nil {
			return err
		}
	}
	outside := "/etc/hostname"

	fmt.Fprintln(w, "== the filesystem server under pysandboxes run (its arguments allow /)")
	node, err := exec.LookPath("node")
	if err != nil {
		return errors.New("node is not installed (apt-get install nodejs npm)")
	}
	if _, err := os.Stat(filepath.Join(prefix, FilesystemServerJS)); err != nil {
		return fmt.Errorf("the filesystem server is not installed under %s (npm install --prefix %s @modelcontextprotocol/server-filesystem)", prefix, prefix)
	}
	cs, err := Connect(ctx, FilesystemCommand(ctx, pysb, node, prefix, dir), io.Discard)
	if err != nil {
		return err
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"list_allowed_directories", map[string]any{}},
		{"list_directory", map[string]any{"path": dir}},
		{"read_text_file", map[string]any{"path": outside}},
	} {
		text, isErr, err := Text(ctx, cs, c.tool, c.args)
		if err != nil {
			cs.Close()
			return err
		}
		fmt.Fprintf(w, "%s %v -> error %v: %s\n", c.tool, c.args, isErr, text)
	}
	cs.Close()

	fmt.Fprintln(w, "== the Python server under python-sb")
	rules, err := writeRules(PythonRules(dir))
	if err != nil {
		return err
	}
	defer os.Remove(rules)
	cs, err = Connect(ctx, PythonCommand(ctx, pythonSB, rules), io.Discard)
	if err != nil {
		return err
	}
	defer cs.Close()
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"list_dir", map[string]any{"path": dir}},
		{"read_file", map[string]any{"path": outside}},
		{"connect", map[string]any{"host": "127.0.0.1", "port": 22}},
	} {
		text, isErr, err := Text(ctx, cs, c.tool, c.args)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s %v -> error %v: %s\n", c.tool, c.args, isErr, text)
	}
	return nil
}

// writeRules writes a rule file of its own, outside what the sandbox exposes.
func writeRules(text string) (string, error) {
	f, err := os.CreateTemp("", "mcpconfine-rules-")
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}
