package policy

import (
	"fmt"
	"maps"
	"slices"
)

// The registry of sensitive Python functions judged by python-api= rules.
//
// A function is named by its qualified name, "module.attr[.attr...]", as the Python
// layer patches it: the module is the leading segment and the rest is the attribute
// path inside it ("threading.Thread.start", "sys.monitoring.use_tool_id").
//
// Twins. CPython often exposes one function object under several names: os.system
// is posix.system (os does "from posix import *"), signal.alarm is _signal.alarm,
// pickle.loads is _pickle.loads, threading._start_joinable_thread is
// _thread.start_joinable_thread, subprocess._fork_exec is _posixsubprocess.fork_exec.
// Every name is registered, because each one is a separate patch point (patching
// os.system leaves "import posix; posix.system(...)" open), but the names of one
// function are twins: a rule on any of them decides for all of them. So
// python-api=ALLOW:os.system also allows posix.system and nt.system, and
// DENY:posix.system against ALLOW:os.system is a DENY at the same (function) level,
// which wins. A twin is registered only where CPython really defines the function
// in that module: os.popen, os.execl... and, on POSIX, os.spawnv... are written in
// Python in os.py and have no posix/nt twin; nt only has system, execv, execve,
// spawnv, spawnve, startfile, kill, abort and umask.
//
// Doors. Many registered functions reach others: subprocess.getoutput calls
// getstatusoutput, which calls check_output, then run, then Popen, which starts the
// child with _posixsubprocess.fork_exec (or os.posix_spawn, or
// _winapi.CreateProcess on Windows). Each of these is patched and judged on its
// own, so allowing only the outer name is refused at the first inner door that is
// still denied, and the refusal names that door. The doors are kept as data (see
// APIDoors) so that the Python layer, the documentation and the learning output can
// name the next door. They are named by the canonical name of the function (the
// first of its twins), and a function that takes different paths on different
// versions or platforms lists every alternative.
//
// Choices for the entries the upstream table names loosely, all checked against
// CPython 3.11 to 3.14:
//   - "multiprocessing contexts' Process": multiprocessing.process.BaseProcess.start.
//     get_context("spawn"|"fork"|"forkserver").Process derive from BaseProcess, not
//     from multiprocessing.Process, and none of them overrides start, so it is a
//     twin of multiprocessing.Process.start (the same function object, reached
//     through another class).
//   - "subinterpreter creation": _interpreters.create (3.13+), its former name
//     _xxsubinterpreters.create (3.11-3.12; twins), and the public
//     concurrent.interpreters.create (3.14, PEP 734), whose door is
//     _interpreters.create. A subinterpreter imports fresh, unpatched modules, so it
//     runs code outside the patched interpreter: process-exec.
//   - "settrace_all_threads, setprofile_all_threads": threading.settrace_all_threads
//     and threading.setprofile_all_threads (3.12+), plus the sys._settraceallthreads
//     and sys._setprofileallthreads primitives they call (their doors), kept in the
//     threads category as the reference table places them.
//   - "sys.monitoring": sys.monitoring.use_tool_id, register_callback, set_events and
//     set_local_events (3.12+): claiming a tool, installing a callback, and turning
//     events on. Together they cover every way to get a callback run on events.
//   - pickle._load is registered besides pickle._loads and pickle._Unpickler: it is
//     the same pure-Python door (_Unpickler(file).load()).
//   - subprocess._fork_exec is the 3.12+ alias of _posixsubprocess.fork_exec that
//     subprocess binds at import (a twin).
//   - sys.remote_exec (3.14) stays in introspection and the *_all_threads functions
//     in threads, as the reference table has them.
//
// Not registered on purpose (as upstream): os._exit (the framework leaves the
// sandboxed process with it), signal.signal (registering a handler emits nothing),
// os.chroot (the file guard checks its path), ctypes.PyDLL (it inherits
// ctypes.CDLL.__init__, which is patched), mmap.mmap and ctypes.memmove (cannot be
// patched), pickle.Unpickler (an immutable C type).

// Category names, in the reference's order.
const (
	CatProcessExec     = "process-exec"
	CatProcessControl  = "process-control"
	CatPrivileges      = "privileges"
	CatThreads         = "threads"
	CatNative          = "native"
	CatIntrospection   = "introspection"
	CatDynamicCode     = "dynamic-code"
	CatDeserialization = "deserialization"
)

// apiCategory describes one category of the registry.
type apiCategory struct {
	name   string
	help   string // the header comment written by learning
	warned bool   // "⚠": dangerous to allow, warned at load and in learning
	funcs  []apiFunc
}

// apiFunc is one sensitive function: its canonical name, the other names of the
// same function object, and the registered functions it calls.
type apiFunc struct {
	name  string
	twins []string
	doors []string // canonical names of the inner doors, in call order
}

func apiFn(name string, doors ...string) apiFunc { return apiFunc{name: name, doors: doors} }

func apiTwin(name string, twins []string, doors ...string) apiFunc {
	return apiFunc{name: name, twins: twins, doors: doors}
}

// apiOS registers os.<name> with its posix.<name> and/or nt.<name> twins (only where
// the C module defines the function).
func apiOS(name string, posix, nt bool, doors ...string) apiFunc {
	f := apiFunc{name: "os." + name, doors: doors}
	if posix {
		f.twins = append(f.twins, "posix."+name)
	}
	if nt {
		f.twins = append(f.twins, "nt."+name)
	}
	return f
}

// apiSignal registers signal.<name> with its _signal.<name> twin.
func apiSignal(name string) apiFunc {
	return apiFunc{name: "signal." + name, twins: []string{"_signal." + name}}
}

const (
	apiPosix   = true
	apiNT      = true
	apiNoPosix = false
	apiNoNT    = false
)

// apiCategoriesData is the registry (rules-and-python-layer.md §1.8).
var apiCategoriesData = []apiCategory{
	{
		name: CatProcessExec, help: "runs code outside the patched interpreter", warned: true,
		funcs: []apiFunc{
			apiOS("system", apiPosix, apiNT),
			apiOS("popen", apiNoPosix, apiNoNT, "subprocess.Popen"),
			apiOS("execv", apiPosix, apiNT),
			apiOS("execve", apiPosix, apiNT),
			apiOS("execl", apiNoPosix, apiNoNT, "os.execv"),
			apiOS("execle", apiNoPosix, apiNoNT, "os.execve"),
			apiOS("execlp", apiNoPosix, apiNoNT, "os.execvp"),
			apiOS("execlpe", apiNoPosix, apiNoNT, "os.execvpe"),
			apiOS("execvp", apiNoPosix, apiNoNT, "os.execv"),
			apiOS("execvpe", apiNoPosix, apiNoNT, "os.execve"),
			// On POSIX os.py writes spawnv* as fork() then exec*(); on Windows
			// spawnv and spawnve are nt's C functions (no door).
			apiOS("spawnv", apiNoPosix, apiNT, "os.fork", "os.execv"),
			apiOS("spawnve", apiNoPosix, apiNT, "os.fork", "os.execve"),
			apiOS("spawnvp", apiNoPosix, apiNoNT, "os.fork", "os.execvp"),
			apiOS("spawnvpe", apiNoPosix, apiNoNT, "os.fork", "os.execvpe"),
			apiOS("spawnl", apiNoPosix, apiNoNT, "os.spawnv"),
			apiOS("spawnle", apiNoPosix, apiNoNT, "os.spawnve"),
			apiOS("spawnlp", apiNoPosix, apiNoNT, "os.spawnvp"),
			apiOS("spawnlpe", apiNoPosix, apiNoNT, "os.spawnvpe"),
			apiOS("posix_spawn", apiPosix, apiNoNT),
			apiOS("posix_spawnp", apiPosix, apiNoNT),
			apiOS("fork", apiPosix, apiNoNT),
			apiOS("forkpty", apiPosix, apiNoNT),
			apiOS("startfile", apiNoPosix, apiNT),
			apiFn("subprocess.Popen", "_posixsubprocess.fork_exec", "os.posix_spawn", "_winapi.CreateProcess"),
			apiFn("subprocess.run", "subprocess.Popen"),
			apiFn("subprocess.call", "subprocess.Popen"),
			apiFn("subprocess.check_call", "subprocess.call"),
			apiFn("subprocess.check_output", "subprocess.run"),
			apiFn("subprocess.getoutput", "subprocess.getstatusoutput"),
			apiFn("subprocess.getstatusoutput", "subprocess.check_output"),
			apiTwin("_posixsubprocess.fork_exec", []string{"subprocess._fork_exec"}),
			apiFn("_winapi.CreateProcess"),
			apiFn("pty.spawn", "pty.fork", "os.execlp"),
			apiFn("pty.fork", "os.forkpty", "os.setsid", "os.fork"),
			// fork context: os.fork; spawn and forkserver: _posixsubprocess.fork_exec
			// (multiprocessing.util.spawnv_passfds); Windows: _winapi.CreateProcess.
			apiTwin("multiprocessing.Process.start", []string{"multiprocessing.process.BaseProcess.start"},
				"os.fork", "_posixsubprocess.fork_exec", "_winapi.CreateProcess"),
			apiTwin("_interpreters.create", []string{"_xxsubinterpreters.create"}),
			apiFn("concurrent.interpreters.create", "_interpreters.create"),
		},
	},
	{
		name: CatProcessControl, help: "kills processes, exhausts host resources",
		funcs: []apiFunc{
			apiOS("kill", apiPosix, apiNT),
			apiOS("killpg", apiPosix, apiNoNT),
			apiOS("nice", apiPosix, apiNoNT),
			apiOS("setpriority", apiPosix, apiNoNT),
			apiOS("abort", apiPosix, apiNT),
			apiOS("setsid", apiPosix, apiNoNT),
			apiOS("setpgid", apiPosix, apiNoNT),
			apiOS("setpgrp", apiPosix, apiNoNT),
			apiSignal("alarm"),
			apiSignal("setitimer"),
			apiSignal("raise_signal"),
			apiSignal("pthread_kill"),
			apiFn("resource.setrlimit"),
			apiFn("resource.prlimit"),
		},
	},
	{
		name: CatPrivileges, help: "changes process identity or root", warned: true,
		funcs: []apiFunc{
			apiOS("setuid", apiPosix, apiNoNT),
			apiOS("setgid", apiPosix, apiNoNT),
			apiOS("seteuid", apiPosix, apiNoNT),
			apiOS("setegid", apiPosix, apiNoNT),
			apiOS("setreuid", apiPosix, apiNoNT),
			apiOS("setregid", apiPosix, apiNoNT),
			apiOS("setgroups", apiPosix, apiNoNT),
			apiOS("umask", apiPosix, apiNT),
			apiOS("setresuid", apiPosix, apiNoNT),
			apiOS("setresgid", apiPosix, apiNoNT),
			apiOS("initgroups", apiPosix, apiNoNT),
			apiOS("unshare", apiPosix, apiNoNT),
			apiOS("setns", apiPosix, apiNoNT),
		},
	},
	{
		name: CatThreads, help: "concurrency primitives",
		funcs: []apiFunc{
			// threading._start_new_thread exists up to 3.12, _start_joinable_thread
			// from 3.13; both are module-level aliases of the _thread functions.
			apiTwin("_thread.start_new_thread", []string{"_thread.start_new", "threading._start_new_thread"}),
			apiTwin("_thread.start_joinable_thread", []string{"threading._start_joinable_thread"}),
			apiFn("threading.Thread.start", "_thread.start_joinable_thread", "_thread.start_new_thread"),
			apiFn("_thread.interrupt_main"),
			apiFn("threading.settrace"),
			apiFn("threading.setprofile"),
			apiTwin("threading.stack_size", []string{"_thread.stack_size"}),
			apiFn("threading.settrace_all_threads", "threading.settrace", "sys._settraceallthreads"),
			apiFn("threading.setprofile_all_threads", "threading.setprofile", "sys._setprofileallthreads"),
			apiFn("sys._settraceallthreads"),
			apiFn("sys._setprofileallthreads"),
		},
	},
	{
		name: CatNative, help: "native code and arbitrary memory access", warned: true,
		funcs: []apiFunc{
			apiFn("ctypes.CDLL"), // patched on __init__, which also covers PyDLL
			apiFn("ctypes.cast"),
			apiFn("ctypes.string_at"),
			apiFn("ctypes.wstring_at"),
		},
	},
	{
		name: CatIntrospection, help: "can be used to undo the patches",
		funcs: []apiFunc{
			apiFn("importlib.reload"),
			apiFn("sys._getframe"),
			apiFn("sys._getframemodulename"),
			apiFn("sys._current_frames"),
			apiFn("sys._current_exceptions"),
			apiFn("sys.settrace"),
			apiFn("sys.setprofile"),
			apiFn("sys.addaudithook"),
			apiFn("gc.get_objects"),
			apiFn("gc.get_referrers"),
			apiFn("gc.get_referents"),
			apiFn("inspect.currentframe", "sys._getframe"),
			apiFn("inspect.stack", "sys._getframe"),
			apiFn("inspect.trace"),
			apiFn("faulthandler.enable"),
			apiFn("sys.monitoring.use_tool_id"),
			apiFn("sys.monitoring.register_callback"),
			apiFn("sys.monitoring.set_events"),
			apiFn("sys.monitoring.set_local_events"),
			apiFn("sys.remote_exec"),
		},
	},
	{
		// Exactly three names; patched by the eval guard, not by the API guard.
		name: CatDynamicCode, help: "runs code built at runtime from a string, unguarded", warned: true,
		funcs: []apiFunc{
			apiFn("builtins.eval"),
			apiFn("builtins.exec"),
			apiFn("builtins.compile"),
		},
	},
	{
		name: CatDeserialization, help: "runs the callables a byte stream names, unguarded", warned: true,
		funcs: []apiFunc{
			apiTwin("pickle.loads", []string{"_pickle.loads"}),
			apiTwin("pickle.load", []string{"_pickle.load"}),
			apiFn("pickle._loads", "pickle._Unpickler"),
			apiFn("pickle._load", "pickle._Unpickler"),
			apiFn("pickle._Unpickler"), // patched on __init__: restricted unpicklers subclass it
		},
	},
}

// Indexes built from apiCategoriesData.
var (
	apiCategoryNames []string
	apiCategoryIndex = map[string]*apiCategory{}
	apiCategoryOf    = map[string]string{}   // every registered name -> category
	apiCanonical     = map[string]string{}   // every registered name -> canonical name
	apiFuncs         = map[string]*apiFunc{} // canonical name -> entry
	apiNames         = map[string][]string{} // category -> every registered name, in registry order
)

func init() {
	for i := range apiCategoriesData {
		c := &apiCategoriesData[i]
		apiCategoryNames = append(apiCategoryNames, c.name)
		apiCategoryIndex[c.name] = c
		for j := range c.funcs {
			f := &c.funcs[j]
			apiFuncs[f.name] = f
			for _, n := range append([]string{f.name}, f.twins...) {
				if _, dup := apiCategoryOf[n]; dup {
					panic(fmt.Sprintf("policy: %s registered twice", n))
				}
				apiCategoryOf[n] = c.name
				apiCanonical[n] = f.name
				apiNames[c.name] = append(apiNames[c.name], n)
			}
		}
	}
	for _, f := range apiFuncs {
		for _, d := range f.doors {
			if apiCanonical[d] != d {
				panic(fmt.Sprintf("policy: door %s of %s is not a canonical registered name", d, f.name))
			}
		}
	}
}

// APICategories returns the eight categories of sensitive functions, in the
// reference's order: process-exec, process-control, privileges, threads, native,
// introspection, dynamic-code, deserialization.
func APICategories() []string { return slices.Clone(apiCategoryNames) }

// APICategoryHelp returns the one-line description of a category that learning
// writes in its header comment ("runs code outside the patched interpreter"), or ""
// for an unknown category.
func APICategoryHelp(category string) string {
	if c := apiCategoryIndex[category]; c != nil {
		return c.help
	}
	return ""
}

// APICategoryWarned reports whether a category is marked ⚠: allowing it is warned at
// load and flagged in learning output (process-exec, privileges, native,
// dynamic-code, deserialization).
func APICategoryWarned(category string) bool {
	c := apiCategoryIndex[category]
	return c != nil && c.warned
}

// APIRegistry returns every registered sensitive function, twins included, mapped to
// its category. The map is a copy.
func APIRegistry() map[string]string { return maps.Clone(apiCategoryOf) }

// APIFunctions returns the registered names of a category (twins included), in
// registry order, or nil for an unknown category.
func APIFunctions(category string) []string { return slices.Clone(apiNames[category]) }

// APICategoryOf returns the category of a registered function.
func APICategoryOf(qualname string) (string, bool) {
	c, ok := apiCategoryOf[qualname]
	return c, ok
}

// APITwins returns the other registered names of the same function object
// (posix.system and nt.system for os.system), or nil. A rule on any of them decides
// for all of them.
func APITwins(qualname string) []string {
	canon, ok := apiCanonical[qualname]
	if !ok {
		return nil
	}
	f := apiFuncs[canon]
	var out []string
	for _, n := range append([]string{f.name}, f.twins...) {
		if n != qualname {
			out = append(out, n)
		}
	}
	return out
}

// APIDoors returns the inner doors a call of qualname goes through: the registered
// functions it reaches, directly or through other doors, each named once by its
// canonical name, in call order (depth first). A python-api=ALLOW on qualname alone
// is refused at the first of them that is still denied. Where CPython takes
// different paths by version or platform every alternative is listed (for
// subprocess.Popen: _posixsubprocess.fork_exec, os.posix_spawn and
// _winapi.CreateProcess). It returns nil for a function that reaches no other
// registered function and for an unregistered name.
func APIDoors(qualname string) []string {
	canon, ok := apiCanonical[qualname]
	if !ok {
		return nil
	}
	var out []string
	seen := map[string]bool{canon: true}
	var walk func(string)
	walk = func(name string) {
		for _, d := range apiFuncs[name].doors {
			if seen[d] {
				continue
			}
			seen[d] = true
			out = append(out, d)
			walk(d)
		}
	}
	walk(canon)
	return out
}

// APINextDoors returns the registered functions a call of qualname calls directly
// (canonical names), or nil.
func APINextDoors(qualname string) []string {
	canon, ok := apiCanonical[qualname]
	if !ok {
		return nil
	}
	return slices.Clone(apiFuncs[canon].doors)
}

// APIRefusal returns the message of the Python layer's RuleApiPermissionError for a
// call of qualname refused in category.
func APIRefusal(qualname, category string) string {
	return fmt.Sprintf("%s() is denied by the API guard (category: %s).\n"+
		"Add `python-api=ALLOW:%s` for this function only, or `python-api=ALLOW:%s` for the whole category.",
		qualname, category, qualname, category)
}
