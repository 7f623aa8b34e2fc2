package pysandboxes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/pysb"
	"github.com/pysandboxes/pysandboxes/policy"
	"github.com/pysandboxes/pysandboxes/pylayer"
)

// Denial is one refusal of the Python layer, as the sandboxed program reported it
// (see pylayer.Denial).
type Denial = pylayer.Denial

// pythonConfig holds the options of Sandbox.Python.
type pythonConfig struct {
	interp   string
	layerOff bool
	learn    string // the file to learn into ("" = no learning)
	learnSet bool   // learning asked by WithLearning
	learnNew bool   // WithLearningNew: the file is made, never merged into
	learnLog func(*policy.LearnResult)

	once     sync.Once
	resolved *pylayer.Interpreter
	err      error
}

// WithPython names the Python interpreter of Sandbox.Python. The default is the
// environment variable PYSANDBOXES_PYTHON, else python3 on PATH (a version
// manager's shim is run once to find the real interpreter). Python 3.11 or later.
func WithPython(path string) Option { return func(c *config) { c.python.interp = path } }

// WithPythonLayer turns the Python layer of Sandbox.Python on (the default) or off
// (the program runs under the OS provider only, as with py-sandbox=false).
func WithPythonLayer(on bool) Option { return func(c *config) { c.python.layerOff = !on } }

// WithLearning makes the sandbox learn its policy: the Python layer records what
// the program does instead of refusing it, and when each Python program ends the
// observations are merged into file (see policy.Learn; "" means the policy's own
// file, else ./.py-sandboxes). Learning enforces nothing: the sandbox uses the
// subprocess provider and accepts every capability as unenforced. A locked policy
// (learn=false) refuses it. A policy holding learn=FILE learns the same way
// without this option.
func WithLearning(file string) Option {
	return func(c *config) { c.python.learn, c.python.learnSet, c.python.learnNew = file, true, false }
}

// WithLearningNew is WithLearning into a rule file that does not exist yet,
// what python-sb does when it finds none: the rules are written to a new file
// (policy.LearnOptions.Create), never merged into a file that appeared at that
// path while the program ran (the program's own, or another run's): Wait then
// returns an error that wraps fs.ErrExist, and nothing is written.
func WithLearningNew(file string) Option {
	return func(c *config) { c.python.learn, c.python.learnSet, c.python.learnNew = file, true, true }
}

// applyLearning is called by New: learning (WithLearning, or learn= in the
// policy) forces the subprocess provider and accepts everything as unenforced.
func (c *config) applyLearning(pp *policy.Policy) error {
	if !c.python.learnSet {
		file, _ := pp.Learn()
		if file == "" {
			return nil
		}
		c.python.learn = file
	} else {
		if lock := pp.Locked(); lock != nil {
			return fmt.Errorf("%s: learning mode is forbidden, but requested by %s: %w", lock.Ref, policy.ArgFile, policy.ErrLocked)
		}
		if c.python.learn == "" {
			c.python.learn = pp.Path
			if c.python.learn == "" {
				c.python.learn = policy.DefaultName
			}
		}
	}
	if on, r := pp.PySandbox(); !on {
		return fmt.Errorf("%s: learning needs the Python layer, which '%s' turns off", r.Ref, r.Raw)
	}
	if c.python.layerOff {
		return errors.New("learning needs the Python layer, which WithPythonLayer(false) turns off")
	}
	c.provider, c.use = "subprocess", nil
	c.accept |= AllCapabilities
	return nil
}

// Learning reports whether the sandbox learns (WithLearning or learn= in the
// policy), and the file it learns into.
func (s *Sandbox) Learning() (bool, string) {
	return s.cfg.python.learn != "", s.cfg.python.learn
}

// Interpreter resolves (once per sandbox) the Python interpreter of
// Sandbox.Python.
func (s *Sandbox) Interpreter(ctx context.Context) (*pylayer.Interpreter, error) {
	pc := &s.cfg.python
	pc.once.Do(func() { pc.resolved, pc.err = pylayer.ResolveInterpreter(ctx, pc.interp) })
	return pc.resolved, pc.err
}

// Python returns a Cmd that runs the Python interpreter with CPython-style
// arguments ("-c", code; "-m", module, args...; a script and its args; "-" for
// stdin; none for the interactive console; interpreter flags such as -I, -u,
// -W, -X first) under both layers: the OS provider, and the Python layer, which
// enforces the policy's imports and sensitive functions and repeats its file,
// network and environment rules with rule-naming Python exceptions. The Cmd is
// used like Command's; after Wait, Denials lists the refusals the program
// reported, and Learned what learning wrote.
//
// With py-sandbox=false (or WithPythonLayer(false)) the interpreter runs under the
// OS provider only; with the provider none, without any sandbox at all.
func (s *Sandbox) Python(ctx context.Context, args ...string) *Cmd {
	c := &Cmd{sb: s, ctx: ctx, Path: "python"}
	inv, err := pysb.Parse(args)
	if err == nil && len(inv.Rules) > 0 {
		err = fmt.Errorf("pysandboxes: sandbox options (%s) are not accepted by Sandbox.Python: put them in the policy", strings.Join(inv.Rules, ", "))
	} else if err == nil && (inv.Learn != nil || inv.Config != "") {
		err = errors.New("pysandboxes: --learn and --pysandboxes-config are python-sb options: use WithLearning and the policy")
	}
	c.Args = append([]string{"python"}, args...)
	if err != nil {
		c.lookErr = err
		return c
	}
	c.ext = &pythonRun{inv: inv, args: slices.Clone(args)}
	return c
}

// pythonRun is the Python side of a Cmd made by Sandbox.Python.
type pythonRun struct {
	inv     *pysb.Invocation
	args    []string
	session *pylayer.Session
	learn   string
	dir     string
	interp  *pylayer.Interpreter
	since   time.Time // when the program was prepared (learning: what it made is newer)

	mu      sync.Mutex
	result  *pylayer.Result
	learned *policy.LearnResult
}

func (r *pythonRun) prepare(c *Cmd) error {
	s := c.sb
	in, err := s.Interpreter(c.ctx)
	if err != nil {
		return err
	}
	r.interp = in
	c.Path = in.Path
	pp := s.policy
	on := !s.cfg.python.layerOff
	if ok, _ := s.policy.PySandbox(); !ok {
		on = false
	}
	if s.provider.Name() == "none" || !on || r.inv.Mode == pysb.Info {
		// No guard: the interpreter runs the program itself.
		c.Args = append([]string{in.Path}, r.args...)
		return nil
	}
	mode := pylayer.ModeEnforce
	if s.cfg.python.learn != "" {
		mode = pylayer.ModeLearn
		r.learn = s.cfg.python.learn
	}
	target := pylayer.Target{Value: r.inv.Target, Args: r.inv.Args}
	switch r.inv.Mode {
	case pysb.Command:
		target.Kind = "command"
	case pysb.Module:
		target.Kind = "module"
	case pysb.Script:
		target.Kind = "script"
		target.SkipFirstLine = r.inv.FlagCount("-x") > 0
	case pysb.Stdin:
		target.Kind = "stdin"
	default:
		target.Kind = "interactive"
	}
	rulesFile := pp.Path
	if rulesFile != "" {
		rulesFile = showPath(rulesFile, c.Dir)
	}
	learnShown := r.learn
	if learnShown != "" {
		learnShown = showPath(learnShown, c.Dir)
	}
	sess, err := pylayer.NewSession(c.ctx, pylayer.ConfigInput{
		Policy: pp, Interp: in, Mode: mode, Target: target, Provider: s.provider.Name(),
		RulesFile: rulesFile, LearnFile: learnShown,
	})
	if err != nil {
		return err
	}
	r.session = sess
	var flags []string
	for _, f := range r.inv.PythonFlags {
		if f != "-x" {
			flags = append(flags, f)
		}
	}
	fd := 3 + len(c.ExtraFiles)
	c.ExtraFiles = append(c.ExtraFiles, sess.ChildFile())
	c.Args = pylayer.Command(in, flags, fd)
	if mode == pylayer.ModeLearn {
		c.env = learningEnv(s)
	}
	r.dir = c.Dir
	r.since = time.Now()
	return nil
}

// learningEnv is the environment of a learning run: the host's whole
// environment plus the policy's values (the program's reads are recorded).
func learningEnv(s *Sandbox) []string {
	env := map[string]string{}
	var order []string
	for _, kv := range append(os.Environ(), s.policy.Environ()...) {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = kv
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, env[k])
	}
	return out
}

func showPath(p, dir string) string {
	if dir == "" {
		dir, _ = os.Getwd()
	}
	if rel, err := filepath.Rel(dir, p); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return p
}

func (r *pythonRun) started(c *Cmd) {
	if r.session == nil {
		return
	}
	r.session.Started(func(err error) { c.terminate(err) })
}

func (r *pythonRun) abort() {
	if r.session != nil {
		r.session.Abort()
	}
}

func (r *pythonRun) finish(c *Cmd) error {
	if r.session == nil {
		return nil
	}
	res := r.session.Finish(2 * time.Second)
	r.mu.Lock()
	r.result = res
	r.mu.Unlock()
	var errs []error
	var pe *pylayer.ProtocolError
	if errors.As(res.Err, &pe) {
		c.mu.Lock()
		if c.reason == nil {
			c.reason = pe
		}
		c.mu.Unlock()
	} else if res.Err != nil {
		errs = append(errs, res.Err)
	}
	if res.DroppedDenials > 0 {
		c.sb.cfg.logger.Warn("Python layer: more refusals than kept", "dropped", res.DroppedDenials)
	}
	if r.learn != "" && res.Armed {
		dir := r.dir
		if dir == "" {
			dir, _ = os.Getwd()
		}
		var skip []string
		if r.interp != nil {
			skip = append(skip, r.interp.Info.Stdlib...)
			skip = append(skip, r.interp.Info.Site...)
			skip = append(skip, filepath.Dir(r.interp.Path))
		}
		lr, err := policy.Learn(r.learn, res.Observations, policy.LearnOptions{
			Dir: dir, Skip: skip, Since: r.since, Logger: c.sb.cfg.logger, Create: c.sb.cfg.python.learnNew,
		})
		if err != nil {
			errs = append(errs, err)
		} else {
			r.mu.Lock()
			r.learned = lr
			r.mu.Unlock()
			if f := c.sb.cfg.python.learnLog; f != nil {
				f(lr)
			}
		}
	}
	return errors.Join(errs...)
}

// Denials returns the refusals the Python layer reported (each one once), after
// Wait. They come from the sandboxed program: what it says it was refused.
func (c *Cmd) Denials() []Denial {
	r, ok := c.ext.(*pythonRun)
	if !ok {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.result == nil {
		if r.session != nil {
			return r.session.Denials()
		}
		return nil
	}
	return slices.Clone(r.result.Denials)
}

// Learned returns what learning wrote when the program ended (nil when the
// sandbox does not learn, or before Wait).
func (c *Cmd) Learned() *policy.LearnResult {
	r, ok := c.ext.(*pythonRun)
	if !ok {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.learned
}
