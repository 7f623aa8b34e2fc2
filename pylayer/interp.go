package pylayer

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/diskcache"
	"github.com/pysandboxes/pysandboxes/internal/hostprobe"
	"github.com/pysandboxes/pysandboxes/internal/shim"
)

// EnvPython names the interpreter when no option does.
const EnvPython = "PYSANDBOXES_PYTHON"

// MinVersion is the oldest Python the layer supports.
var MinVersion = [2]int{3, 11}

// Interpreter is a real CPython interpreter (never a version manager's shim).
type Interpreter struct {
	// Path is the canonical path of the interpreter binary.
	Path string
	// Version is sys.version_info[:3].
	Version [3]int
	// Info holds what the interpreter told about itself.
	Info InterpInfo

	code     sync.Once // the layer's code for this interpreter, made once
	codeBlob *codeBlob
}

// checkVersion refuses an interpreter older than min.
func checkVersion(path string, v [3]int, min [2]int) error {
	if v[0] < min[0] || v[0] == min[0] && v[1] < min[1] {
		return fmt.Errorf("pylayer: %s is Python %d.%d.%d; the Python layer needs Python %d.%d or later (name another interpreter with %s or WithPython)",
			path, v[0], v[1], v[2], min[0], min[1], EnvPython)
	}
	return nil
}

// InterpInfo is what the interpreter reports about itself, once per version of
// its file (cached on disk).
type InterpInfo struct {
	Version    [3]int   `json:"version"`
	VersionS   string   `json:"version_s"`
	Platform   string   `json:"platform"`
	CacheTag   string   `json:"cache_tag"`
	Magic      string   `json:"magic"`
	Stdlib     []string `json:"stdlib"`   // stdlib and platstdlib, canonical
	Site       []string `json:"site"`     // site-packages directories, canonical
	Prefixes   []string `json:"prefixes"` // sys.prefix and friends, canonical
	Executable string   `json:"executable"`
	// Library lists the stdlib and site-packages directories as the interpreter
	// spells them (not resolved): the file names of the code it loads from them.
	Library []string `json:"library"`
	// Opcodes holds the numbers of the opcodes the Python layer reads in a frame
	// (IMPORT_NAME, EXTENDED_ARG).
	Opcodes map[string]int `json:"opcodes"`
}

// String renders "Python 3.11.2 (/usr/bin/python3.11)".
func (in *Interpreter) String() string {
	return fmt.Sprintf("Python %d.%d.%d (%s)", in.Version[0], in.Version[1], in.Version[2], in.Path)
}

const infoQuery = `import sys, sysconfig, os, json, opcode, importlib.util as u
p = sysconfig.get_paths()
def real(x):
    return os.path.realpath(x) if x else x
site = []
try:
    import site as s
    site = s.getsitepackages()
except Exception:
    pass
print(json.dumps({"version": list(sys.version_info[:3]), "version_s": sys.version, "platform": sys.platform,
 "cache_tag": sys.implementation.cache_tag, "magic": u.MAGIC_NUMBER.hex(),
 "stdlib": sorted({real(p.get("stdlib")), real(p.get("platstdlib"))} - {None, ""}),
 "site": sorted({real(x) for x in site + [p.get("purelib"), p.get("platlib")] if x}),
 "prefixes": sorted({real(x) for x in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix) if x}),
 "executable": sys.executable,
 "library": sorted({x for x in [p.get("stdlib"), p.get("platstdlib"), p.get("purelib"), p.get("platlib")] + site if x}),
 "opcodes": {k: opcode.opmap[k] for k in ("IMPORT_NAME", "EXTENDED_ARG")}}))
`

// ResolveInterpreter finds the real interpreter: path when given, else the
// environment variable PYSANDBOXES_PYTHON, else python3 on PATH. A script (a
// version manager's shim) is resolved to the executable it would run, without
// running it, when package shim can (pyenv, asdf); else it is run once
// to ask the interpreter it starts for sys.executable. The interpreter must be
// CPython 3.11 or later. The answer is cached in memory and, per version of the
// interpreter's file, on disk.
func ResolveInterpreter(ctx context.Context, path string) (*Interpreter, error) {
	how := "WithPython"
	if path == "" {
		path, how = os.Getenv(EnvPython), EnvPython
	}
	if path == "" {
		p, err := exec.LookPath("python3")
		if err != nil {
			return nil, fmt.Errorf("pylayer: no Python interpreter: python3 is not on PATH (name one with %s or the WithPython option)", EnvPython)
		}
		path, how = p, "python3 on PATH"
	}
	if !strings.Contains(path, "/") {
		p, err := exec.LookPath(path)
		if err != nil {
			return nil, fmt.Errorf("pylayer: Python interpreter %q (%s): %w", path, how, err)
		}
		path = p
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("pylayer: Python interpreter %s (%s): %w", path, how, err)
	}
	if !isELF(real) {
		// A version manager's shim: the executable it would run, found without
		// running it (package shim); else ask the interpreter it starts.
		var exe string
		if res, serr := shim.Resolve(abs, shim.Env{}); serr == nil {
			exe = res.Path
		} else if exe, err = askExecutable(ctx, abs); err != nil {
			return nil, fmt.Errorf("pylayer: %s (%s) is not an ELF binary, and running it to find the real interpreter failed: %w", path, how, err)
		}
		if real, err = filepath.EvalSymlinks(exe); err != nil {
			return nil, fmt.Errorf("pylayer: the interpreter %s started by %s: %w", exe, path, err)
		}
		if !isELF(real) {
			return nil, fmt.Errorf("pylayer: %s (started by %s) is not an ELF binary", real, path)
		}
	}
	key, err := fileKey(real)
	if err != nil {
		return nil, err
	}
	info, err := interpInfo(ctx, real, key)
	if err != nil {
		return nil, err
	}
	in := &Interpreter{Path: real, Version: info.Version, Info: *info}
	if err := checkVersion(real, in.Version, MinVersion); err != nil {
		return nil, err
	}
	return in, nil
}

func isELF(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

func fileKey(path string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", fmt.Errorf("pylayer: %s: %w", path, err)
	}
	return fmt.Sprintf("%s|%d|%d|%d|%d", path, st.Dev, st.Ino, st.Size, st.Mtim.Nano()), nil
}

func askExecutable(ctx context.Context, shim string) (string, error) {
	// The shim may be untrusted (planted where a sandbox could write): it runs
	// confined (package hostprobe), with only the variables a version manager
	// reads to choose the interpreter.
	out, err := hostprobe.Run(ctx, hostprobe.Request{
		Path:      shim,
		Args:      []string{shim, "-c", "import sys; print(sys.executable)"},
		Env:       shimEnv(os.Environ()),
		Timeout:   30 * time.Second,
		MaxOutput: 64 << 10,
	})
	if err != nil {
		return "", err
	}
	exe := strings.TrimSpace(string(out))
	if !filepath.IsAbs(exe) {
		return "", fmt.Errorf("it answered sys.executable=%q", exe)
	}
	return exe, nil
}

// shimEnv keeps of env what a version manager's shim reads to choose the
// interpreter: PATH, HOME, the locale and the managers' own variables (no
// credential or other secret of the host's environment).
func shimEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "PATH", k == "HOME", k == "USER", k == "LANG", k == "VIRTUAL_ENV", k == "CONDA_PREFIX",
			strings.HasPrefix(k, "LC_"), strings.HasPrefix(k, "PYENV_"), strings.HasPrefix(k, "ASDF_"),
			strings.HasPrefix(k, "MISE_"), strings.HasPrefix(k, "RTX_"):
			out = append(out, kv)
		}
	}
	return out
}

// interpInfo asks the interpreter about itself, or reads the answer cached on disk
// for this version of its file.
func interpInfo(ctx context.Context, real, key string) (*InterpInfo, error) {
	sum := sha256.Sum256([]byte(key + "\x00" + infoQuery))
	name := "interp-" + hex.EncodeToString(sum[:12]) + ".json"
	dir, derr := diskcache.Dir()
	if derr == nil {
		if data, err := diskcache.Read(dir, name, 1<<20); err == nil {
			var info InterpInfo
			if json.Unmarshal(data, &info) == nil && info.Version[0] != 0 && len(info.Opcodes) == 2 {
				return &info, nil
			}
		}
	}
	// The interpreter may be untrusted (a binary a sandboxed program wrote into a
	// directory its policy exposed read-write): it runs confined (package
	// hostprobe), or only when trusted where it cannot be.
	out, err := hostprobe.Run(ctx, hostprobe.Request{
		Path:      real,
		Args:      []string{real, "-I", "-c", infoQuery},
		Timeout:   30 * time.Second,
		MaxOutput: 1 << 20,
	})
	if err != nil {
		return nil, fmt.Errorf("pylayer: cannot ask the Python interpreter %s about itself: %w", real, err)
	}
	var info InterpInfo
	if err := json.Unmarshal(out, &info); err != nil || info.Version[0] == 0 || len(info.Opcodes) != 2 {
		return nil, fmt.Errorf("pylayer: the Python interpreter %s answered %q", real, out[:min(len(out), 256)])
	}
	if derr == nil {
		_ = diskcache.Write(dir, name, out)
	}
	return &info, nil
}
