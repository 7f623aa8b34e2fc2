package evalguard

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes/policy"
)

// realPython is the interpreter the tests run the guard in: /usr/bin/python3,
// or the one EVALGUARD_TEST_PYTHON names (to run the matrices under another
// CPython, 3.11 or later).
var realPython = testPython()

func testPython() string {
	if p := os.Getenv("EVALGUARD_TEST_PYTHON"); p != "" {
		return p
	}
	return "/usr/bin/python3"
}

func needPython(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(realPython); err != nil {
		t.Skip("no " + realPython + ": the Python side of the guard cannot be run")
	}
}

// parsePolicy parses rule text as a .py-sandboxes file.
func parsePolicy(t testing.TB, text string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse(context.Background(), "/test/.py-sandboxes", []byte(text),
		&policy.Options{Dir: t.TempDir(), Home: "/nonexistent-home", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("policy %q: %v", text, err)
	}
	return p
}

// profileOf returns the profile name of rule text.
func profileOf(t testing.TB, rules, name string) *Profile {
	t.Helper()
	p, err := FromPolicy(parsePolicy(t, rules), name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runCase is one source run through the module's run() in a real interpreter.
type runCase struct {
	ID      string
	Profile map[string]any
	Src     string
	Mode    string
	// Names is a Python expression giving the names, "" for none (test fixtures:
	// O, string, Formatter, Liar, X, suppress, Proxy, Point, Secret, Box, NT).
	Names string
}

// runOutcome is what run() did.
type runOutcome struct {
	ID         string         `json:"id"`
	Outcome    string         `json:"outcome"` // value, rejected, denied, interrupted, nameerror, error
	Value      string         `json:"value"`
	Kind       string         `json:"kind"`
	Target     string         `json:"target"`
	Rule       string         `json:"rule"`
	Fix        string         `json:"fix"`
	Budget     string         `json:"budget"`
	Type       string         `json:"type"`
	Message    string         `json:"message"`
	Violations []violationOut `json:"violations"`
}

// violationOut is a violation as run() reports it.
type violationOut struct {
	Kind, Name, Fix string
}

// runHarness runs the cases, one interpreter for all of them.
const runHarness = `import sys, marshal, string, contextlib, dataclasses, collections, resource
from concurrent.futures import ThreadPoolExecutor
# An allocation the guard failed to bound fails its case, not the run; what
# evaluated code prints goes to stderr, away from the outcomes.
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
out, sys.stdout = sys.stdout, sys.stderr
d = marshal.loads(sys.stdin.buffer.read())
m = type(sys)('pysandboxes_evalguard')
sys.modules['pysandboxes_evalguard'] = m
exec(compile(d['module'], '<pysandboxes_evalguard>', 'exec', dont_inherit=True), m.__dict__)
class O:
    pass
class Liar(string.Formatter):
    def parse(self, s):
        yield ('', '0.__class__', '', None)
class Proxy:
    def __init__(self, target):
        self._target = target
    def __getattr__(self, name):
        return getattr(self._target, name)
@dataclasses.dataclass
class Point:
    x: int
    y: int
@dataclasses.dataclass
class Secret:
    name: str
    _token: str
@dataclasses.dataclass
class Box:
    items: list
X = ThreadPoolExecutor(1)
fixtures = {'O': O, 'string': string, 'Formatter': string.Formatter, 'Liar': Liar, 'X': X,
            'suppress': contextlib.suppress, 'Proxy': Proxy, 'Point': Point, 'Secret': Secret, 'Box': Box,
            'NT': collections.namedtuple('NT', 'a b')}
res = []
for c in d['cases']:
    r = {'id': c['id']}
    try:
        names = eval(c['names'], dict(fixtures)) if c['names'] else None
        v = m.run(c['src'], names, c['profile'], c['mode'])
        if c['mode'] == 'exec':
            v = {k: x for k, x in v.items() if not callable(x) and not isinstance(x, type(sys))}
        r.update(outcome='value', value=repr(v)[:10000])
    except m.Rejected as e:
        r.update(outcome='rejected', violations=e.violations, message=str(e))
    except m.Denied as e:
        r.update(outcome='denied', kind=e.kind, target=e.target, rule=e.rule, fix=e.fix, message=str(e))
    except m.Interrupted as e:
        r.update(outcome='interrupted', budget=e.budget, message=str(e))
    except NameError as e:
        r.update(outcome='nameerror', message=str(e))
    except BaseException as e:
        r.update(outcome='error', type=type(e).__name__, message=str(e))
    res.append(r)
X.shutdown(wait=False)
out.write(m.to_json(res))
`

// runAll runs cases through the module's run() and returns the outcomes by id.
func runAll(t *testing.T, cases []runCase) map[string]runOutcome {
	t.Helper()
	needPython(t)
	list := make([]any, len(cases))
	for i, c := range cases {
		mode := c.Mode
		if mode == "" {
			mode = "eval"
		}
		list[i] = map[string]any{"id": c.ID, "src": c.Src, "mode": mode, "names": c.Names, "profile": c.Profile}
	}
	var res []runOutcome
	runScript(t, 2*time.Minute, runHarness, map[string]any{"module": Source(), "cases": list}, &res, "-I")
	m := map[string]runOutcome{}
	for _, r := range res {
		m[r.ID] = r
	}
	return m
}

// freshHarness runs one case in an interpreter that has loaded nothing but the
// guard: the modules the case uses are loaded by the evaluation itself.
const freshHarness = `import sys, marshal
out, sys.stdout = sys.stdout, sys.stderr
d = marshal.loads(sys.stdin.buffer.read())
m = type(sys)('pysandboxes_evalguard')
sys.modules['pysandboxes_evalguard'] = m
exec(compile(d['module'], '<pysandboxes_evalguard>', 'exec', dont_inherit=True), m.__dict__)
c = d['case']
before = sorted(n for n in ('string', 'logging', 'typing') if n in sys.modules)
r = {'id': c['id'], 'type': ','.join(before)}
try:
    names = eval(c['names'], {}) if c['names'] else None
    v = m.run(c['src'], names, c['profile'], c['mode'])
    if c['mode'] == 'exec':
        v = {k: x for k, x in v.items() if not callable(x) and not isinstance(x, type(sys))}
    r.update(outcome='value', value=repr(v))
except m.Rejected as e:
    r.update(outcome='rejected', violations=e.violations, message=str(e))
except m.Denied as e:
    r.update(outcome='denied', kind=e.kind, target=e.target, rule=e.rule, fix=e.fix, message=str(e))
except m.Interrupted as e:
    r.update(outcome='interrupted', budget=e.budget, message=str(e))
except BaseException as e:
    r.update(outcome='error', type=type(e).__name__, message=str(e))
out.write(m.to_json(r))
`

// runFresh runs each case in its own interpreter (freshHarness); the outcome's
// Type lists which of string, logging and typing were loaded before the run.
func runFresh(t *testing.T, c runCase) runOutcome {
	t.Helper()
	needPython(t)
	mode := c.Mode
	if mode == "" {
		mode = "eval"
	}
	var r runOutcome
	runScript(t, time.Minute, freshHarness, map[string]any{"module": Source(),
		"case": map[string]any{"id": c.ID, "src": c.Src, "mode": mode, "names": c.Names, "profile": c.Profile}}, &r, "-I", "-S")
	return r
}

// runScript runs a harness script with the real interpreter (flags before
// -c), the marshalled input on its stdin, and decodes its JSON output into
// out.
func runScript(t testing.TB, timeout time.Duration, script string, input map[string]any, out any, flags ...string) {
	t.Helper()
	data, err := marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, realPython, append(flags, "-c", script)...)
	cmd.Stdin = strings.NewReader(string(data))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("harness: %v: %s", err, stderr.String())
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("harness output %q: %v", b, err)
	}
}
