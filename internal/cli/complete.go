package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/suggest"
	"github.com/pysandboxes/pysandboxes/policy"
)

// completeCommand is the hidden command the completion scripts call:
//
//	pysandboxes __complete WORD ... CURRENT
//
// with the words after "pysandboxes" up to the one being completed (possibly
// empty). It prints one candidate per line, "VALUE" or "VALUE<TAB>DESCRIPTION",
// then a last line that tells the shell what else to do: ":" (nothing), ":files",
// ":dirs" or ":commands", followed by a tab and the part of CURRENT that stays
// before a file name ("--config=") when there is one. Candidates are whole
// words, the part before the value included.
const completeCommand = "__complete"

func completionCommand() *command {
	return &command{
		name:     "completion",
		synopsis: "bash|zsh|fish",
		summary:  "print the shell completion script for bash, zsh or fish",
		about: `Prints a script that completes the commands, options, rule names and their values
in bash, zsh or fish. To use it in the current shell, or in every new one:

  bash:  source <(pysandboxes completion bash)
         pysandboxes completion bash > /etc/bash_completion.d/pysandboxes
  zsh:   source <(pysandboxes completion zsh)      (after compinit)
         pysandboxes completion zsh > "${fpath[1]}/_pysandboxes"
  fish:  pysandboxes completion fish | source
         pysandboxes completion fish > ~/.config/fish/completions/pysandboxes.fish

The scripts ask pysandboxes itself what to offer, so they follow its version.
`,
		operands: valueShell,
		exits:    []exitCode{{"0", "the script was printed"}, {"2", "a bad command line (no shell, or one not supported)"}},
	}
}

func completion(args []string, env *Env) int {
	c := completionCommand()
	p, code, ok := c.begin(args, env)
	if !ok {
		return code
	}
	switch {
	case len(p.operands) != 1:
		return usageFailure(env, c, usagef("name one shell: bash, zsh or fish"))
	}
	switch p.operands[0] {
	case "bash":
		io.WriteString(env.Stdout, bashCompletion)
	case "zsh":
		io.WriteString(env.Stdout, zshCompletion)
	case "fish":
		io.WriteString(env.Stdout, fishCompletion)
	default:
		msg := fmt.Sprintf("unknown shell %q", p.operands[0])
		if s, ok := suggest.Closest(p.operands[0], []string{"bash", "zsh", "fish"}); ok {
			msg += "; did you mean " + s + "?"
		} else {
			msg += " (bash, zsh or fish)"
		}
		return usageFailure(env, c, usagef("%s", msg))
	}
	return ExitOK
}

// candidate is one completion: the word and what it means.
type candidate struct {
	value, help string
}

// completion is the answer to __complete.
type completionResult struct {
	cands     []candidate
	directive string // "", "files", "dirs", "commands"
	prefix    string // for files and dirs: the part of the word before the name
}

func complete(args []string, env *Env) int {
	if len(args) == 0 {
		args = []string{""}
	}
	r := completeWords(args[:len(args)-1], args[len(args)-1])
	for _, c := range r.cands {
		if c.help != "" {
			fmt.Fprintf(env.Stdout, "%s\t%s\n", c.value, c.help)
		} else {
			fmt.Fprintln(env.Stdout, c.value)
		}
	}
	fmt.Fprintf(env.Stdout, ":%s\t%s\n", r.directive, r.prefix)
	return ExitOK
}

// completeWords completes cur, the word after words.
func completeWords(words []string, cur string) completionResult {
	cmds := commands()
	if len(words) == 0 {
		var r completionResult
		if strings.HasPrefix(cur, "-") {
			r.cands = []candidate{{"--version", "print the version"}, {"--help", "show the help"}}
		} else {
			for _, c := range cmds {
				r.cands = append(r.cands, candidate{c.name, c.summary})
			}
			r.cands = append(r.cands, candidate{"help", "show the help of a command"})
		}
		return filtered(r, cur)
	}
	var c *command
	for _, k := range cmds {
		if k.name == words[0] {
			c = k
		}
	}
	if c == nil {
		if words[0] == "help" && len(words) == 1 {
			var r completionResult
			for _, k := range cmds {
				r.cands = append(r.cands, candidate{k.name, k.summary})
			}
			return filtered(r, cur)
		}
		return completionResult{}
	}
	// Walk the words already there: options (and the values they take), then
	// operands.
	var pending *option
	inOperands, operands := false, 0
	for _, w := range words[1:] {
		switch {
		case pending != nil:
			pending = nil
		case inOperands:
			operands++
		case w == "--":
			inOperands = true
		case w == "-" || !strings.HasPrefix(w, "-"):
			inOperands = true
			operands++
		default:
			name, _, hasValue := strings.Cut(strings.TrimPrefix(w, "--"), "=")
			o := c.lookup(name, "")
			if !strings.HasPrefix(w, "--") {
				o = c.lookup("", w)
			}
			if o != nil && o.arg != "" && !o.optional && !hasValue {
				pending = o
			}
		}
	}
	switch {
	case pending != nil:
		return values(pending.complete, cur, "")
	case !inOperands && strings.HasPrefix(cur, "--") && strings.Contains(cur, "="):
		name, _, _ := strings.Cut(cur[2:], "=")
		prefix := "--" + name + "="
		if o := c.lookup(name, ""); o != nil {
			return values(o.complete, cur[len(prefix):], prefix)
		}
		if k, ok := findRuleKey(name); ok && c.rules {
			return values(k.complete, cur[len(prefix):], prefix)
		}
		return completionResult{}
	case !inOperands && strings.HasPrefix(cur, "-"):
		var r completionResult
		for _, o := range c.options {
			r.cands = append(r.cands, candidate{"--" + o.name, o.help})
			if o.short != "" && cur == "-" {
				r.cands = append(r.cands, candidate{o.short, o.help})
			}
		}
		r.cands = append(r.cands, candidate{"--help", "show the help"})
		if c.rules {
			for _, k := range ruleKeys {
				if !k.hidden && !k.fileOnly && c.lookup(k.name, "") == nil {
					r.cands = append(r.cands, candidate{"--" + k.name + "=", "rule: " + k.help})
				}
			}
		}
		return filtered(r, cur)
	}
	kind := c.operands
	if operands == 0 && c.firstOperand != valueNone {
		kind = c.firstOperand
	}
	if c.name == "completion" && operands > 0 || c.name == "check" && operands > 0 {
		return completionResult{}
	}
	if c.name == "probe" && kind == valueProvider {
		var r completionResult
		for _, p := range pysandboxes.Providers() {
			r.cands = append(r.cands, candidate{p.Name(), ""})
		}
		return filtered(r, cur)
	}
	return values(kind, cur, "")
}

// values completes the value cur of a kind; prefix is the part of the word
// before it ("--os-sandbox=").
func values(kind valueKind, cur, prefix string) completionResult {
	var r completionResult
	add := func(vals ...string) {
		for _, v := range vals {
			r.cands = append(r.cands, candidate{prefix + v, ""})
		}
	}
	switch kind {
	case valueFile:
		return completionResult{directive: "files", prefix: prefix}
	case valueDir:
		return completionResult{directive: "dirs", prefix: prefix}
	case valueCommand:
		return completionResult{directive: "commands", prefix: prefix}
	case valueProvider:
		names := []string{"auto"}
		for _, p := range pysandboxes.Providers() {
			names = append(names, p.Name())
		}
		for _, n := range policy.Providers {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		add(names...)
	case valueCaps:
		done, _ := cutLast(cur, ",")
		if done != "" {
			done += ","
		} else {
			add("all")
		}
		have := strings.Split(done, ",")
		for _, c := range pysandboxes.AllCapabilities.List() {
			if !slices.Contains(have, c.String()) {
				r.cands = append(r.cands, candidate{prefix + done + c.String(), c.Describe()})
			}
		}
	case valueBool:
		add("true", "false")
	case valueShell:
		add("bash", "zsh", "fish")
	case valueResultMode:
		add("data-only", "objects")
	case valueNamespace:
		add("adaptive", "closed", "caller")
	}
	return filtered(r, prefix+cur)
}

// cutLast splits s around the last sep: ("a,b", "c") for "a,b,c"; ("", s)
// without one.
func cutLast(s, sep string) (string, string) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return "", s
	}
	return s[:i], s[i+len(sep):]
}

// filtered keeps the candidates that start with cur.
func filtered(r completionResult, cur string) completionResult {
	r.cands = slices.DeleteFunc(r.cands, func(c candidate) bool { return !strings.HasPrefix(c.value, cur) })
	return r
}
