package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// diffEnv parses two profiles in one coreEnv and diffs them, the home directory
// of the env being the home of the grading.
func diffTexts(t *testing.T, e *coreEnv, before, after string) *Changes {
	t.Helper()
	b := e.mustParse(before)
	a := e.mustParse(after)
	return Diff(b, a, &DiffOptions{Home: e.home})
}

// wantGrant asserts that c holds a grant named grant of risk r whose reason
// contains every part of why.
func wantGrant(t *testing.T, c *Changes, grant string, r Risk, why ...string) Grant {
	t.Helper()
	found := false
next:
	for _, g := range c.Grants {
		if g.Grant != grant {
			continue
		}
		found = true
		for _, w := range why {
			if !strings.Contains(g.Reason, w) {
				continue next
			}
		}
		if g.Risk != r {
			t.Errorf("grant %s: risk %s, want %s (%s)", grant, g.Risk, r, g.Reason)
		}
		if g.Reason == "" || g.Family == "" {
			t.Errorf("grant %s without reason or family: %#v", grant, g)
		}
		return g
	}
	if found {
		t.Errorf("no grant %s saying %q in:\n%s", grant, why, showGrants(c))
	} else {
		t.Errorf("no grant %s in:\n%s", grant, showGrants(c))
	}
	return Grant{}
}

func showGrants(c *Changes) string {
	var b strings.Builder
	for _, g := range c.Grants {
		fmt.Fprintf(&b, "  %-6s %-30s %s\n", g.Risk, g.Grant, g.Reason)
	}
	return b.String()
}

func wantNoGrants(t *testing.T, c *Changes) {
	t.Helper()
	if len(c.Grants) != 0 {
		t.Errorf("want no grant, got:\n%s", showGrants(c))
	}
	if c.Highest() != RiskNone {
		t.Errorf("Highest = %s, want none", c.Highest())
	}
}

// TestDiffFiles: expose-ro/expose-rw, graded by the directory and the mode; a
// widening by the parent directory or by a stronger mode is a grant, a rule
// already covered is not.
func TestDiffFiles(t *testing.T) {
	e := newCoreEnv(t)
	e.mkdir("data/sub", "out", "~/.ssh", "~/proj")
	t.Run("new read-only data directory is low", func(t *testing.T) {
		c := diffTexts(t, e, "", "expose-ro=./data\n")
		wantGrant(t, c, "expose-ro=./data", RiskLow, "read-only")
	})
	t.Run("expose-rw=/ is high", func(t *testing.T) {
		c := diffTexts(t, e, "expose-ro=/usr\n", "expose-ro=/usr\nexpose-rw=/\n")
		wantGrant(t, c, "expose-rw=/", RiskHigh, "whole file system")
		if c.Highest() != RiskHigh {
			t.Errorf("Highest = %s", c.Highest())
		}
	})
	t.Run("read-write directory is medium", func(t *testing.T) {
		c := diffTexts(t, e, "", "expose-rw=./out\n")
		wantGrant(t, c, "expose-rw=./out", RiskMedium, "create, write")
	})
	t.Run("read-only to read-write is a widening", func(t *testing.T) {
		c := diffTexts(t, e, "expose-ro=./out\n", "expose-rw=./out\n")
		wantGrant(t, c, "expose-rw=./out", RiskMedium, "read-write (read-only before")
	})
	t.Run("the parent of an exposed directory", func(t *testing.T) {
		c := diffTexts(t, e, "expose-ro=./data/sub\n", "expose-ro=./data/sub\nexpose-rw=./data\n")
		g := wantGrant(t, c, "expose-rw=./data", RiskMedium)
		if g.Rule.Ref.Line != 2 {
			t.Errorf("grant rule %v, want line 2", g.Rule.Ref)
		}
		// data/sub stays read-only: its own rule is deeper.
		if n := c.Count(RiskMedium); n != 1 {
			t.Errorf("%d medium grants, want 1:\n%s", n, showGrants(c))
		}
	})
	t.Run("a parent replacing a deeper read-only rule", func(t *testing.T) {
		c := diffTexts(t, e, "expose-ro=./data/sub\n", "expose-rw=./data\n")
		wantGrant(t, c, "expose-rw=./data", RiskMedium, "kept it read-only")
	})
	t.Run("the home directory read-only is high", func(t *testing.T) {
		c := diffTexts(t, e, "", "expose-ro=~\n")
		wantGrant(t, c, "expose-ro=~", RiskHigh, "home directory")
	})
	t.Run("a directory holding the home is high", func(t *testing.T) {
		c := diffTexts(t, e, "", "expose-ro="+filepath.Dir(e.home)+"\n")
		wantGrant(t, c, "expose-ro="+filepath.Dir(e.home), RiskHigh, "holding the home")
	})
	t.Run("credentials are high", func(t *testing.T) {
		c := diffTexts(t, e, "", "expose-ro=~/.ssh\n")
		wantGrant(t, c, "expose-ro=~/.ssh", RiskHigh, "~/.ssh")
	})
	t.Run("a project under home is not credentials", func(t *testing.T) {
		c := diffTexts(t, e, "", "expose-ro=~/proj\n")
		wantGrant(t, c, "expose-ro=~/proj", RiskLow)
	})
	t.Run("system directories", func(t *testing.T) {
		c := diffTexts(t, e, "", "expose-ro=/etc\nexpose-ro=/run\nexpose-rw=/usr\nexpose-rw=/dev/shm\nexpose-ro=/proc\n")
		wantGrant(t, c, "expose-ro=/etc", RiskMedium, "configuration")
		wantGrant(t, c, "expose-ro=/run", RiskHigh, "sockets")
		wantGrant(t, c, "expose-rw=/usr", RiskHigh, "system directory")
		wantGrant(t, c, "expose-rw=/dev/shm", RiskMedium, "temporary")
		wantGrant(t, c, "expose-ro=/proc", RiskMedium, "processes")
	})
	t.Run("re-spelled or covered grants nothing", func(t *testing.T) {
		wantNoGrants(t, diffTexts(t, e, "expose-ro="+e.path("data")+"\n", "expose-ro=./data\n"))
		wantNoGrants(t, diffTexts(t, e, "expose-rw=./data\n", "expose-rw=./data\nexpose-ro=./data/sub\n"))
		wantNoGrants(t, diffTexts(t, e, "expose-rw=./data\n", "expose-ro=./data\n"))
	})
	t.Run("an include is seen by its rules", func(t *testing.T) {
		inc := e.write("inc.rules", "expose-rw=./out\n")
		c := diffTexts(t, e, "", "include \""+inc+"\"\n")
		wantGrant(t, c, "expose-rw=./out", RiskMedium)
		wantGrant(t, c, `include "inc.rules"`, RiskMedium, "later change")
	})
}

// TestDiffIgnore: removing an ignore= pattern, or changing it, shows what it hid.
func TestDiffIgnore(t *testing.T) {
	e := newCoreEnv(t)
	e.mkdir("data")
	c := diffTexts(t, e, "expose-ro=./data\nignore=*.key\n", "expose-ro=./data\n")
	g := wantGrant(t, c, "-ignore=*.key", RiskMedium, "become visible")
	if !g.Removed || g.Family != FamilyIgnore {
		t.Errorf("grant %#v: want Removed in family ignore", g)
	}
	// A narrower pattern drops the old one: reviewed as a removal.
	c = diffTexts(t, e, "expose-ro=./data\nignore=*.key\n", "expose-ro=./data\nignore=id_rsa.key\n")
	wantGrant(t, c, "-ignore=*.key", RiskMedium)
	wantNoGrants(t, diffTexts(t, e, "ignore=*.key\n", "ignore=*.key\nignore=*.pem\n"))
}

// TestDiffEnv: env= graded by the variable and what it copies; an unenv=
// removed is a grant; a pattern copying the host's values is high.
func TestDiffEnv(t *testing.T) {
	e := newCoreEnv(t, "API_TOKEN=t", "LANG=C", "HOME=/h")
	cases := []struct {
		before, after, grant string
		risk                 Risk
		why                  string
	}{
		{"", "env=LANG=C.UTF-8\n", "env=LANG=C.UTF-8", RiskLow, "fixed value"},
		{"", "env=LANG=${LANG}\n", "env=LANG=${LANG}", RiskLow, "copies"},
		{"", "env=API_TOKEN=${API_TOKEN}\n", "env=API_TOKEN=${API_TOKEN}", RiskMedium, "secret"},
		{"", "env=LD_PRELOAD=/tmp/x.so\n", "env=LD_PRELOAD=/tmp/x.so", RiskHigh, "dynamic loader"},
		{"", "env=PYTHONPATH=/tmp\n", "env=PYTHONPATH=/tmp", RiskMedium, "finds code"},
		{"", "env=*=${*}\n", "env=*=${*}", RiskHigh, "every host variable"},
		{"env=LANG=C\n", "env=LANG=fr\n", "env=LANG=fr", RiskLow, "(C before)"},
	}
	for _, tc := range cases {
		t.Run(tc.grant, func(t *testing.T) {
			c := diffTexts(t, e, tc.before, tc.after)
			g := wantGrant(t, c, tc.grant, tc.risk, tc.why)
			if g.Family != FamilyEnv {
				t.Errorf("family %q", g.Family)
			}
		})
	}
	t.Run("unenv removed", func(t *testing.T) {
		c := diffTexts(t, e, "env=API_*=${API_*}\nunenv=API_TOKEN\n", "env=API_*=${API_*}\n")
		if len(c.Grants) == 0 {
			t.Fatalf("removing unenv=API_TOKEN grants nothing")
		}
		if c.Highest() < RiskMedium {
			t.Errorf("Highest %s, want at least medium:\n%s", c.Highest(), showGrants(c))
		}
	})
	wantNoGrants(t, diffTexts(t, e, "env=LANG=C\n", "env=LANG=C\n"))
	wantNoGrants(t, diffTexts(t, e, "env=LANG=C\n", "unenv=LANG\n"))
}

// TestDiffNet: net= compared by what it allows, DENY first.
func TestDiffNet(t *testing.T) {
	e := newCoreEnv(t)
	c := diffTexts(t, e, "", "net=ALLOW|*|*|*|OUT\n")
	wantGrant(t, c, "net=ALLOW|*|*|*|OUT", RiskHigh, "any host")
	c = diffTexts(t, e, "", "net=ALLOW|tcp|192.0.2.10|443|OUT\n")
	wantGrant(t, c, "net=ALLOW|tcp|192.0.2.10|443|OUT", RiskMedium, "port 443")
	c = diffTexts(t, e, "", "net=ALLOW|tcp|pinned.test|443|OUT\n")
	wantGrant(t, c, "net=ALLOW|tcp|pinned.test|443|OUT", RiskMedium, "192.0.2.10")
	c = diffTexts(t, e, "", "net=ALLOW|tcp|0.0.0.0/0|8080|IN\n")
	wantGrant(t, c, "net=ALLOW|tcp|0.0.0.0/0|8080|IN", RiskHigh, "listen")
	// Widening by a port range and by a prefix.
	c = diffTexts(t, e, "net=ALLOW|tcp|192.0.2.10|443|OUT\n", "net=ALLOW|tcp|192.0.2.0/24|443-444|OUT\n")
	wantGrant(t, c, "net=ALLOW|tcp|192.0.2.0/24|443-444|OUT", RiskMedium)
	// Removing a DENY opens what it refused.
	c = diffTexts(t, e, "net=DENY|tcp|10.0.0.0/8|*|OUT\nnet=ALLOW|tcp|*|*|OUT\n", "net=ALLOW|tcp|*|*|OUT\n")
	wantGrant(t, c, "net=ALLOW|tcp|*|*|OUT", RiskHigh, "10.0.0.0/8")
	// Covered, or re-spelled: nothing.
	wantNoGrants(t, diffTexts(t, e, "net=ALLOW|tcp|*|*|OUT\n", "net=ALLOW|tcp|*|*|OUT\nnet=ALLOW|tcp|192.0.2.10|443|OUT\n"))
	wantNoGrants(t, diffTexts(t, e, "net=ALLOW|tcp|192.0.2.10|443|OUT\n", "net=ALLOW|tcp|pinned.test|443|OUT\n"))
	wantNoGrants(t, diffTexts(t, e, "", "net=DENY|*|*|*|OUT\n"))
}

// TestDiffImport: python-import= graded by the module.
func TestDiffImport(t *testing.T) {
	e := newCoreEnv(t)
	c := diffTexts(t, e, "python-import=json\n", "python-import=json, ctypes, csv, _ctypes\n")
	wantGrant(t, c, "python-import=ctypes", RiskHigh, "dangerous")
	wantGrant(t, c, "python-import=_ctypes", RiskHigh, "native")
	wantGrant(t, c, "python-import=csv", RiskLow)
	for _, g := range c.Grants {
		if g.Grant == "python-import=json" {
			t.Errorf("json was allowed before: %#v", g)
		}
	}
	c = diffTexts(t, e, "python-import=json\n", "python-import=*\n")
	wantGrant(t, c, "python-import=*", RiskHigh, "every module")
	wantNoGrants(t, diffTexts(t, e, "python-import=*\n", "python-import=ctypes\n"))
}

// TestDiffAPI: python-api= compared function by function, a removed DENY
// included.
func TestDiffAPI(t *testing.T) {
	e := newCoreEnv(t)
	c := diffTexts(t, e, "", "python-api=ALLOW:process-exec\n")
	wantGrant(t, c, "python-api=ALLOW:process-exec", RiskHigh, "os.execl")
	c = diffTexts(t, e, "", "python-api=ALLOW:os.system\n")
	wantGrant(t, c, "python-api=ALLOW:os.system", RiskHigh, "process-exec")
	c = diffTexts(t, e, "", "python-api=ALLOW:*\n")
	wantGrant(t, c, "python-api=ALLOW:*", RiskHigh, "every sensitive function")
	// Removing the DENY of a function under an allowed category.
	c = diffTexts(t, e, "python-api=ALLOW:process-exec\npython-api=DENY:os.system\n", "python-api=ALLOW:process-exec\n")
	wantGrant(t, c, "python-api=ALLOW:process-exec", RiskHigh, "os.system")
	for _, g := range c.Grants {
		if strings.Contains(g.Reason, "os.execl") {
			t.Errorf("os.execl was allowed before: %s", g.Reason)
		}
	}
	// A function already allowed by its category grants nothing.
	wantNoGrants(t, diffTexts(t, e, "python-api=ALLOW:process-exec\n", "python-api=ALLOW:process-exec\npython-api=ALLOW:os.system\n"))
}

// TestDiffEval: the eval-* keys, by profile and by name.
func TestDiffEval(t *testing.T) {
	e := newCoreEnv(t)
	c := diffTexts(t, e, "", "eval-call=__import__\n")
	wantGrant(t, c, "eval-call=__import__", RiskHigh, "__import__")
	c = diffTexts(t, e, "eval-call=len\n", "eval-call=len, sorted\n")
	wantGrant(t, c, "eval-call=sorted", RiskLow)
	c = diffTexts(t, e, "eval-call=len\n", "eval-call=len, getattr\n")
	wantGrant(t, c, "eval-call=getattr", RiskMedium)
	c = diffTexts(t, e, "eval-call=len\n", "eval-call=*\n")
	wantGrant(t, c, "eval-call=*", RiskHigh)
	c = diffTexts(t, e, "eval-call=len\n", "eval-call=len\neval-magic=__subclasses__\n")
	wantGrant(t, c, "eval-magic=__subclasses__", RiskHigh, "type hierarchy")
	c = diffTexts(t, e, "eval-call=len\n", "eval-call=len\neval-import=subprocess\n")
	wantGrant(t, c, "eval-import=subprocess", RiskHigh, "dangerous")
	c = diffTexts(t, e, "eval-call=len\n", "eval-call=len\neval-namespace=caller\n")
	wantGrant(t, c, "eval-namespace=caller", RiskHigh, "raw builtins")
	c = diffTexts(t, e, "eval-call=len\neval-timeout=1s\n", "eval-call=len\neval-timeout=10s\n")
	wantGrant(t, c, "eval-timeout=10s", RiskLow, "budget")
	// A named profile is compared with the profile of the same name.
	c = diffTexts(t, e, "eval-call:calc=len\n", "eval-call:calc=len\neval-call:tools=open\n")
	wantGrant(t, c, "eval-call:tools=open", RiskHigh)
	wantNoGrants(t, diffTexts(t, e, "eval-call=len, sorted\n", "eval-call=sorted\n"))
	wantNoGrants(t, diffTexts(t, e, "eval-call=len\neval-timeout=10s\n", "eval-call=len\neval-timeout=1s\n"))
}

// TestDiffControl: os-sandbox, py-sandbox, learn, the result channel, the lock.
func TestDiffControl(t *testing.T) {
	e := newCoreEnv(t)
	c := diffTexts(t, e, "os-sandbox=landlock\n", "os-sandbox=none\n")
	wantGrant(t, c, "os-sandbox=none", RiskHigh, "no sandbox")
	c = diffTexts(t, e, "os-sandbox=landlock\n", "os-sandbox=subprocess\n")
	wantGrant(t, c, "os-sandbox=subprocess", RiskHigh, "Python layer alone")
	c = diffTexts(t, e, "", "py-sandbox=false\n")
	wantGrant(t, c, "py-sandbox=false", RiskHigh, "Python layer off")
	c = diffTexts(t, e, "", "remote-result-guard=false\n")
	wantGrant(t, c, "remote-result-guard=false", RiskHigh)
	c = diffTexts(t, e, "", "remote-result-mode=objects\n")
	wantGrant(t, c, "remote-result-mode=objects", RiskHigh)
	c = diffTexts(t, e, "learn=false\n", "")
	wantGrant(t, c, "-learn=false", RiskHigh, "lock")
	wantNoGrants(t, diffTexts(t, e, "os-sandbox=none\n", "os-sandbox=landlock\n"))
	wantNoGrants(t, diffTexts(t, e, "", "learn=false\n"))
}

// TestDiffProviders: a new provider parameter, and a removed one (a limit gone).
func TestDiffProviders(t *testing.T) {
	e := newCoreEnv(t)
	c := diffTexts(t, e, "firejail.rlimit-as=600m\n", "firejail.rlimit-as=6g\n")
	wantGrant(t, c, "firejail.rlimit-as=6g", RiskMedium, "resource limit")
	c = diffTexts(t, e, "firejail.rlimit-as=600m\n", "")
	g := wantGrant(t, c, "-firejail.rlimit-as=600m", RiskMedium, "removed")
	if !g.Removed {
		t.Errorf("grant %#v is not Removed", g)
	}
	wantNoGrants(t, diffTexts(t, e, "firejail.rlimit-as=600m\n", "firejail.rlimit-as=600m\n"))
}

// TestDiffOrderAndJSON: riskiest first, the grades render as words, and a
// profile diffed with itself grants nothing.
func TestDiffOrderAndJSON(t *testing.T) {
	e := newCoreEnv(t)
	e.mkdir("data")
	after := "expose-ro=./data\npython-import=json\nexpose-rw=/\n"
	c := diffTexts(t, e, "", after)
	for i := 1; i < len(c.Grants); i++ {
		if c.Grants[i].Risk > c.Grants[i-1].Risk {
			t.Fatalf("not riskiest first:\n%s", showGrants(c))
		}
	}
	b, err := json.Marshal(c.Grants[0])
	if err != nil || !strings.Contains(string(b), `"Risk":"high"`) {
		t.Errorf("json %s, %v", b, err)
	}
	var r Risk
	if err := r.UnmarshalText([]byte("medium")); err != nil || r != RiskMedium {
		t.Errorf("UnmarshalText: %v %v", r, err)
	}
	if err := r.UnmarshalText([]byte("severe")); err == nil {
		t.Errorf("UnmarshalText(severe) accepted")
	}
	wantNoGrants(t, diffTexts(t, e, after, after))
	if got := Diff(nil, nil, nil); len(got.Grants) != 0 {
		t.Errorf("Diff(nil, nil) = %v", got.Grants)
	}
}

// TestDiffFilesMissing: DiffFiles names a missing file with ErrMissing.
func TestDiffFilesMissing(t *testing.T) {
	e := newCoreEnv(t)
	p := e.write("a.rules", "python-import=json\n")
	_, err := DiffFiles(context.Background(), p, e.path("nope.rules"), &ReviewOptions{Options: *e.opts()})
	if err == nil || !strings.Contains(err.Error(), "nope.rules") {
		t.Fatalf("err = %v", err)
	}
	c, err := DiffFiles(context.Background(), "/dev/null", p, &ReviewOptions{Options: *e.opts()})
	if err != nil {
		t.Fatal(err)
	}
	wantGrant(t, c, "python-import=json", RiskLow)
}

// TestReviewLearned: a learned file is merged only under an approval naming
// each high-risk grant; a stale review is refused; the profile is backed up.
func TestReviewLearned(t *testing.T) {
	e := newCoreEnv(t)
	e.mkdir("data")
	profile := e.write(DefaultName, "python-import=json\n")
	learned := e.write("learned.rules", "expose-ro=./data\npython-import=json\npython-import=ctypes\n")
	ro := &ReviewOptions{Options: *e.opts(), Now: time.Unix(0, 0)}
	r, err := ReviewLearned(context.Background(), profile, learned, ro)
	if err != nil {
		t.Fatal(err)
	}
	wantGrant(t, r.Changes, "python-import=ctypes", RiskHigh)
	wantGrant(t, r.Changes, "expose-ro=./data", RiskLow)
	if _, err := r.Apply(Approval{}); err == nil || !strings.Contains(err.Error(), "python-import=ctypes") {
		t.Fatalf("Apply without naming ctypes: %v", err)
	} else {
		var hr *HighRiskError
		if !errors.As(err, &hr) || len(hr.Grants) != 1 {
			t.Errorf("error %v is not a HighRiskError of one grant", err)
		}
	}
	if _, err := r.Apply(Approval{AllowHigh: []string{"python-import=os"}}); err == nil {
		t.Fatalf("Apply naming a grant not in the review succeeded")
	}
	if _, err := r.Apply(Approval{AllowHigh: []string{"python-import=ctypes"}, Digest: "0123"}); !errors.Is(err, ErrStaleReview) {
		t.Fatalf("Apply with another digest: %v", err)
	}
	if got, _ := os.ReadFile(profile); string(got) != "python-import=json\n" {
		t.Fatalf("refused approvals wrote the profile:\n%s", got)
	}
	backup, err := r.Apply(Approval{AllowHigh: []string{"python-import=ctypes"}, Digest: r.Digest})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(profile)
	if !strings.Contains(string(got), "python-import=ctypes") || !strings.Contains(string(got), "expose-ro=./data") {
		t.Errorf("merged profile:\n%s", got)
	}
	if old, err := os.ReadFile(backup); err != nil || string(old) != "python-import=json\n" {
		t.Errorf("backup %s: %q %v", backup, old, err)
	}
	// The merged profile loads and, reviewed again, has nothing left to grant.
	r2, err := ReviewLearned(context.Background(), profile, learned, ro)
	if err != nil {
		t.Fatal(err)
	}
	wantNoGrants(t, r2.Changes)
}

// TestDiffHostDependent: a files or net= rule that reads a host variable is
// graded for today's value, and at least medium: another value at launch
// grants something else.
func TestDiffHostDependent(t *testing.T) {
	e := newCoreEnv(t)
	data := e.mkdir("data")
	e.env = []string{"DATA=" + data, "API=192.0.2.7"}
	c := diffTexts(t, e, "", "expose-ro=${DATA}\n")
	wantGrant(t, c, "expose-ro=${DATA}", RiskMedium, "reads ${DATA}", data)
	c = diffTexts(t, e, "", "net=ALLOW|tcp|${API}|443|OUT\n")
	wantGrant(t, c, "net=ALLOW|tcp|${API}|443|OUT", RiskMedium, "reads ${API}")
	wantNoGrants(t, diffTexts(t, e, "expose-ro=${DATA}\n", "expose-ro=${DATA}\n"))
}

// TestDiffEvalPattern: a pattern token is reviewed by the names it reaches.
func TestDiffEvalPattern(t *testing.T) {
	e := newCoreEnv(t)
	c := diffTexts(t, e, "eval-call=len\n", "eval-call=len, get*\n")
	wantGrant(t, c, "eval-call=get*", RiskMedium, "getattr")
	c = diffTexts(t, e, "eval-call=len\n", "eval-call=len, *port*\n")
	wantGrant(t, c, "eval-call=*port*", RiskHigh, "__import__")
}
