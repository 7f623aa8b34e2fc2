package evalguard

import (
	"testing"
	"time"
)

// readyHarness runs the module's ready(): the state of one evaluation made
// before its source is known.
const readyHarness = `import sys, marshal, time
out, sys.stdout = sys.stdout, sys.stderr
d = marshal.loads(sys.stdin.buffer.read())
m = type(sys)('pysandboxes_evalguard')
sys.modules['pysandboxes_evalguard'] = m
exec(compile(d['module'], '<pysandboxes_evalguard>', 'exec', dont_inherit=True), m.__dict__)
P = d['profile']
res = {}
def outcome(f):
    try:
        return 'value ' + repr(f())
    except m.Rejected as e:
        return 'rejected ' + ','.join(v['kind'] for v in e.violations)
    except m.Interrupted as e:
        return 'interrupted ' + e.budget
    except m.Denied as e:
        return 'denied ' + e.kind
    except BaseException as e:
        return 'error ' + type(e).__name__ + ': ' + str(e)
r = m.ready(P)
time.sleep(0.6)  # longer than the timeout: the budgets start at the call
res['late'] = outcome(lambda: r('len([i for i in range(100)]) + n', {'n': 1}))
res['again'] = outcome(lambda: r('1'))
res['attr'] = outcome(lambda: m.ready(P)('n.real', {'n': 1}))
res['open'] = outcome(lambda: m.ready(P)('open("/etc/passwd")'))
res['loop'] = outcome(lambda: m.ready(P)('[i for i in range(10**6)]'))
res['exec'] = outcome(lambda: m.ready(P)('y = len("abc")', None, 'exec'))
res['mode'] = outcome(lambda: m.ready(P)('1', None, 'single'))
out.write(m.to_json(res))
`

// TestReadyServesOneEvaluation: ready() makes an evaluation's state ahead;
// the evaluation it serves is checked, rewritten and bounded as run's (a
// refused attribute, a refused builtin, the iteration budget), its budgets
// count from the call, not from ready(), and it serves one evaluation only.
func TestReadyServesOneEvaluation(t *testing.T) {
	needPython(t)
	prof := profileOf(t, "eval-syntax=arith, Call, comprehension, assign\neval-call=sum, range, len\neval-timeout=0.3s\neval-max-iterations=1000\n", "").Python()
	var res map[string]string
	runScript(t, time.Minute, readyHarness, map[string]any{"module": Source(), "profile": prof}, &res, "-I", "-S")
	want := map[string]string{
		"late":  "value 101",
		"again": "error RuntimeError: eval guard: a state made by ready() serves one evaluation",
		"attr":  "rejected attribute",
		"open":  "rejected call",
		"loop":  "interrupted eval-max-iterations",
		"exec":  "value {'y': 3}",
		"mode":  "error ValueError: eval guard: mode must be 'eval' or 'exec', not 'single'",
	}
	for k, w := range want {
		if res[k] != w {
			t.Errorf("%s: %q, want %q", k, res[k], w)
		}
	}
}
