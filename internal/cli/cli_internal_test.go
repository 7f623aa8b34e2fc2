package cli

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/policy"
)

// TestRuleKeysArePolicys: the rule keys the command accepts, completes and
// suggests are policy's (policy.Keys, and the legacy ones hidden), each with
// the command's help, and a key policy does not know is refused.
func TestRuleKeysArePolicys(t *testing.T) {
	for _, k := range ruleKeys {
		if !k.hidden && k.help == "" {
			t.Errorf("the rule key %s has no help (add it to ruleHelp)", k.name)
		}
	}
	for name := range ruleHelp {
		if !slices.Contains(policy.Keys(), name) {
			t.Errorf("ruleHelp describes %s, which is not a key of policy.Keys", name)
		}
	}
	for _, name := range append(policy.Keys(), policy.LegacyKeys()...) {
		if _, ok := findRuleKey(name); !ok {
			t.Errorf("policy's key %s is not accepted", name)
		}
	}
	for _, k := range []string{"expose-r", "bogus", "eval-sytnax", "eval-bogus:prof", "python_import"} {
		if _, ok := findRuleKey(k); ok {
			t.Errorf("%s is accepted, which should be unknown", k)
		}
	}
	if _, ok := findRuleKey("eval-syntax:prof"); !ok {
		t.Error("eval-syntax:prof is refused")
	}
}

func TestWrap(t *testing.T) {
	got := wrap("handles file rights execute,write_file,read_file,read_dir,remove_dir and more words here", 30)
	want := []string{"handles file rights execute,", "write_file,read_file,read_dir,", "remove_dir and more words here"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("wrap = %q, want %q", got, want)
	}
	for _, l := range wrap(strings.Repeat("word ", 100), 40) {
		if len(l) > 40 {
			t.Errorf("line of %d", len(l))
		}
	}
}

// TestUserHandler: the forms of the lines, and each warning once.
func TestUserHandler(t *testing.T) {
	var b bytes.Buffer
	log, _ := newLogger(&b, "pysandboxes run", false)
	log.Warn("port= has no effect", "rule", "a/.py-sandboxes(3)")
	log.Warn("port= has no effect", "rule", "a/.py-sandboxes(3)")
	log.Warn("os-sandbox landlock: no TCP", "provider", "landlock")
	log.With("provider", "subprocess").Warn("accepted as not enforced", "capabilities", "files-read,hide")
	log.Error("broken", "err", "boom")
	log.Info("not shown")
	log.Debug("not shown")
	want := "a/.py-sandboxes(3): warning: port= has no effect\n" +
		"pysandboxes run: warning: os-sandbox landlock: no TCP\n" +
		"pysandboxes run: warning: accepted as not enforced (provider: subprocess; capabilities: files-read,hide)\n" +
		"pysandboxes run: error: broken (err: boom)\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	log, _ = newLogger(&b, "pysandboxes run", true)
	log.WithGroup("g").Debug("step", "n", 1)
	log.Log(context.Background(), slog.LevelInfo, "info")
	if b.String() != "pysandboxes run: debug: step (g.n: 1)\npysandboxes run: debug: info\n" {
		t.Errorf("verbose: %q", b.String())
	}
}

// TestREADMEDescribesTheCommand: the README's section "The command" names every
// command and every field of the JSON shapes of check and probe.
func TestREADMEDescribesTheCommand(t *testing.T) {
	text, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(text), "\n## The command\n")
	if !ok {
		t.Fatal("README.md has no section \"The command\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, c := range commands() {
		if !strings.Contains(section, "pysandboxes "+c.name+" ") {
			t.Errorf("README does not show pysandboxes %s", c.name)
		}
	}
	for _, v := range []any{checkReport{}, checkProblem{}, probeReport{}, probeProvider{}, probeDetail{}, probeCap{}} {
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			if !strings.Contains(section, `"`+tag+`"`) && !strings.Contains(section, "`"+tag+"`") {
				t.Errorf("README does not name the field %q of %s", tag, rt.Name())
			}
		}
	}
}
