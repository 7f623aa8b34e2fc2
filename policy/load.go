package policy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/suggest"
)

// DefaultName is the file name of a rule file.
const DefaultName = ".py-sandboxes"

// Providers lists the os-sandbox= values the language knows.
var Providers = []string{"auto", "none", "subprocess", "landlock", "bwrap", "firejail", "unshare", "qemu"}

// Options tune how a policy is loaded. The zero value loads with the process's
// environment, working directory and home directory.
type Options struct {
	// Rules are rule lines ("key=value") given by code or on the command line. They
	// are read before the files, and a value they give to a single-valued key wins
	// over the files. Their provenance is "<arg>".
	Rules []string
	// Learn reports that the caller asks for learning mode (for example python-sb
	// --learn); a locked policy (learn=false) refuses it.
	Learn bool
	// Env is the host environment used for ${VAR} substitution and env= rules, as
	// "KEY=value" strings. Nil means os.Environ().
	Env []string
	// Dir is the current directory for relative paths. "" means os.Getwd().
	Dir string
	// Home is the home directory for "~". "" means os.UserHomeDir().
	Home string
	// HostsFile is read before the resolver to resolve host names in net= rules.
	// "" means /etc/hosts.
	HostsFile string
	// Resolver resolves host names that the hosts file does not list. Nil means
	// net.DefaultResolver.
	Resolver *net.Resolver
	// Providers are extra os-sandbox= names to accept besides the built-in ones.
	Providers []string
	// Logger receives warnings and debug messages. Nil means slog.Default().
	Logger *slog.Logger

	// wait replaces the waits between DNS retries (tests).
	wait func(context.Context, time.Duration) error
	// noResolve leaves the host names of net= rules unresolved (their rules
	// then match no address): for a policy loaded only to read its file
	// rules (DiscoverChecked).
	noResolve bool
}

// Load reads the rule file at path (with its includes) together with opts.Rules and
// returns the validated policy. A missing file is reported with an error wrapping
// ErrMissing and fs.ErrNotExist; configuration problems are reported all together as
// ConfigErrors.
func Load(ctx context.Context, path string, opts *Options) (*Policy, error) {
	ld, err := newLoader(opts)
	if err != nil {
		return nil, err
	}
	abs := path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(ld.dir, abs)
	}
	abs = filepath.Clean(abs)
	data, err := readRuleFile(abs, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &MissingError{Path: abs, Name: ld.show(abs)}
	}
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return ld.load(ctx, abs, data)
}

// Parse reads a policy from data, as if it were the rule file at name (used for
// provenance and to resolve includes and learn= next to it; "" means code-given
// rules only).
func Parse(ctx context.Context, name string, data []byte, opts *Options) (*Policy, error) {
	ld, err := newLoader(opts)
	if err != nil {
		return nil, err
	}
	if name != "" && !filepath.IsAbs(name) {
		name = filepath.Join(ld.dir, name)
	}
	return ld.load(ctx, name, data)
}

// MissingError reports a rule file that does not exist.
type MissingError struct {
	Path string // absolute path
	Name string // path as shown to people
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("rule file '%s' not found", e.Name)
}

// Is makes errors.Is(err, ErrMissing) and errors.Is(err, fs.ErrNotExist) true.
func (e *MissingError) Is(target error) bool {
	return target == ErrMissing || target == fs.ErrNotExist
}

// loader holds the state of one Load.
type loader struct {
	opts      Options
	dir, home string
	env       map[string]string
	envList   []string
	log       *slog.Logger
	errs      collector
	p         *Policy
	ctx       context.Context

	// dirCache maps an expose-* path (absolute, before symlink resolution) to the
	// directory it resolved to; exposeIdx maps a resolved directory to its index in
	// p.exposes.
	dirCache  map[string]string
	exposeIdx map[string]int
	// argKeys are the keys of the rules given by code or on the command line, in
	// order, whether the rules were kept or not (learn=false refuses them all).
	argKeys    []string
	argKeySeen map[string]bool
	// overridden maps a control key set by <arg> to the first file rule it overrode.
	overridden map[string]Ref

	// Per-family loading state, owned by each family's file.
	netState    netLoad
	importState importLoad
	apiState    apiLoad
	evalState   evalLoad
}

func newLoader(opts *Options) (*loader, error) {
	ld := &loader{}
	if opts != nil {
		ld.opts = *opts
	}
	ld.dir = ld.opts.Dir
	if ld.dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("policy: current directory: %w", err)
		}
		ld.dir = wd
	}
	if !filepath.IsAbs(ld.dir) {
		abs, err := filepath.Abs(ld.dir)
		if err != nil {
			return nil, fmt.Errorf("policy: current directory: %w", err)
		}
		ld.dir = abs
	}
	ld.home = ld.opts.Home
	if ld.home == "" {
		ld.home, _ = os.UserHomeDir()
	}
	ld.envList = ld.opts.Env
	if ld.envList == nil {
		ld.envList = os.Environ()
	}
	ld.env = make(map[string]string, len(ld.envList))
	for _, kv := range ld.envList {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k != "" {
			if _, dup := ld.env[k]; !dup {
				ld.env[k] = v
			}
		}
	}
	ld.log = ld.opts.Logger
	if ld.log == nil {
		ld.log = slog.Default()
	}
	return ld, nil
}

func (ld *loader) lookup(name string) (string, bool) {
	v, ok := ld.env[name]
	return v, ok
}

func (ld *loader) debug(msg string, args ...any) { ld.log.Debug(msg, args...) }

func (ld *loader) warn(ref Ref, format string, args ...any) {
	w := Warning{Ref: ref, Msg: fmt.Sprintf(format, args...)}
	ld.p.warnings = append(ld.p.warnings, w)
	ld.log.Warn(w.Msg, "rule", ref.String())
}

// load runs the whole pipeline on the main file's content.
func (ld *loader) load(ctx context.Context, path string, data []byte) (*Policy, error) {
	ld.ctx = ctx
	ld.p = &Policy{
		Path:     path,
		control:  map[string]*Rule{},
		provider: map[string][]Param{},
	}
	var lines []line
	for _, r := range ld.opts.Rules {
		// One entry is one rule: a line break would let a value inject other rules.
		if strings.ContainsAny(r, "\r\n") {
			ld.errs.add(argRef, "Invalid rule %s: a rule value cannot hold a line break", strconv.Quote(r))
			continue
		}
		if text := strings.TrimSpace(r); text != "" {
			lines = append(lines, line{ref: argRef, text: text})
		}
	}
	if path != "" {
		visited := map[string]bool{}
		key := path
		if real, err := filepath.EvalSymlinks(path); err == nil {
			key = real
		}
		visited[key] = true
		if file := ld.expandFile(path, data, visited, 0); len(lines) == 0 {
			lines = file
		} else {
			lines = append(lines, file...)
		}
	} else if len(data) > 0 {
		lines = append(lines, ld.splitLines(data, argRef)...)
	}
	ld.p.rules = make([]Rule, 0, len(lines))
	for _, l := range lines {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ld.rule(l)
	}
	ld.finish()
	if err := ld.errs.result(); err != nil {
		return nil, err
	}
	return ld.p, nil
}

// rule validates and records one line.
func (ld *loader) rule(l line) {
	if includeRE.MatchString(l.text) {
		// Only reachable for rules given by code: files splice their includes.
		ld.errs.add(l.ref, "Invalid rule '%s': include is only allowed in a rule file", l.text)
		return
	}
	key, value, ok := strings.Cut(l.text, "=")
	switch {
	case !ok && (l.text == "include" || strings.HasPrefix(l.text, "include ")):
		ld.errs.add(l.ref, "Invalid rule '%s': include takes one path in double quotes: include \"path\"", l.text)
		return
	case !ok:
		ld.errs.add(l.ref, "Invalid rule '%s': expected KEY=VALUE", l.text)
		return
	case strings.HasPrefix(key, "\ufeff"):
		ld.errs.add(l.ref, "Invalid rule '%s': the line starts with a byte order mark (U+FEFF), allowed at the start of a file only", l.text)
		return
	case key == "":
		ld.errs.add(l.ref, "Invalid rule '%s': expected KEY=VALUE (the key is empty)", l.text)
		return
	case strings.TrimSpace(key) != key:
		ld.errs.add(l.ref, "Invalid rule '%s': expected KEY=VALUE with no space around the key: '%s=%s'",
			l.text, strings.TrimSpace(key), strings.TrimLeft(value, " \t"))
		return
	}
	if l.ref.IsArg() && !ld.argKeySeen[key] {
		if ld.argKeySeen == nil {
			ld.argKeySeen = map[string]bool{}
		}
		ld.argKeySeen[key] = true
		ld.argKeys = append(ld.argKeys, key)
	}
	r := Rule{Ref: l.ref, Key: key, Value: value, Raw: l.text}
	switch key {
	case "env", "set-env":
		ld.envRule(r, false)
		return
	case "unenv", "unset-env":
		ld.envRule(r, true)
		return
	}
	v, err := substitute(value, ld.lookup)
	if err != nil {
		ld.errs.add(l.ref, "%v", err)
		return
	}
	r.Value = v
	switch {
	case key == "expose-ro" || key == "expose-rw":
		ld.exposeRule(r)
	case key == "bind" || key == "ro-bind":
		ld.legacyBindRule(r)
	case key == "ignore":
		ld.ignoreRule(r)
	case key == "net":
		ld.netRule(r)
	case key == "python-import":
		ld.importRule(r)
	case key == "python-api":
		ld.apiRule(r)
	case strings.HasPrefix(key, "eval-"):
		ld.evalRule(r)
	case slices.Contains(controlKeys, key):
		ld.controlRule(r)
	case strings.Contains(key, "."):
		ld.providerRule(r)
	default:
		ld.errs.add(l.ref, "Invalid rule '%s': %s", l.text, unknownKey(key))
	}
}

// Keys returns every key of the rule language, in the order the documentation
// lists them: env, unenv, expose-ro, expose-rw, ignore, net, python-import,
// python-api, the eval-* keys (eval-KEY:PROFILE names a profile), then the
// single-valued keys (py-sandbox, os-sandbox, learn, remote-result-mode,
// remote-result-guard). A provider parameter (PROVIDER.PARAM) is not a key of
// its own. LegacyKeys lists the spellings Load still accepts.
func Keys() []string { return slices.Clone(ruleKeys) }

// ruleKeys is what Keys returns.
var ruleKeys = func() []string {
	out := []string{"env", "unenv", "expose-ro", "expose-rw", "ignore", "net", "python-import", "python-api"}
	out = append(out, evalListKeys...)
	out = append(out, evalScalarKeyNames()...)
	for _, k := range controlKeys {
		if !slices.Contains(legacyKeys, k) {
			out = append(out, k)
		}
	}
	return out
}()

// legacyKeys are accepted but no longer written: former spellings, and a key
// without effect.
var legacyKeys = []string{"set-env", "unset-env", "bind", "ro-bind", "port"}

// LegacyKeys returns the keys Load accepts that are not to be written any
// more: set-env and unset-env (env= and unenv=), bind and ro-bind (expose-rw=
// and expose-ro=), and port (no effect: the host talks to the sandbox over a
// socket pair).
func LegacyKeys() []string { return slices.Clone(legacyKeys) }

// unknownKey says that key is not a rule key, suggesting the closest one when
// it looks like a typo of it.
func unknownKey(key string) string {
	if s, ok := suggest.ClosestFold(key, ruleKeys); ok {
		return fmt.Sprintf("unknown key '%s'; did you mean '%s'?", key, s)
	}
	return fmt.Sprintf("unknown key '%s'", key)
}

// record keeps an accepted rule; each family calls it once per rule it accepts.
func (ld *loader) record(r Rule) { ld.p.rules = append(ld.p.rules, r) }

// finish runs the checks that need every rule.
func (ld *loader) finish() {
	ld.finishEnv()
	ld.finishNet()
	ld.finishImports()
	ld.finishAPI()
	ld.finishEval()
	ld.finishControl()
}
