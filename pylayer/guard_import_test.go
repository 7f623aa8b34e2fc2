package pylayer

import (
	"encoding/hex"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/policy"
)

// importRules allow the modules the import cases use to reach their doors; none
// of them allows socket, colorsys, os or re.
const importRules = `python-import=json, csv, importlib, pickle, logging, pkgutil, runpy, types, _frozen_importlib, _imp
python-import=unittest, datetime, codecs, marshal, asyncio
python-api=ALLOW:deserialization
`

// stdlibPrelude gives the cases the stdlib directory (from an allowed module).
const stdlibPrelude = `import json as _json
STDLIB = _json.__file__.rsplit('/', 2)[0]
`

func refusedImport(name, code string, line int, module string) pyCase {
	return pyCase{name: name, code: code, exc: "RuleModuleNotFoundError", line: line,
		msg: []string{"Module named '" + module + "' is not allowed by a rule (imported by <string>("},
		fix: "Add `python-import=" + module + "`."}
}

// libraryMarshal is a marshal of a code object named as a stdlib file, made by
// the interpreter itself (outside any sandbox).
func libraryMarshal(t *testing.T, in *Interpreter) string {
	t.Helper()
	out, err := exec.Command(in.Path, "-I", "-c", `import marshal, json, sys
sys.stdout.write(marshal.dumps(compile('1', json.__file__, 'eval')).hex())`).Output()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hex.DecodeString(string(out)); err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestImportWhoImports: an import made by the application needs its rule,
// whether the module is loaded already or not, through every door of the
// import system; what an allowed module imports for itself is allowed with it.
func TestImportWhoImports(t *testing.T) {
	eachPython(t, func(t *testing.T, in *Interpreter) {
		code := libraryMarshal(t, in)
		cases := []pyCase{
			// What an allowed module imports for itself (re, enum, functools...).
			{name: "README's json, csv", code: "import json, csv\nreturn csv.writer.__name__, json.dumps([1])", value: "('writer', '[1]')"},
			{name: "importlib's own warnings", code: "import importlib\nreturn importlib.__name__", value: "'importlib'"},
			{name: "asyncio's own collections, socket, selectors...", code: "import asyncio\nreturn asyncio.run(asyncio.sleep(0, 'ran'))", value: "'ran'"},
			{name: "C code's lazy imports (_strptime, encodings)", code: "import datetime, codecs\nreturn datetime.datetime.strptime('2020', '%Y').year, codecs.encode('abc', 'rot13'), 'x'.encode('cp1252')", value: "(2020, 'nop', b'x')"},
			{name: "sys, builtins", code: "import sys, builtins\nreturn sys.__name__", value: "'sys'"},
			// The application's own imports, loaded or not.
			refusedImport("statement, module already loaded", "x = 1\nimport os", 2, "os"),
			refusedImport("from-import, module already loaded", "from os import path", 1, "os"),
			refusedImport("statement, not loaded", "import colorsys", 1, "colorsys"),
			refusedImport("__import__, loaded", "return __import__('os')", 1, "os"),
			refusedImport("__import__ through getattr(__builtins__)", "f = getattr(__builtins__, '__imp' + 'ort__')\nreturn f('colorsys')", 2, "colorsys"),
			refusedImport("__import__ from the builtins' dict", "import builtins\nreturn vars(builtins)['__import__']('colorsys')", 2, "colorsys"),
			refusedImport("importlib.import_module", "import importlib\nreturn importlib.import_module('colorsys')", 2, "colorsys"),
			refusedImport("importlib.import_module, loaded", "import importlib\nreturn importlib.import_module('os')", 2, "os"),
			refusedImport("importlib.__import__", "import importlib\nreturn importlib.__import__('os')", 2, "os"),
			refusedImport("spec_from_file_location + exec_module (named as an allowed module)",
				"import importlib.util as u\ns = u.spec_from_file_location('json', STDLIB + '/colorsys.py')\nm = u.module_from_spec(s)\ns.loader.exec_module(m)", 4, "colorsys"),
			refusedImport("SourceFileLoader.load_module", "import importlib.machinery as m\nreturn m.SourceFileLoader('json', STDLIB + '/colorsys.py').load_module()", 2, "colorsys"),
			refusedImport("get_code + types.FunctionType", "import importlib.machinery as m, types\nc = m.SourceFileLoader('json', STDLIB + '/colorsys.py').get_code('json')\nreturn types.FunctionType(c, {})", 3, "colorsys"),
			refusedImport("a library function's code in the program's globals", "import types, json\nreturn types.FunctionType(json.decoder.re.compile.__code__, {})", 2, "re"),
			refusedImport("a library function's code on a program's function", "import json\ndef f(): pass\nf.__code__ = json.decoder.re.compile.__code__", 3, "re"),
			{name: "BuiltinImporter.load_module", code: "import _frozen_importlib as f\nn = [m for m in ('_socket', '_symtable', '_tracemalloc') if m in sys.builtin_module_names and m not in sys.modules][0]\nreturn f.BuiltinImporter.load_module(n)",
				exc: "RuleModuleNotFoundError", line: 3, msg: []string{"Module named '_", "' is not allowed by a rule (imported by <string>("}, fix: "`."},
			refusedImport("_imp.create_builtin: a fresh posix", "import _imp, _frozen_importlib as f\nreturn _imp.create_builtin(f.ModuleSpec('posix', None))", 2, "posix"),
			refusedImport("pickle.loads finds a class", "import pickle\nreturn pickle.loads(b'ccolorsys\\nrgb_to_hsv\\n.')", 2, "colorsys"),
			refusedImport("pickle.loads finds a loaded class", "import pickle\nreturn pickle.loads(b'cos\\ngetcwd\\n.')", 2, "os"),
			refusedImport("pickle._loads (pure Python)", "import pickle\nreturn pickle._loads(b'cos\\ngetcwd\\n.')", 2, "os"),
			{name: "pickle.loads of an allowed module", code: "import pickle\nreturn pickle.loads(b'cjson\\ndumps\\n.').__name__", value: "'dumps'"},
			refusedImport("pkgutil.resolve_name", "import pkgutil\nreturn pkgutil.resolve_name('os:getcwd')", 2, "os"),
			refusedImport("runpy.run_module", "import runpy\nrunpy.run_module('colorsys')", 2, "colorsys"),
			refusedImport("runpy.run_path of a stdlib file", "import runpy\nrunpy.run_path(STDLIB + '/colorsys.py')", 2, "colorsys"),
			{name: "logging.config names a class", code: "import logging.config\ntry:\n    logging.config.dictConfig({'version': 1, 'handlers': {'h': {'class': 'os.getcwd'}}})\nexcept ValueError as e:\n    raise e.__cause__",
				exc: "ValueError", line: 3, msg: []string{"Cannot resolve 'os.getcwd': Module named 'os' is not allowed by a rule"}, fix: "Add `python-import=os`."},
			refusedImport("unittest.mock.patch", "import unittest.mock\nunittest.mock.patch('colorsys.rgb_to_hsv').start()", 2, "colorsys"),
			// No code object named as a library file can be made by the program.
			{name: "code.replace with a library file name", code: "return (lambda: 0).__code__.replace(co_filename=STDLIB + '/os.py')",
				exc: "RuleApiPermissionError", msg: []string{"A code object named as the library file", "cannot be made by the program"}},
			{name: "marshal of code named as a library file", code: "import marshal\nreturn marshal.loads(bytes.fromhex('" + code + "'))",
				exc: "RuleApiPermissionError", msg: []string{"Loading code named as a library file is DENIED"}},
			{name: "_imp.get_frozen_object with the program's data", code: "import _imp, marshal\nreturn _imp.get_frozen_object('os', bytes.fromhex('" + code + "'))",
				exc: "RuleApiPermissionError", msg: []string{"Loading frozen code from the program's data is DENIED"}},
		}
		rules := importRules
		if in.Version[1] == 11 {
			// imp (removed in 3.12).
			rules += "python-import=imp, warnings\n"
			cases = append(cases,
				// imp's loader is a subclass of SourceFileLoader: the compiled
				// code it reads is not the import system's own load.
				pyCase{name: "imp.load_source", code: "import warnings\nwarnings.simplefilter('ignore')\nimport imp\nreturn imp.load_source('json', STDLIB + '/colorsys.py')",
					exc: "RuleApiPermissionError", msg: []string{"Loading code named as a library file is DENIED"}},
				// imp.init_builtin returns None when the import fails.
				pyCase{name: "imp.init_builtin", code: "import warnings\nwarnings.simplefilter('ignore')\nimport imp\nreturn imp.init_builtin('_socket')", value: "None"})
		}
		runCases(t, in, t.TempDir(), rules, stdlibPrelude, cases)
	})
}

// TestImportLearningRecordsTheApplication: learning records the modules the
// application imports, not what the libraries import for themselves (optional
// imports that fail inside the standard library included).
func TestImportLearningRecordsTheApplication(t *testing.T) {
	eachPython(t, func(t *testing.T, in *Interpreter) {
		dir := t.TempDir()
		pol := loadRules(t, dir, "")
		prog := "import json, csv, importlib, asyncio, subprocess\nfrom os import path\nimport xml.dom.minidom\nprint(json.dumps([1]))\n"
		r := runGuard(t, in, dir, pol, ModeLearn, Target{Kind: "command", Value: prog})
		if r.exit != 0 || strings.TrimSpace(r.stdout) != "[1]" {
			t.Fatalf("learning run failed:\n%s", r)
		}
		got := slices.Clone(r.res.Observations.Imports)
		slices.Sort(got)
		want := []string{"asyncio", "csv", "importlib", "json", "os", "subprocess", "xml"}
		if !slices.Equal(got, want) {
			t.Errorf("learned imports %v, want %v", got, want)
		}
	})
}

// TestImportRefusalReachesTheHost: the host receives the refusal with the module
// as its target.
func TestImportRefusalReachesTheHost(t *testing.T) {
	eachPython(t, func(t *testing.T, in *Interpreter) {
		dir := t.TempDir()
		pol := loadRules(t, dir, "python-import=json\n")
		r := runGuard(t, in, dir, pol, ModeEnforce, Target{Kind: "command", Value: "import json\nimport os\n"})
		if r.exit != 1 || !strings.Contains(r.stderr, "pysandboxes.RuleModuleNotFoundError: Module named 'os' is not allowed by a rule (imported by <string>(2)).\nAdd `python-import=os`.") {
			t.Fatalf("run:\n%s", r)
		}
		if len(r.res.Denials) != 1 || r.res.Denials[0].Kind != "import" || r.res.Denials[0].Target != "os" ||
			r.res.Denials[0].Exception != "RuleModuleNotFoundError" {
			t.Errorf("denials %+v", r.res.Denials)
		}
	})
}

// TestDangerousFixLines: a refusal whose fix would allow a module or an API
// category that can undo the sandbox says so under its fix line; an ordinary
// one does not.
func TestDangerousFixLines(t *testing.T) {
	eachPython(t, func(t *testing.T, in *Interpreter) {
		danger := "\n⚠ Dangerous!"
		cases := []pyCase{
			{name: "subprocess", code: "import subprocess", exc: "RuleModuleNotFoundError", line: 1,
				msg: []string{"Add `python-import=subprocess`.\n⚠ Dangerous! 'subprocess' can undo the sandbox"}},
			{name: "ctypes", code: "import ctypes", exc: "RuleModuleNotFoundError", line: 1,
				msg: []string{"Add `python-import=ctypes`.\n⚠ Dangerous! 'ctypes'"}},
			refusedImport("colorsys, no mark", "import colorsys", 1, "colorsys"),
			{name: "os.system, process-exec", code: "import os\nos.system('true')", exc: "RuleApiPermissionError",
				msg: []string{"category: process-exec", "⚠ Dangerous! The category process-exec can undo the sandbox"}},
			{name: "os.nice, no mark", code: "import os\nos.nice(0)",
				exc: "RuleApiPermissionError"},
		}
		r := runCases(t, in, t.TempDir(), "python-import=os, socket\n", "", cases)
		for _, l := range strings.Split(r.stdout, "\n") {
			if strings.Contains(l, "colorsys") || strings.Contains(l, "nice") {
				if strings.Contains(strings.ReplaceAll(l, `\n`, "\n"), danger) {
					t.Errorf("an ordinary refusal is marked dangerous: %s", l)
				}
			}
		}
	})
}

// TestDangerousImportsMatchPolicy: the guard marks the modules learning files
// under "⚠ Dangerous!", no more, no fewer.
func TestDangerousImportsMatchPolicy(t *testing.T) {
	b, err := pyFiles.ReadFile("py/guard.py")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	start := strings.Index(src, "DANGEROUS_IMPORTS = frozenset((")
	if start < 0 {
		t.Fatal("guard.py has no DANGEROUS_IMPORTS")
	}
	body, _, _ := strings.Cut(src[start+len("DANGEROUS_IMPORTS = frozenset(("):], "))")
	var got []string
	for _, f := range strings.Split(body, ",") {
		if f = strings.Trim(strings.TrimSpace(f), "'"); f != "" {
			got = append(got, f)
		}
	}
	slices.Sort(got)
	if want := policy.DangerousImports(); !slices.Equal(got, want) {
		t.Errorf("guard.py marks %v, policy %v", got, want)
	}
}
