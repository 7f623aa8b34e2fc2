package policy

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fuzzSeeds are whole rule files: the example files of the reference (§1.12) and
// tricky lines. testdata/fuzz/FuzzParse holds them too, as the committed corpus.
var fuzzSeeds = []string{
	// Allow-all.
	"env=*=${*}\nexpose-rw=/\nnet=ALLOW|*|*|*|*\npython-import=*\npython-api=ALLOW:*\n",
	"set-env=*=${*}\nbind=/,/\neval-namespace=caller\nremote-result-mode=objects\nremote-result-guard=false\n",
	// Minimal test profile.
	"python-import=*",
	// Integration test profile.
	`include "./.local.py-sandboxes"
py-sandbox=true
os-sandbox=${OS_SANDBOX:-subprocess}
bwrap.share-net=yes
env=TERM=${TERM}
env=My_ENV=${My_ENV}
python-import=*
expose-rw=./tmp
expose-ro=.
expose-ro=/etc
expose-ro=/usr/local/lib
net=ALLOW|TCP|0.0.0.0/32|50983|IN
net=ALLOW|TCP|ip6-localhost|9999,0|IN
net=ALLOW|TCP|localhost|9999|IN
net=ALLOW|TCP|www.google.com|80|OUT
net=ALLOW|UDP|ip6-localhost|12345|OUT
net=ALLOW|UDP|localhost|12345|IN
net=ALLOW|UDP|localhost|12346,12345|OUT
net=ALLOW|*|*|53|*
ignore=.env
qemu.use_kvm=${QEMU_USE_KVM:-true}
qemu.virtfs=${QEMU_VIRTFS:-auto}
qemu.show_boot_console=${QEMU_SHOW_BOOT_CONSOLE:-false}
`,
	// Quick demo.
	"env=DEMO_API_KEY=${DEMO_API_KEY}\nexpose-ro=./app\nexpose-ro=./data\nnet=ALLOW|TCP|example.com|443|OUT\n",
	// Agent skill manifest.
	"py-sandbox=true\nos-sandbox=bwrap\nlearn=false\nexpose-ro=~/.claude/skills/my-skill/scripts\npython-import=codecs, csv, encodings, json\n",
	// MCP server.
	"net=ALLOW|TCP|0.0.0.0/32|8000|IN  # The MCP endpoint\nnet=ALLOW|TCP|api.example.com|443|OUT\nexpose-ro=./data\n",
	// User/global restriction profile.
	"net=DENY|*|10.0.0.0/8|*|OUT\nnet=DENY|*|172.16.0.0/12|*|OUT\nnet=DENY|*|192.168.0.0/16|*|OUT\n",
	// Calculator eval profile.
	"eval-namespace=closed\neval-syntax=arith, compare\neval-max-iterations=100_000\neval-timeout=2s\n",
	// Learned partial-mode profile (abridged).
	`ignore=.env
# <learning_guard_envs>
# Add rules (2026/10/07 at 16:48)
env=HOME=${HOME}
env=PWD=${PWD}
# </learning_guard_envs>
# <learning_guard_files>
expose-ro=../..
# </learning_guard_files>
# <learning_guard_socket>
net=ALLOW|TCP|ip6-localhost|0|IN
net=ALLOW|TCP|www.google.com|443|OUT
# </learning_guard_socket>
# <learning_guard_import>
# ⚠ Dangerous!
python-import=atexit, importlib, inspect, subprocess
python-import=__future__, _codecs_cn, abc, argparse
# </learning_guard_import>
`,
	// Legacy syntax.
	"--set-env=HOME=/\n--set-env=*_API_KEY=${*_API_KEY}\n--unset-env=OPENAI_API_KEY\n--ignore=.*\n--ro-bind=${PWD},/\n--net=ALLOW|any|0.0.0.0/0|80,443|OUT\n--python-api=ALLOW:threads\n",
	// Tricky lines.
	"\xef\xbb\xbfenv=A=B=C  # comment\n\n   \n{{ placeholder }}\nenv=Q='a # not a comment' # a comment\nenv=R=\"x \\\" # still quoted\" # gone\n",
	"expose-rw=${TMPDIR:-${TEMP:-${TMP:-/tmp}}}\nenv=X=${A:=legacy}\nenv=Y=${}\n",
	"env=A=${A:B}\nenv=B=${A\nignore=${${${${${${${${${${${${${${${${${${${${${${${${${${${${${${${${${${${${${${X}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}\n",
	"learn=false\nlearn=\nlearn=true\nport=8080\nport=x\nos-sandbox=nope\npy-sandbox=maybe\n",
	"include \"self\"\ninclude \"~/x\"\ninclude \"/nonexistent/x\"\ninclude \"${HOME}/y\"\ninclude \"\"x\"\"\n",
	"unenv=*\nenv=*_KEY=literal\nenv=SECRET_KEY=${SECRET_KEY}\nunenv=SECRET_*\n",
	"expose-ro=a,b\nexpose-ro=\nexpose-ro=/etc/hostname\nexpose-ro=/etc\nexpose-rw=/etc\nbind=/tmp,/var\nro-bind=/tmp\n",
	"eval-syntax:llm=arith\neval-call:llm=len\neval-timeout:llm=1s\npython-api=DENY:process-exec\npython-api=ALLOW:os.system, threads\n",
	"bwrap.share-net=yes\nnobody.key=1\nauto.x=1\n.x=1\nx.=1\n",
	"key\n=value\n KEY=v\nenv\nenv=NOEQUAL\n\xff\xfe\n",
	"ignore=it's\nignore=#x\nignore=\"#x\"\nignore=[\n",
}

// fuzzEnv is the environment of the fuzzed loads: a temporary current and home
// directory with a few subdirectories, a hosts file and no network.
func fuzzOptions(tb testing.TB) *Options {
	dir, err := filepath.EvalSymlinks(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	for _, d := range []string{"data", "tmp", "app", "sub/deeper"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	files := map[string]string{
		"hosts":   "192.0.2.1 example.com api.example.com www.google.com\n2001:db8::1 v6.test\n",
		"common":  "env=COMMON=1\ninclude \"common\"\n",
		"sub/inc": "python-import=json\ninclude \"../common\"\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return &Options{
		Dir:       dir,
		Home:      dir,
		Env:       []string{"HOME=" + dir, "TERM=xterm", "A=a", "X=${A}", "SECRET_KEY=s", "OS_SANDBOX=none", "PORT=8000", "EMPTY="},
		HostsFile: filepath.Join(dir, "hosts"),
		Resolver:  offlineResolver(),
		Logger:    slog.New(slog.DiscardHandler),
	}
}

// FuzzParse parses whole rule files: no panic, no hang (every parse runs under a short
// deadline and must return soon after it), errors are ConfigErrors naming a line of
// the file, and an accepted policy prints as a file that parses again into an
// equivalent policy.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	opts := fuzzOptions(f)
	name := filepath.Join(opts.Dir, DefaultName)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 256<<10 {
			t.Skip("larger than 256 KiB")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		p, err := Parse(ctx, name, data, opts)
		if el := time.Since(start); el > 4*time.Second {
			t.Fatalf("Parse took %v", el)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var ce ConfigErrors
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T) is not ConfigErrors", err, err)
			}
			for _, c := range ce {
				if c.Ref.Line < 1 || c.Ref.File == "" || c.Msg == "" {
					t.Fatalf("error without a place or a message: %#v", c)
				}
			}
			return
		}
		for _, r := range p.Rules() {
			if r.Ref.Line < 1 || strings.ContainsAny(r.Raw, "\n") {
				t.Fatalf("rule %#v", r)
			}
		}
		text := p.String()
		q, err := Parse(ctx, filepath.Join(opts.Dir, "printed"), []byte(text), opts)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			t.Fatalf("the printed policy does not parse: %v\n--- printed:\n%s", err, text)
		}
		if diff := cmp.Diff(digest(p), digest(q)); diff != "" {
			t.Fatalf("the printed policy differs (-original +printed):\n%s\n--- printed:\n%s", diff, text)
		}
	})
}

// FuzzSubstitute expands arbitrary text against an environment whose values are the
// fuzzed text too: no panic, no hang, text without "${" is unchanged, and a value
// taken from the environment is never expanded again.
func FuzzSubstitute(f *testing.F) {
	for _, s := range []string{
		"${A}", "${A:-d}", "${TMPDIR:-${TEMP:-${TMP:-/tmp}}}", "${A:=x}", "${${N}}", "${A:B}", "${}", "${A",
		"$${A}}", "${V}${V}", "${UNSET:-${V}}",
	} {
		f.Add(s, "${A}")
	}
	f.Fuzz(func(t *testing.T, s, v string) {
		lookup := func(name string) (string, bool) {
			switch name {
			case "A":
				return "a", true
			case "N":
				return "A", true
			case "V":
				return v, true
			}
			return "", false
		}
		got, err := substitute(s, lookup)
		if !strings.Contains(s, "${") && (err != nil || got != s) {
			t.Fatalf("substitute(%q) = %q, %v; want it unchanged", s, got, err)
		}
		if err == nil && len(got) > maxSubstLen {
			t.Fatalf("substitute(%q): %d bytes", s, len(got))
		}
		if got, err := substitute("${V}", lookup); err != nil || got != v {
			t.Fatalf("substitute(${V}) with V=%q = %q, %v", v, got, err)
		}
		if got, err := substitute("<${UNSET:-${V}}>", lookup); err != nil || got != "<"+v+">" {
			t.Fatalf("substitute(<${UNSET:-${V}}>) with V=%q = %q, %v", v, got, err)
		}
	})
}
