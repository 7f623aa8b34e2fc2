package policy

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLearn feeds untrusted observation strings to Learn: it must never panic, and
// when it succeeds the file must load, and hold no line the observations injected
// (every rule line it adds belongs to the family that produced it).
func FuzzLearn(f *testing.F) {
	f.Add("LANG", "data/a.csv", "json", "eval-syntax=arith", "threads")
	f.Add("A\nlearn=false", "x\npython-import=*", "os\nnet=ALLOW|*|*|*|*", "python-api=ALLOW:*", "builtins.eval")
	f.Add("*", "/proc/1/x", "_x", "# comment\nexpose-rw=/", "os.system")
	f.Add("${X}", "a#b/c", "a.b", "eval-timeout=1s", "\x00")
	f.Fuzz(func(t *testing.T, env, file, module, eval, api string) {
		e := newLearnEnv(t)
		e.mkdir("proj/data")
		obs := Observations{
			Env:     []string{env},
			Files:   []FileAccess{{Path: file}, {Path: file, Write: true, Dir: true}},
			Imports: []string{module},
			Eval:    []string{eval},
			API:     []string{api},
		}
		res, err := e.learn(obs)
		if err != nil {
			// Only a bad eval-* line proposed by the guard may make the merged file
			// fail to load; everything else Learn generates must load.
			obs.Eval = nil
			if res, err = e.learn(obs); err != nil {
				t.Fatalf("Learn without eval lines: %v", err)
			}
		}
		path := filepath.Join(e.dir, DefaultName)
		e.mustLoad(path)
		for _, l := range res.Added {
			key, _, _ := strings.Cut(l, "=")
			switch key {
			case "env", "expose-ro", "expose-rw", "python-import", "python-api":
			default:
				if !strings.HasPrefix(key, "eval-") {
					t.Errorf("unexpected rule added: %q", l)
				}
			}
			if l == "python-api=ALLOW:*" || l == "python-import=*" || l == "expose-rw=/" {
				t.Errorf("a wildcard grant was injected: %q", l)
			}
		}
	})
}
