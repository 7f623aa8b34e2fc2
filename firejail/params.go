package firejail

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pysandboxes/pysandboxes/internal/bytesize"
	"github.com/pysandboxes/pysandboxes/internal/wrapper"
	"github.com/pysandboxes/pysandboxes/policy"
	"golang.org/x/sys/unix"
)

// param is what the provider knows of one firejail.<key>= parameter.
type param struct {
	// flag: the option takes no value ("firejail.key=" or "=true").
	flag bool
	// refused, when set, says why a policy may not pass it.
	refused string
	// check validates the value and returns it as firejail takes it.
	check func(v string) (string, error)
	// rlimit is the resource of a --rlimit-* option.
	rlimit int
}

// Why a policy may not pass an option, for the reasons of this tool alone (the
// shared ones are package wrapper's: WhyNet, WhyEnv, WhyCaps, WhyOwn).
const (
	whyFiles = "it changes what the sandbox shows of the host: use expose-ro=, expose-rw= or ignore="
	whyWeak  = "it would weaken the seccomp filter"
	whyHost  = "it acts on other sandboxes or the host, not on this one"
)

// params are the firejail.<key>= parameters (firejail's option names): what a
// policy may add, and what it may not. Anything else is refused as unknown.
var params = map[string]param{
	// Allowed: restrict further, or only name the sandbox.
	"seccomp":                   {check: syscallList},
	"seccomp.keep":              {check: syscallList},
	"seccomp.32":                {check: syscallList},
	"seccomp.block-secondary":   {flag: true},
	"seccomp-error-action":      {check: errorAction},
	"memory-deny-write-execute": {flag: true},
	"rlimit-as":                 {check: size, rlimit: unix.RLIMIT_AS},
	"rlimit-fsize":              {check: size, rlimit: unix.RLIMIT_FSIZE},
	"rlimit-cpu":                {check: count, rlimit: unix.RLIMIT_CPU},
	"rlimit-nofile":             {check: count, rlimit: unix.RLIMIT_NOFILE},
	"rlimit-nproc":              {check: count, rlimit: unix.RLIMIT_NPROC},
	"rlimit-sigpending":         {check: count, rlimit: unix.RLIMIT_SIGPENDING},
	"nice":                      {check: niceness},
	"hostname":                  {check: hostname},
	"name":                      {refused: "sandbox names must be unique: concurrent programs would collide"},
	"nogroups":                  {flag: true},
	"noexec":                    {check: absolute},
	"deterministic-exit-code":   {flag: true},
	"private-tmp":               {flag: true},
	"ipc-namespace":             {flag: true},
	// Refused.
	"seccomp.drop":      {refused: whyWeak + " (it replaces the default list)"},
	"seccomp.32.drop":   {refused: whyWeak},
	"seccomp.32.keep":   {refused: whyWeak},
	"allow-debuggers":   {refused: whyWeak + " (it allows ptrace)"},
	"net":               {refused: wrapper.WhyNet},
	"netns":             {refused: wrapper.WhyNet},
	"netfilter":         {refused: wrapper.WhyNet},
	"netfilter6":        {refused: wrapper.WhyNet},
	"interface":         {refused: wrapper.WhyNet},
	"ip":                {refused: wrapper.WhyNet},
	"ip6":               {refused: wrapper.WhyNet},
	"dns":               {refused: wrapper.WhyNet},
	"hosts-file":        {refused: wrapper.WhyNet},
	"protocol":          {refused: wrapper.WhyOwn},
	"defaultgw":         {refused: wrapper.WhyNet},
	"veth-name":         {refused: wrapper.WhyNet},
	"bandwidth":         {refused: whyHost},
	"env":               {refused: wrapper.WhyEnv},
	"rmenv":             {refused: wrapper.WhyEnv},
	"caps":              {refused: wrapper.WhyCaps},
	"caps.keep":         {refused: wrapper.WhyCaps},
	"caps.drop":         {refused: wrapper.WhyOwn},
	"noroot":            {refused: "it needs a non-root user (firejail runs as root here)"},
	"whitelist":         {refused: whyFiles},
	"nowhitelist":       {refused: whyFiles},
	"blacklist":         {refused: whyFiles},
	"noblacklist":       {refused: whyFiles},
	"read-only":         {refused: whyFiles},
	"read-write":        {refused: whyFiles},
	"bind":              {refused: whyFiles},
	"tmpfs":             {refused: whyFiles},
	"mkdir":             {refused: whyFiles},
	"mkfile":            {refused: whyFiles},
	"private":           {refused: whyFiles},
	"private-bin":       {refused: whyFiles},
	"private-etc":       {refused: whyFiles},
	"private-home":      {refused: whyFiles},
	"private-opt":       {refused: whyFiles},
	"private-srv":       {refused: whyFiles},
	"private-dev":       {refused: wrapper.WhyOwn},
	"private-cwd":       {refused: wrapper.WhyOwn},
	"private-cache":     {refused: whyFiles},
	"writable-etc":      {refused: whyFiles},
	"writable-var":      {refused: whyFiles},
	"writable-var-log":  {refused: whyFiles},
	"writable-run-user": {refused: whyFiles},
	"keep-var-tmp":      {refused: whyFiles},
	"keep-dev-shm":      {refused: whyFiles},
	"keep-config-pulse": {refused: whyFiles},
	"chroot":            {refused: whyFiles},
	"overlay":           {refused: whyFiles},
	"ignore":            {refused: wrapper.WhyOwn},
	"include":           {refused: wrapper.WhyOwn},
	"profile":           {refused: wrapper.WhyOwn},
	"noprofile":         {refused: wrapper.WhyOwn},
	"keep-fd":           {refused: wrapper.WhyOwn},
	"quiet":             {refused: wrapper.WhyOwn},
	"debug":             {refused: wrapper.WhyOwn},
	"join":              {refused: whyHost},
	"join-or-start":     {refused: whyHost},
	"join-network":      {refused: whyHost},
	"join-filesystem":   {refused: whyHost},
	"shutdown":          {refused: whyHost},
	"put":               {refused: whyHost},
	"get":               {refused: whyHost},
	"ls":                {refused: whyHost},
	"cat":               {refused: whyHost},
	"x11":               {refused: whyFiles},
	"dbus-user":         {refused: whyFiles},
	"dbus-system":       {refused: whyFiles},
	"appimage":          {refused: whyFiles},
	"apparmor":          {refused: wrapper.WhyOwn},
	"trace":             {refused: whyFiles},
	"tracelog":          {refused: whyFiles},
	"output":            {refused: whyFiles},
	"output-stderr":     {refused: whyFiles},
	"timeout":           {refused: "use the context's deadline"},
	"cpu":               {refused: whyHost},
	"oom":               {refused: whyHost},
	"machine-id":        {refused: whyFiles},
	"allusers":          {refused: whyFiles},
}

func syscallList(v string) (string, error) {
	if v == "" {
		return "", fmt.Errorf("needs a comma-separated list of system calls")
	}
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			return "", fmt.Errorf("an empty system call name in %q", v)
		}
		for _, r := range s {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '@' || r == '-' || r == ':' || r == '!') {
				return "", fmt.Errorf("%q is not a system call or group name", s)
			}
		}
	}
	return strings.ReplaceAll(v, " ", ""), nil
}

// errorAction accepts kill or an errno name (log would let refused calls run).
func errorAction(v string) (string, error) {
	if v == "kill" {
		return v, nil
	}
	if len(v) > 1 && v[0] == 'E' && strings.Trim(v[1:], "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") == "" {
		return v, nil
	}
	return "", fmt.Errorf("%q is not kill or an errno name such as EPERM (log would let refused calls run)", v)
}

// size parses a byte count with an optional k, m, g or t suffix into bytes.
func size(v string) (string, error) {
	n, err := bytesize.Parse(v)
	if err != nil {
		return "", fmt.Errorf("%q is not a size (a number of bytes, with k, m, g or t)", v)
	}
	return strconv.FormatUint(n, 10), nil
}

func count(v string) (string, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 63)
	if err != nil || n == 0 {
		return "", fmt.Errorf("%q is not a positive number", v)
	}
	return strconv.FormatUint(n, 10), nil
}

func niceness(v string) (string, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 || n > 19 {
		return "", fmt.Errorf("%q is not a niceness from 0 to 19 (lowering it needs a privilege the program must not have)", v)
	}
	return strconv.Itoa(n), nil
}

func hostname(v string) (string, error) {
	if v == "" || len(v) > 63 {
		return "", fmt.Errorf("%q is not a host name", v)
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return "", fmt.Errorf("%q is not a host name", v)
		}
	}
	return v, nil
}

func absolute(v string) (string, error) {
	if !strings.HasPrefix(v, "/") || strings.ContainsAny(v, ",\n") {
		return "", fmt.Errorf("%q is not an absolute path", v)
	}
	return v, nil
}

// userParam is one validated firejail.<key>= line.
type userParam struct {
	name  string
	value string // "" for a flag
	rule  policy.Rule
	// limit is the rlimit value for --rlimit-* (0 otherwise).
	limit  uint64
	rlimit int
}

// arg renders the parameter as a firejail option.
func (u userParam) arg() string {
	if params[u.name].flag {
		return "--" + u.name
	}
	return "--" + u.name + "=" + u.value
}

// Refusal says why a policy may not pass the parameter ("" when it may).
func (p param) Refusal() string { return p.refused }

// parseParams validates the firejail.<key>= lines. known lists the options of the
// installed firejail (nil: do not check).
func parseParams(ps []policy.Param, known map[string]bool) ([]userParam, []error) {
	var out []userParam
	errs := wrapper.CheckParams(Name, ps, params, known, func(_ int, prm policy.Param, spec param, v string) error {
		name := prm.Name
		if strings.ContainsAny(v, "\x00\n") {
			return fmt.Errorf("firejail option --%s: the value holds a NUL byte or a newline", name)
		}
		u := userParam{name: name, rule: prm.Rule, rlimit: spec.rlimit}
		if spec.flag {
			if err := wrapper.Flag(Name, name, v); err != nil {
				return err
			}
		} else {
			val, err := spec.check(v)
			if err != nil {
				return fmt.Errorf("firejail option --%s: %v", name, err)
			}
			u.value = val
			if spec.rlimit != 0 {
				u.limit, _ = strconv.ParseUint(val, 10, 64)
			}
		}
		out = append(out, u)
		return nil
	})
	return out, errs
}
