package policy

import (
	"fmt"
	"strings"
	"sync"
)

// Template returns the built-in template of a new rule file: a commented
// documentation of every family of rules (what each key does, with an example
// line), the default includes (the local one commented out, the per-user and the
// per-node profiles active), os-sandbox=${OS_SANDBOX:-auto}, and the paired marker
// comments ("# <learning_guard_envs>" ... "# </learning_guard_envs>", and likewise
// learning_guard_files, learning_guard_socket, learning_guard_import,
// learning_guard_api, learning_guard_eval, learning_remote_result) inside which
// Learn writes what it observed. Every example is commented out: the template
// grants nothing but what the included profiles grant.
func Template() string {
	templateOnce.Do(func() { templateText = buildTemplate() })
	return templateText
}

var (
	templateOnce sync.Once
	templateText string
)

func buildTemplate() string {
	var b strings.Builder
	w := func(lines ...string) {
		for _, l := range lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	marker := func(name string) { w("# <"+name+">", "# </"+name+">") }

	w(
		"# .py-sandboxes: what the sandboxed program may do (pysandboxes).",
		"#",
		"# Everything is denied unless a rule below allows it. One rule per line,",
		"# \"key=value\"; '#' starts a comment; ${VAR} and ${VAR:-default} take their",
		"# value from the host environment when the rules load.",
		"#",
		"# Learning mode (a missing file, --learn, learn=FILE) runs the program without",
		"# refusing anything and writes what it saw between the \"# <learning_...>\"",
		"# markers below, under a dated \"# Add rules (...)\" header. Never learn with",
		"# untrusted code: learning runs everything unguarded and writes its own",
		"# permissions. Review every learned line before you rely on it (see the end).",
		"",
		"# ---- Composition ------------------------------------------------------------",
		"# include \"FILE\" splices another rule file here (a missing file is ignored). A",
		"# bare name is next to this file, ./x is from the current directory, ~ is home.",
		"# Rules from the current directory, only if you accept them:",
		"#include \"./.local.py-sandboxes\"",
		"# Per user, then per node (a DENY there wins over any ALLOW here):",
		"include \"~/.config/py-sandboxes/user-py-sandboxes.profile\"",
		"include \"/etc/py-sandboxes/global-py-sandboxes.profile\"",
		"",
		"# ---- OS sandbox ---------------------------------------------------------------",
		"# os-sandbox= chooses the kernel-enforced provider: auto (the least privileged",
		"# one that enforces every rule), landlock, bwrap, firejail, unshare, qemu,",
		"# subprocess (environment filtering only) or none (no sandbox, debugging only).",
		"# Write the provider literally to stop OS_SANDBOX from changing it.",
		"os-sandbox=${OS_SANDBOX:-auto}",
		"# <provider>.<key>=value passes a parameter to one provider, e.g.",
		"#   bwrap.share-net=yes   qemu.memory=2G   firejail.rlimit-as=600m",
		"# py-sandbox=false turns the Python layer off (imports, python-api, eval-*",
		"# are then not enforced, and learning is impossible):",
		"#py-sandbox=true",
		"# learn=false locks this file: no learning, and no rule added by code or on the",
		"# command line. learn=FILE learns on every launch (development only).",
		"#learn=false",
		"",
		"# ---- Environment variables ----------------------------------------------------",
		"# The program starts with no variable but those set here.",
		"#   env=NAME=value                 a fixed value",
		"#   env=NAME=${NAME}               the host's value (or ${NAME:-default})",
		"#   env=*_API_KEY=${*_API_KEY}     every host variable matching the pattern",
		"#   unenv=NAME                     remove a variable set by the lines above",
		"#                                  (patterns too)",
		"# e.g. env=OPENAI_API_KEY=${OPENAI_API_KEY}",
	)
	marker("learning_guard_envs")
	w(
		"",
		"# ---- Files --------------------------------------------------------------------",
		"#   expose-ro=DIR    read, list, stat and run what is under DIR",
		"#   expose-rw=DIR    also create, write, rename and delete under DIR",
		"#   ignore=GLOB      hide matching files: they look absent (a relative glob",
		"#                    matches names, an absolute one whole paths)",
		"# DIR is ./x (from the current directory), ../x, ~/x, /abs or ${VAR}/x; it must",
		"# exist and be a directory. Beware: ignore=.* also hides .venv and .git.",
		"# e.g. expose-ro=./data   expose-rw=${TMPDIR:-/tmp}   ignore=.env",
		"# Learned paths above the current directory come out ~/x or absolute: write",
		"# them relative by hand (expose-ro=../..). Disable .env loading while learning",
		"# (PYTHON_DOTENV_DISABLED=1), or expose-ro=. appears.",
	)
	marker("learning_guard_files")
	w(
		"",
		"# ---- Network ------------------------------------------------------------------",
		"#   net=ACTION|PROTO|NETWORK|PORTS|DIRECTION",
		"#     ACTION     ALLOW or DENY (DENY rules are checked first, whatever the order)",
		"#     PROTO      tcp, udp, tcp,udp or * (any)",
		"#     NETWORK    an address, a CIDR, a host name (resolved once, when the rules",
		"#                load, and pinned) or * (every IPv4 and IPv6 address)",
		"#     PORTS      N, N-M, N-, a comma list of these, or *",
		"#     DIRECTION  IN (bind, listen, accept), OUT (connect, send) or *",
		"# e.g. net=ALLOW|tcp|api.example.com|443|OUT",
		"#      net=ALLOW|tcp|0.0.0.0/0|${PORT:-8000}|IN",
		"#      net=DENY|*|10.0.0.0/8|*|OUT",
	)
	marker("learning_guard_socket")
	w(
		"",
		"# ---- Python imports -----------------------------------------------------------",
		"#   python-import=a, b, c   top-level modules the program may import",
		"#                           (* allows all; with no line nothing may be imported)",
		"# e.g. python-import=json, csv, requests",
		"# Learning groups them: dangerous (they can undo the sandbox), standard,",
		"# deprecated, and external modules (check where they come from).",
	)
	marker("learning_guard_import")
	w(
		"",
		"# ---- Sensitive Python functions -----------------------------------------------",
		"#   python-api=ALLOW:<category>    every function of a category",
		"#   python-api=ALLOW:<module.function>   one function (it wins over its category)",
		"#   python-api=DENY:...            the same, refused (DENY wins at equal level)",
		"# Importing a module does not allow calling its sensitive functions.",
		"# Categories (⚠: dangerous to allow):",
	)
	for _, c := range apiCategoryNames {
		mark := ""
		if APICategoryWarned(c) {
			mark = "⚠ "
		}
		w(fmt.Sprintf("#   %s%s: %s", mark, c, APICategoryHelp(c)))
	}
	w(
		"# e.g. python-api=ALLOW:threads   python-api=ALLOW:subprocess.run",
		"# A function often calls others that are checked too (subprocess.run calls",
		"# subprocess.Popen, which calls _posixsubprocess.fork_exec): the refusal names",
		"# the next one to allow.",
	)
	marker("learning_guard_api")
	w(
		"",
		"# ---- Dynamic code (eval, exec, compile) ---------------------------------------",
		"# Refused unless eval-* rules declare the sub-language code strings may use:",
		"#   eval-syntax=arith, compare     syntax groups (arith, compare, conditional,",
		"#                                  loop, comprehension, assign, func, ...)",
		"#   eval-call=len, min, max        callables the code may call",
		"#   eval-attribute=str-methods     attributes it may read",
		"#   eval-import=, eval-magic=      modules it may import, dunder names",
		"#   eval-namespace=closed  eval-timeout=2s  eval-max-iterations=100_000  ...",
		"# python-api=ALLOW:dynamic-code runs them unguarded instead (never with eval-*).",
	)
	marker("learning_guard_eval")
	w(
		"",
		"# ---- Results of sandboxed calls ------------------------------------------------",
		"#   remote-result-mode=data-only   plain data only (the default)",
		"#   remote-result-mode=objects     also application objects, described inertly",
		"#   remote-result-guard=true       the gadget denylist of the result channel",
	)
	marker("learning_remote_result")
	w(
		"",
		"# ---- Review ---------------------------------------------------------------------",
		"# 1. Learn with every feature of the program exercised, trusted code only.",
		"# 2. Read every learned line; narrow broad rules; add by hand what compiled code",
		"#    needs (learning sees only what Python does).",
		"# 3. Run without learning: a refusal names the exact rule to add.",
		"# 4. Keep this file with the code and review its changes; lines deserving",
		"#    attention: learn=, os-sandbox=, include, expose-rw=, outgoing net=, env=,",
		"#    python-api=ALLOW:.",
		"# 5. Lock it with learn=false once reviewed.",
	)
	return b.String()
}
