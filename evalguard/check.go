package evalguard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/pysandboxes/pysandboxes/internal/diskcache"
	"github.com/pysandboxes/pysandboxes/internal/hostprobe"
)

// Mode is how a source is parsed: an expression (Eval) or statements (Exec).
type Mode string

// The modes.
const (
	Eval Mode = "eval"
	Exec Mode = "exec"
)

// Bounds of a check run.
const (
	// checkerMemory is the address-space limit of a checker process.
	checkerMemory = 1 << 30
	// maxVerdict bounds what a checker process may answer.
	maxVerdict = 64 << 20
)

// Check gives the static verdict of src under the profile p: it runs the embedded
// checker with the Python interpreter python (a real CPython 3.11 or later, not a
// version manager's shim), which parses src with CPython's own parser, checks every
// rule, rewrites and compiles it, and reports every violation at once. Nothing of
// src runs.
//
// Each call starts one short-lived interpreter (-I -S, an empty environment, 1 GiB
// of address space), confined read-only by package internal/hostprobe (the
// interpreter named may be untrusted): about the start of the interpreter plus a millisecond; the
// guard module is compiled once per interpreter and kept in the per-user cache. A
// Checker keeps the compiled module in memory as well.
//
// A source holding a NUL byte or invalid UTF-8 gives a *SourceError; a source longer
// than the profile accepts gives a "size" violation without starting Python.
func Check(ctx context.Context, python string, p *Profile, src string, mode Mode) (*Verdict, error) {
	return NewChecker(python).Check(ctx, p, src, mode)
}

// Checker runs the checks of one interpreter; it keeps the compiled guard module.
// It is safe for concurrent use.
type Checker struct {
	python string

	mu    sync.Mutex
	tried bool   // a compilation ran to its end (successful or not)
	code  []byte // marshalled code of the module, nil when it could not be compiled ahead
}

// NewChecker returns a Checker running the interpreter python.
func NewChecker(python string) *Checker { return &Checker{python: python} }

// Check is the package's Check with the checker's interpreter.
func (c *Checker) Check(ctx context.Context, p *Profile, src string, mode Mode) (*Verdict, error) {
	if mode != Eval && mode != Exec {
		return nil, fmt.Errorf("evalguard: mode %q: expected eval or exec", mode)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if c.python == "" {
		return nil, errors.New("evalguard: no Python interpreter")
	}
	if err := CheckSource(src); err != nil {
		return nil, err
	}
	if v := p.sizeViolation(utf8.RuneCountInString(src)); v != nil {
		return &Verdict{Violations: []Violation{*v}}, nil
	}
	in := map[string]any{"src": src, "profile": p.Python(), "mode": string(mode), "mem": int64(checkerMemory)}
	if code := c.moduleCode(ctx); code != nil {
		in["code"] = code
	} else {
		in["module"] = Source()
	}
	data, err := marshal(in)
	if err != nil {
		return nil, err
	}
	// The checker runs confined (package hostprobe): the interpreter may be
	// untrusted, and what it parses is.
	python, err := lookPath(c.python)
	if err != nil {
		return nil, fmt.Errorf("evalguard: the checker %s: %w", c.python, err)
	}
	out, err := hostprobe.Run(ctx, hostprobe.Request{Path: python, Args: []string{python, "-I", "-S", "-c", checkDriver},
		Stdin: data, Timeout: checkTimeout, MaxOutput: maxVerdict})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("evalguard: check: %w", ctx.Err())
		}
		return nil, fmt.Errorf("evalguard: the checker %s failed: %w", c.python, err)
	}
	var res struct {
		Violations []struct {
			Line, Col                         int
			Kind, Name, Message, Fix, Warning string
		} `json:"violations"`
		Error *string `json:"error"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, fmt.Errorf("evalguard: malformed answer of the checker: %w", err)
	}
	if res.Error != nil {
		return nil, fmt.Errorf("evalguard: the checker refused its input: %s", *res.Error)
	}
	v := &Verdict{OK: len(res.Violations) == 0}
	for _, x := range res.Violations {
		v.Violations = append(v.Violations, Violation{Line: x.Line, Col: x.Col, Kind: x.Kind, Name: x.Name,
			Message: x.Message, Fix: x.Fix, Warning: x.Warning})
	}
	return v, nil
}

// moduleCode returns the compiled module, compiling it on first use (a
// compilation cut short by ctx is tried again by the next check).
func (c *Checker) moduleCode(ctx context.Context) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.tried {
		c.code = compiledModule(ctx, c.python)
		c.tried = c.code != nil || ctx.Err() == nil
	}
	return c.code
}

// CheckSource reports a source no interpreter should be handed: one holding a NUL
// byte or invalid UTF-8 (a *SourceError naming the byte offset).
func CheckSource(src string) error {
	if i := strings.IndexByte(src, 0); i >= 0 {
		return &SourceError{Offset: i, Reason: "the source holds a NUL byte"}
	}
	if !utf8.ValidString(src) {
		for i := 0; i < len(src); {
			r, n := utf8.DecodeRuneInString(src[i:])
			if r == utf8.RuneError && n <= 1 {
				return &SourceError{Offset: i, Reason: "the source is not valid UTF-8"}
			}
			i += n
		}
	}
	return nil
}

// checkDriver runs one check: stdin is a marshalled dict {code | module, src,
// profile, mode, mem}; stdout is the JSON {"violations": [...]} or {"error": str}.
const checkDriver = `import sys, marshal
d = marshal.loads(sys.stdin.buffer.read())
try:
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (d['mem'], d['mem']))
except Exception:
    pass
m = type(sys)('pysandboxes_evalguard')
sys.modules['pysandboxes_evalguard'] = m
c = marshal.loads(d['code']) if 'code' in d else compile(d['module'], '<pysandboxes_evalguard>', 'exec', dont_inherit=True)
exec(c, m.__dict__)
try:
    out = {'violations': m.check(d['src'], d['profile'], d['mode'])}
except MemoryError:
    out = {'violations': [{'line': 0, 'col': 0, 'kind': 'size', 'name': 'eval-max-nodes', 'fix': '',
                           'message': 'checking the source exhausted the memory of the checker'}]}
except (TypeError, ValueError) as e:
    out = {'error': '%s: %s' % (type(e).__name__, e)}
sys.stdout.write(m.to_json(out))
`

const compileModule = `import sys, marshal
sys.stdout.buffer.write(marshal.dumps(compile(sys.stdin.read(), '<pysandboxes_evalguard>', 'exec', dont_inherit=True)))
`

// compiledModule returns the marshalled code of the module for python, from the
// per-user cache or compiled by the interpreter (and cached); nil when that fails
// (the checker then compiles the source itself).
func compiledModule(ctx context.Context, python string) []byte {
	src := Source()
	real, err := filepath.EvalSymlinks(python)
	if err != nil {
		return nil
	}
	st, err := os.Stat(real)
	if err != nil {
		return nil
	}
	sum := sha256.Sum256([]byte(real + "|" + strconv.FormatInt(st.Size(), 10) + "|" + strconv.FormatInt(st.ModTime().UnixNano(), 10) + "|" + src))
	name := "evalguard-" + hex.EncodeToString(sum[:12]) + ".marshal"
	dir, derr := diskcache.Dir()
	if derr == nil {
		if data, err := diskcache.Read(dir, name, 8<<20); err == nil && len(data) > 0 {
			return data
		}
	}
	out, err := hostprobe.Run(ctx, hostprobe.Request{Path: real, Args: []string{real, "-I", "-S", "-c", compileModule},
		Stdin: []byte(src), Timeout: checkTimeout, MaxOutput: 8 << 20})
	if err != nil || len(out) == 0 {
		return nil
	}
	if derr == nil {
		_ = diskcache.Write(dir, name, out)
	}
	return out
}

// checkTimeout bounds one run of the checker's interpreter (the caller's context
// may end it sooner).
const checkTimeout = 60 * time.Second

// lookPath returns python as an absolute path, looked up on PATH when it is a
// bare name.
func lookPath(python string) (string, error) {
	if !strings.Contains(python, "/") {
		return exec.LookPath(python)
	}
	return filepath.Abs(python)
}
