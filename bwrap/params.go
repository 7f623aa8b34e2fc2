package bwrap

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pysandboxes/pysandboxes/internal/hostview"
	"github.com/pysandboxes/pysandboxes/internal/wrapper"
	"github.com/pysandboxes/pysandboxes/policy"
)

// option is what the provider knows of one bwrap option.
type option struct {
	// arity is the number of arguments it takes (0: a flag).
	arity int
	// refused, when set, says why a policy may not pass the option.
	refused string
	// prefix options (--perms, --size) modify the next option, which must be one of
	// these.
	prefixOf []string
	// check validates the arguments.
	check func(args []string) error
}

// Why a policy may not pass an option, for the reasons of this tool alone (the
// shared ones are package wrapper's: WhyNet, WhyEnv, WhyCaps, WhyOwn).
const (
	whyFiles   = "it shows host paths: use expose-ro= or expose-rw="
	whyFD      = "it takes a descriptor, which a rule file cannot give"
	whyHostMod = "it changes the mode of a host file through a bind mount"
)

// options are bwrap's options (0.8 and later), with what a policy may do with
// them. An option missing here is refused as unknown; an option listed but
// missing from the installed bwrap's --help is refused as unknown to that bwrap.
var options = map[string]option{
	// Safe: they add private content or restrict further.
	"hostname":               {arity: 1},
	"tmpfs":                  {arity: 1, check: sandboxPath},
	"dir":                    {arity: 1, check: sandboxPath},
	"symlink":                {arity: 2, check: func(a []string) error { return sandboxPath(a[1:]) }},
	"remount-ro":             {arity: 1, check: sandboxPath},
	"mqueue":                 {arity: 1, check: sandboxPath},
	"chdir":                  {arity: 1, check: absPath},
	"new-session":            {},
	"as-pid-1":               {},
	"disable-userns":         {},
	"assert-userns-disabled": {},
	"uid":                    {arity: 1, check: number},
	"gid":                    {arity: 1, check: number},
	"perms":                  {arity: 1, check: octal, prefixOf: []string{"tmpfs", "dir"}},
	"size":                   {arity: 1, check: number, prefixOf: []string{"tmpfs"}},
	"cap-drop":               {arity: 1},
	// Already set by the provider: harmless when repeated.
	"die-with-parent":    {},
	"unshare-all":        {},
	"unshare-user":       {},
	"unshare-user-try":   {},
	"unshare-ipc":        {},
	"unshare-pid":        {},
	"unshare-net":        {},
	"unshare-uts":        {},
	"unshare-cgroup":     {},
	"unshare-cgroup-try": {},
	// Refused.
	"bind":            {arity: 2, refused: whyFiles},
	"bind-try":        {arity: 2, refused: whyFiles},
	"dev-bind":        {arity: 2, refused: whyFiles},
	"dev-bind-try":    {arity: 2, refused: whyFiles},
	"ro-bind":         {arity: 2, refused: whyFiles},
	"ro-bind-try":     {arity: 2, refused: whyFiles},
	"bind-fd":         {arity: 2, refused: whyFD},
	"ro-bind-fd":      {arity: 2, refused: whyFD},
	"overlay-src":     {arity: 1, refused: whyFiles},
	"overlay":         {arity: 3, refused: whyFiles},
	"tmp-overlay":     {arity: 1, refused: whyFiles},
	"ro-overlay":      {arity: 1, refused: whyFiles},
	"proc":            {arity: 1, refused: wrapper.WhyOwn},
	"dev":             {arity: 1, refused: wrapper.WhyOwn},
	"clearenv":        {refused: wrapper.WhyEnv},
	"setenv":          {arity: 2, refused: wrapper.WhyEnv},
	"unsetenv":        {arity: 1, refused: wrapper.WhyEnv},
	"share-net":       {refused: wrapper.WhyNet},
	"cap-add":         {arity: 1, refused: wrapper.WhyCaps},
	"chmod":           {arity: 2, refused: whyHostMod},
	"args":            {arity: 1, refused: whyFD},
	"seccomp":         {arity: 1, refused: whyFD},
	"add-seccomp-fd":  {arity: 1, refused: whyFD},
	"info-fd":         {arity: 1, refused: whyFD},
	"json-status-fd":  {arity: 1, refused: whyFD},
	"block-fd":        {arity: 1, refused: whyFD},
	"userns-block-fd": {arity: 1, refused: whyFD},
	"sync-fd":         {arity: 1, refused: whyFD},
	"userns":          {arity: 1, refused: whyFD},
	"userns2":         {arity: 1, refused: whyFD},
	"pidns":           {arity: 1, refused: whyFD},
	"file":            {arity: 2, refused: whyFD},
	"bind-data":       {arity: 2, refused: whyFD},
	"ro-bind-data":    {arity: 2, refused: whyFD},
	"lock-file":       {arity: 1, refused: "it takes a lock on a host path"},
	"exec-label":      {arity: 1, refused: wrapper.WhyOwn},
	"file-label":      {arity: 1, refused: wrapper.WhyOwn},
	"argv0":           {arity: 1, refused: wrapper.WhyOwn},
	"level-prefix":    {refused: wrapper.WhyOwn},
	"help":            {refused: "not an option for a sandbox"},
	"version":         {refused: "not an option for a sandbox"},
}

func sandboxPath(a []string) error {
	p := a[0]
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return fmt.Errorf("%q is not a clean absolute path", p)
	}
	if p == "/" {
		return fmt.Errorf("%q is the sandbox's root", p)
	}
	for _, own := range []string{"/proc", "/dev"} {
		if hostview.Within(p, own) {
			return fmt.Errorf("%s belongs to the sandbox's own %s", p, own)
		}
	}
	return nil
}

func absPath(a []string) error {
	if !filepath.IsAbs(a[0]) {
		return fmt.Errorf("%q is not an absolute path", a[0])
	}
	return nil
}

func number(a []string) error {
	if _, err := strconv.ParseUint(a[0], 10, 32); err != nil {
		return fmt.Errorf("%q is not a number", a[0])
	}
	return nil
}

func octal(a []string) error {
	if _, err := strconv.ParseUint(a[0], 8, 12); err != nil {
		return fmt.Errorf("%q is not an octal mode", a[0])
	}
	return nil
}

// Refusal says why a policy may not pass the option ("" when it may).
func (o option) Refusal() string { return o.refused }

// paramArgs validates the bwrap.<opt>= lines and returns them as bwrap
// arguments, in order, with the option of each line. known lists the options of
// the installed bwrap (nil: do not check). Every problem is an error naming the
// line.
func paramArgs(params []policy.Param, known map[string]bool) ([]string, []string, []error) {
	var args []string
	var names []string // the option of each parameter, for the prefix check
	errs := wrapper.CheckParams(Name, params, options, known, func(i int, prm policy.Param, opt option, value string) error {
		name := prm.Name
		var vals []string
		switch opt.arity {
		case 0:
			if err := wrapper.Flag(Name, name, value); err != nil {
				return err
			}
		case 1:
			if value == "" {
				return fmt.Errorf("bwrap option --%s needs a value", name)
			}
			vals = []string{value}
		default:
			vals = strings.Fields(value)
			if len(vals) != opt.arity {
				return fmt.Errorf("bwrap option --%s takes %d values separated by spaces, got %d", name, opt.arity, len(vals))
			}
		}
		for _, v := range vals {
			if strings.ContainsRune(v, 0) {
				return fmt.Errorf("bwrap option --%s: the value holds a NUL byte", name)
			}
		}
		if opt.check != nil {
			if err := opt.check(vals); err != nil {
				return fmt.Errorf("bwrap option --%s: %v", name, err)
			}
		}
		if len(opt.prefixOf) > 0 {
			next := ""
			if i+1 < len(params) {
				next = params[i+1].Name
			}
			if !slices.Contains(opt.prefixOf, next) {
				return fmt.Errorf("bwrap option --%s applies to the next option, which must be one of --%s (got %q)", name, strings.Join(opt.prefixOf, ", --"), next)
			}
		}
		args = append(args, "--"+name)
		args = append(args, vals...)
		names = append(names, name)
		return nil
	})
	return args, names, errs
}
