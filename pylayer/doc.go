// Package pylayer is the Python layer of pysandboxes: a guard injected into a
// sandboxed CPython interpreter (3.11 or later) before any program code runs. It
// enforces what only the interpreter can see (the modules a program imports, the
// sensitive functions it calls, code given as a string), repeats the file,
// network and environment rules with exceptions that name the rule and its
// file(line), and, in learning mode, records what the program does instead of
// refusing it.
//
// The Go side resolves the real interpreter once ([ResolveInterpreter]), builds
// the guard's configuration from a [policy.Policy] (the policy is resolved in Go:
// the child never parses a rule file), compiles the guard's Python modules once
// per interpreter, and talks to the child over an inherited socket ([Session]):
// code and configuration down, the hello, refusals ([Denial]) and learning
// observations up. [Worker] and [Zygote] are the same layer for Sandbox.Call
// (a worker serving calls) and Sandbox.Eval (a process forked per evaluation).
//
// # The pieces
//
// On the Go side: interp.go finds and describes the interpreter; config.go turns
// a policy into the guard's configuration; code.go embeds the Python modules,
// compiles them once per interpreter and caches the result; channel.go is the
// channel to the child (frames of a 4-byte length, a kind byte and a payload)
// and a [Session] over it; worker.go and zygote.go drive the Call worker and the
// eval zygote over the same channel; learned.go turns what learning observed
// (programs run, databases opened) into file accesses on the host;
// marshal.go writes the configuration in CPython's marshal format.
//
// In the child (py/): the loader given with -c ([Boot]) reads the modules and
// runs boot.py, which reads the configuration and starts the target;
// pysandboxes.py is the public module a program sees; guard.py and arm.py are
// the guard; worker.py serves calls; zygote.py forks evaluations; wire.py holds
// what worker.py and zygote.py share (frames, JSON, the descriptor of an
// exception), run in the namespace of either. The JSON encoder is one source
// (package internal/pyjson), embedded before guard.py and after wire.py. The
// channel itself is a pypool.Pipe (package internal/pypool).
//
// # The guard (py/)
//
// boot.py reads the frames and runs the program as CPython would (-c, -m, a
// script, stdin, the console). guard.py holds a PEP 578 audit hook: Python code
// cannot remove it, and every function on its path reads no global name (its
// state is a tuple of immutable data bound when the guard is armed), so
// replacing a builtin or writing the guard's globals changes no decision. arm.py
// arms it, and replaces the few functions that raise no audit event by sealed
// wrappers: a wrapper's state (the original function, the policy) is held in its
// code's constants, which the program cannot read (reading __code__,
// __defaults__ or __kwdefaults__ of the layer's functions is refused), nor replace
// by an argument; no closure cell holds an original.
//
// # Imports: who imports
//
// An import is judged by who imports. The application's code (and code given as
// a string, evaluated by the eval guard) needs a python-import= rule for every
// module it imports, whether the module is already loaded or not; what an allowed
// module imports for its own use is allowed with it. The importer is found on
// the stack, from where the import is seen, outward: the layer's own frames and
// the import system are passed through; a library's import statement, or a
// library module body being run, ends the walk (the library imports for itself);
// the first application frame is charged when its import statement names the
// module (or its own package), or when it calls something that imports a module
// it names (__import__, importlib.import_module, a pickle naming a class, a
// library that imports what its caller names, such as logging.config or
// pkgutil.resolve_name), or when C code it called loads a module that is neither
// loaded already nor one the interpreter's C code imports for itself (_strptime,
// encodings, copyreg...). sys, builtins and the program's __main__ need no rule.
//
// Library code is told by its file name (the interpreter's stdlib and
// site-packages directories, a site-packages directory on sys.path that the
// program may not write, <frozen ...>), the layer's by the identity of its code
// objects; an application installed into site-packages is a library to the
// layer (its own imports are allowed with it). No program can make a code object named as a library file:
// code.replace and types.CodeType, compile, marshal.loads,
// _imp._fix_co_filename and _imp.get_frozen_object are judged (only the import
// system's own load of a library's compiled file may name code so), and a
// library's code run outside its module (types.FunctionType, a function's
// __code__ replaced, exec of it) is an import of that module.
//
// The doors: the import statement and __import__ (builtins.__import__ is a
// sealed wrapper, so a module already loaded is judged too), importlib's
// import_module and __import__, every load of a module whatever the path (the
// audit events of the C import path and of extension modules, the exec of a
// module's code by any loader: importlib.util specs and exec_module,
// SourceFileLoader.load_module, runpy, zipimport), builtin modules made by
// _imp.create_builtin (BuiltinImporter.load_module, a fresh copy of a loaded
// module), pickles that name classes. A fresh copy of a module whose functions
// the layer wraps (posix, _signal, _thread...) is wrapped again when it is made.
// A refusal is a RuleModuleNotFoundError naming the importer's file(line) and
// the line to add:
//
//	Module named 'socket' is not allowed by a rule (imported by tools.py(12)).
//	Add `python-import=socket`.
//
// Learning records the modules the application imports, not what libraries
// import for themselves (nor their optional imports that fail).
//
// # Files
//
// A path that no rule exposes, or that ignore= hides, looks absent through every
// door: open, os.stat, os.lstat, os.access (False), os.readlink (a link whose
// target is hidden), os.path.realpath (which then leaves such a link
// unresolved), os.statvfs, os.pathconf, listings (ignored names and links to
// hidden files are not listed) and globs (a pattern through a directory that is
// not exposed lists the names on the way to what is exposed). A directory above
// an exposed path exists (stat sees it), its content stays hidden. os.mkfifo,
// os.mknod and os.chroot are writes (chroot needs expose-rw: under a read-only
// root the guard's view of paths would differ from the kernel's). A name that is
// removed or moved (unlink, rmdir, rename, replace) is judged as itself, a
// symbolic link included, not by its target. A Unix socket's connect and send
// need expose-rw on its path, and are refused as connections
// (RuleSocketConnectionRefusedError, with the file rule's reason).
// sqlite3.connect is judged as a read of an existing database, or as the write
// of a new one in its directory (the C library would only say "unable to open
// database file"). When the OS refuses multiprocessing's POSIX semaphores or
// shared memory objects (/dev/shm, which a provider may show only when a rule
// exposes it), the refusal is a RulePermissionError naming expose-rw=/dev/shm.
//
// # Network
//
// net= rules are about addresses, and so is every judgement of the layer, as
// of the kernel: a connection, bind or send is judged by the address it goes
// to. A host name is resolved by the layer's getaddrinfo before the socket
// sees it (socket.socket's connect, connect_ex, bind, sendto and sendmsg give
// the socket the address of the answer): a pinned name answers its pinned
// addresses, a name no rule written as a network or * can allow is refused
// before any query, and an answer with an address a DENY rule
// matches, or with no allowed address, is refused when the call names its
// protocol and port (create_connection, asyncio, urllib3 do). Where every
// address is allowed (a rule for the whole family, no DENY rule there) a
// name needs no judging. Where C code resolves a name after the check (the C
// socket type given a name, libpq) the name is allowed only there; a pinned
// host of a psycopg2 DSN is given to libpq as hostaddr= its pinned address.
// A refusal names the rule and its file(line), or the implicit default policy
// and the net= line that would allow it (docs/network.md).
//
// # Learning
//
// In learning mode every refusal above is recorded instead, and the host turns
// the records into rules (policy.Learn). Besides what Python code touches, the
// layer records what C code will touch so that the learned rules run enforced:
// the programs the program runs (subprocess, os.exec*, posix_spawn, os.system;
// the host finds each on the PATH it was given, the commands a shell starts
// with, and what each needs to start, less what the interpreter itself needs,
// which the providers grant), the SQLite databases it connects to (the host
// tells afterwards whether each was made or written: a write in its
// directory, else a read of it), and /dev/shm when it makes a semaphore or a
// shared memory object. A read where nothing is (a probe that fails anyway) is
// not recorded.
//
// # Known gaps: what cannot be intercepted from Python
//
// The Python layer is a guardrail for code that means no harm, and a source of
// precise messages; the OS provider is the boundary against code that does. What
// no check inside the interpreter can see, and the OS rule (the provider
// capability, see docs/capabilities.md) that covers it:
//
//   - C code opening files: extension modules (sqlite3, OpenSSL's certificate
//     stores, numpy, database drivers) call open(2) without a Python call.
//     expose-ro=, expose-rw= and ignore= are enforced by the providers that
//     claim files-read, files-write and hide (landlock, unshare, bwrap,
//     firejail).
//   - C code using the network: a native driver's connect(2) and DNS. net= is
//     enforced by tcp-ports (landlock) and by net-hosts, udp-deny and
//     raw-sockets (unshare, bwrap, firejail with the network filter); Unix
//     sockets by unix-sockets.
//   - Direct system calls: native code the policy lets run (python-api=ALLOW:
//     native: ctypes calls, ctypes.memmove and memset, which raise no event),
//     and the programs a granted process-exec starts. Every rule above applies
//     to them at the OS layer, with seccomp (dangerous system calls refused),
//     signals and no-privileges.
//   - Descriptors: what the program reads or writes through a descriptor it
//     holds (inherited, passed over a Unix socket, socket.fromfd) is not judged
//     again: the OS layer judged the open. A path checked by the guard can be
//     replaced between the check and the call by another thread or process
//     (rename, symbolic link swap): the OS layer judges the call itself.
//   - Module objects already loaded: a module an allowed library loaded for
//     itself is reachable as an object (sys.modules, attributes of other
//     modules). The layer judges the application's imports and every load; what
//     a module object lets the program do is judged at use (files, network, the
//     python-api registry) and by the OS layer.
//   - Hostile bytecode: a program that rewrites the import system's own
//     internals (the globals of importlib._bootstrap_external) or is granted
//     introspection (frames, gc, sys.settrace) can reach the layer's state and
//     pass its code for a library's. Only the OS layer holds against it.
//
// Outside these, a door that the layer claims to close is closed: each family is
// tested on CPython 3.11, 3.12 and 3.13 (see the tests of this package and of
// the root package).
package pylayer
