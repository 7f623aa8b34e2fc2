package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type controlView struct {
	PySandbox bool
	OSSandbox string
	Guard     bool
	Mode      ResultMode
	Learn     string
	Locked    string // provenance of the lock, "" when unlocked
}

func controlOf(p *Policy) controlView {
	var v controlView
	v.PySandbox, _ = p.PySandbox()
	v.OSSandbox, _ = p.OSSandbox()
	v.Guard, _ = p.RemoteResultGuard()
	v.Mode, _ = p.RemoteResultMode()
	v.Learn, _ = p.Learn()
	if l := p.Locked(); l != nil {
		v.Locked = l.Ref.String()
	}
	return v
}

func TestControlValues(t *testing.T) {
	def := controlView{PySandbox: true, OSSandbox: "auto", Guard: true, Mode: DataOnly}
	with := func(f func(*controlView)) controlView {
		v := def
		f(&v)
		return v
	}
	tests := []struct {
		text string
		args []string
		want controlView
	}{
		{"", nil, def},
		{"py-sandbox=true", nil, def},
		{"py-sandbox=", nil, def},
		{"py-sandbox=1", nil, def},
		{"py-sandbox=on", nil, def},
		{"py-sandbox=TRUE", nil, def},
		{"py-sandbox=false", nil, with(func(v *controlView) { v.PySandbox = false })},
		{"py-sandbox=none", nil, with(func(v *controlView) { v.PySandbox = false })},
		{"py-sandbox=0", nil, with(func(v *controlView) { v.PySandbox = false })},
		{"py-sandbox=off", nil, with(func(v *controlView) { v.PySandbox = false })},
		{"py-sandbox= False ", nil, with(func(v *controlView) { v.PySandbox = false })},
		{"remote-result-guard=", nil, def},
		{"remote-result-guard=on", nil, def},
		{"remote-result-guard=false", nil, with(func(v *controlView) { v.Guard = false })},
		{"remote-result-guard=none", nil, with(func(v *controlView) { v.Guard = false })},
		{"remote-result-guard=0", nil, with(func(v *controlView) { v.Guard = false })},
		{"remote-result-guard=off", nil, with(func(v *controlView) { v.Guard = false })},
		{"remote-result-mode=data-only", nil, def},
		{"remote-result-mode=data_only", nil, def},
		{"remote-result-mode=objects", nil, with(func(v *controlView) { v.Mode = Objects })},
		{"remote-result-mode=default", nil, with(func(v *controlView) { v.Mode = Objects })},
		{"os-sandbox=auto", nil, def},
		{"os-sandbox=none", nil, with(func(v *controlView) { v.OSSandbox = "none" })},
		{"os-sandbox=subprocess", nil, with(func(v *controlView) { v.OSSandbox = "subprocess" })},
		{"os-sandbox=landlock", nil, with(func(v *controlView) { v.OSSandbox = "landlock" })},
		{"os-sandbox=bwrap", nil, with(func(v *controlView) { v.OSSandbox = "bwrap" })},
		{"os-sandbox=firejail", nil, with(func(v *controlView) { v.OSSandbox = "firejail" })},
		{"os-sandbox=unshare", nil, with(func(v *controlView) { v.OSSandbox = "unshare" })},
		{"os-sandbox=qemu", nil, with(func(v *controlView) { v.OSSandbox = "qemu" })},
		{"os-sandbox=BWRAP", nil, with(func(v *controlView) { v.OSSandbox = "bwrap" })},
		{"os-sandbox= bwrap ", nil, with(func(v *controlView) { v.OSSandbox = "bwrap" })},
		{"os-sandbox=${OS_SANDBOX:-auto}", nil, def},
		{"os-sandbox=${HOST_SANDBOX:-auto}", nil, with(func(v *controlView) { v.OSSandbox = "landlock" })},
		// A value given by code wins over one file value.
		{"os-sandbox=bwrap", []string{"os-sandbox=none"}, with(func(v *controlView) { v.OSSandbox = "none" })},
		{"py-sandbox=true", []string{"py-sandbox=false"}, with(func(v *controlView) { v.PySandbox = false })},
		{"remote-result-mode=objects", []string{"remote-result-mode=data-only"}, def},
		{"learn=", nil, with(func(v *controlView) { v.Learn = "WORK/.py-sandboxes" })},
		{"learn=.py-sandboxes.learn", nil, with(func(v *controlView) { v.Learn = "WORK/.py-sandboxes.learn" })},
		{"learn=./out/x", nil, with(func(v *controlView) { v.Learn = "WORK/out/x" })},
		{"learn=~/l", nil, with(func(v *controlView) { v.Learn = "HOME/l" })},
		{"learn=false", nil, with(func(v *controlView) { v.Locked = ".py-sandboxes(1)" })},
		{"learn=FALSE\nlearn=false", nil, with(func(v *controlView) { v.Locked = ".py-sandboxes(1)" })},
		{"", []string{"learn=mine"}, with(func(v *controlView) { v.Learn = "WORK/mine" })},
		{"learn=file", []string{"learn=arg"}, with(func(v *controlView) { v.Learn = "WORK/arg" })},
	}
	for _, tt := range tests {
		e := newCoreEnv(t, "HOST_SANDBOX=landlock")
		e.mkdir("out")
		e.args = tt.args
		p := e.mustParse(tt.text)
		want := tt.want
		want.Learn = strings.NewReplacer("WORK", e.dir, "HOME", e.home).Replace(want.Learn)
		if diff := cmp.Diff(want, controlOf(p)); diff != "" {
			t.Errorf("%q %q (-want +got):\n%s", tt.args, tt.text, diff)
		}
	}
}

// TestControlRules checks the rule returned with each value, and that a file value
// overridden by <arg> is not kept.
func TestControlRules(t *testing.T) {
	e := newCoreEnv(t)
	e.args = []string{"os-sandbox=none"}
	p := e.mustParse("os-sandbox=bwrap\npy-sandbox=false\nremote-result-mode=objects\nremote-result-guard=off\nlearn=x")
	if _, r := p.OSSandbox(); r == nil || r.Ref.String() != "<arg>" {
		t.Errorf("OSSandbox rule = %v", r)
	}
	for name, r := range map[string]*Rule{
		"py-sandbox": second(p.PySandbox()), "remote-result-mode": second(p.RemoteResultMode()),
		"remote-result-guard": second(p.RemoteResultGuard()), "learn": second(p.Learn()),
	} {
		if r == nil || r.Key != name || r.Ref.File != e.path(".py-sandboxes") {
			t.Errorf("%s rule = %+v", name, r)
		}
	}
	want := []string{"<arg> os-sandbox=none", ".py-sandboxes(2) py-sandbox=false", ".py-sandboxes(3) remote-result-mode=objects",
		".py-sandboxes(4) remote-result-guard=off", ".py-sandboxes(5) learn=x"}
	if diff := cmp.Diff(want, refs(p.Rules())); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	// Defaults come without a rule.
	e.args = nil
	p = e.mustParse("")
	for name, r := range map[string]*Rule{
		"py-sandbox": second(p.PySandbox()), "os-sandbox": second(p.OSSandbox()), "remote-result-mode": second(p.RemoteResultMode()),
		"remote-result-guard": second(p.RemoteResultGuard()), "learn": second(p.Learn()),
	} {
		if r != nil {
			t.Errorf("%s default has a rule %v", name, r)
		}
	}
}

func second[T any](_ T, r *Rule) *Rule { return r }

func TestControlErrors(t *testing.T) {
	providers := "auto, none, subprocess, landlock, bwrap, firejail, unshare, qemu"
	tests := []struct {
		name string
		args []string
		text string
		want []string
	}{
		{"py-sandbox", nil, "py-sandbox=maybe", []string{".py-sandboxes(1): Invalid py-sandbox 'maybe': expected true or false."}},
		{"remote-result-guard", nil, "remote-result-guard=2", []string{".py-sandboxes(1): Invalid remote-result-guard '2': expected true or false."}},
		{"os-sandbox", nil, "os-sandbox=x", []string{".py-sandboxes(1): Invalid os-sandbox 'x'. Use one of: " + providers + "."}},
		{"os-sandbox empty", nil, "os-sandbox=", []string{".py-sandboxes(1): Invalid os-sandbox ''. Use one of: " + providers + "."}},
		{"os-sandbox substituted", nil, "os-sandbox=${OS:-docker}", []string{".py-sandboxes(1): Invalid os-sandbox 'docker'. Use one of: " + providers + "."}},
		{"remote-result-mode", nil, "remote-result-mode=all", []string{".py-sandboxes(1): Invalid remote-result-mode 'all': expected data-only or objects."}},
		{"port", nil, "port=x\nport=-1\nport=65536", []string{
			".py-sandboxes(1): Invalid port 'x': expected a number from 0 to 65535.",
			".py-sandboxes(2): Invalid port '-1': expected a number from 0 to 65535.",
			".py-sandboxes(3): Invalid port '65536': expected a number from 0 to 65535.",
		}},
		{"twice in a file", nil, "os-sandbox=bwrap\n\nos-sandbox=bwrap", []string{".py-sandboxes(1) and .py-sandboxes(3): Multiple os-sandbox parameters."}},
		{"three times", nil, "port=1\nport=2\nport=3", []string{
			".py-sandboxes(1) and .py-sandboxes(2): Multiple port parameters.",
			".py-sandboxes(1) and .py-sandboxes(3): Multiple port parameters.",
		}},
		{"every key", nil, "py-sandbox=1\npy-sandbox=1\nremote-result-guard=1\nremote-result-guard=1\nremote-result-mode=objects\nremote-result-mode=objects\nlearn=a\nlearn=b", []string{
			".py-sandboxes(1) and .py-sandboxes(2): Multiple py-sandbox parameters.",
			".py-sandboxes(3) and .py-sandboxes(4): Multiple remote-result-guard parameters.",
			".py-sandboxes(5) and .py-sandboxes(6): Multiple remote-result-mode parameters.",
			".py-sandboxes(7) and .py-sandboxes(8): Multiple learn parameters.",
		}},
		{"twice as <arg>", []string{"os-sandbox=none", "os-sandbox=bwrap"}, "", []string{"<arg> and <arg>: Multiple os-sandbox parameters."}},
		{"<arg> does not hide two file values", []string{"os-sandbox=none"}, "os-sandbox=bwrap\nos-sandbox=qemu", []string{".py-sandboxes(1) and .py-sandboxes(2): Multiple os-sandbox parameters."}},
		{"<arg> and two file values of learn", []string{"learn=a"}, "learn=b\nlearn=c", []string{".py-sandboxes(1) and .py-sandboxes(2): Multiple learn parameters."}},
		{"invalid value is not counted", nil, "os-sandbox=x\nos-sandbox=bwrap", []string{".py-sandboxes(1): Invalid os-sandbox 'x'. Use one of: " + providers + "."}},
		{"learn boolean", nil, "learn=true", []string{".py-sandboxes(1): Invalid learn 'true'. Use the filename instead."}},
		{"learn 1", nil, "learn=1", []string{".py-sandboxes(1): Invalid learn '1'. Use the filename instead."}},
		{"learn 0", nil, "learn=0", []string{".py-sandboxes(1): Invalid learn '0'. Use the filename instead."}},
		{"learn on", nil, "learn=on", []string{".py-sandboxes(1): Invalid learn 'on'. Use the filename instead."}},
		{"learn true as <arg>", []string{"learn=True"}, "", []string{"<arg>: Invalid learn 'True'. Use the filename instead."}},
		{"learn false as <arg>", []string{"learn=false"}, "", []string{"<arg>: learn=false locks a rule file: write it in the file, not on the command line or in code"}},
		{"learn directory missing", nil, "learn=nodir/x", []string{".py-sandboxes(1): Invalid learn 'nodir/x': the directory 'nodir' must exist"}},
		{"learn directory is a file", nil, "learn=afile/x", []string{".py-sandboxes(1): Invalid learn 'afile/x': the directory 'afile' must exist"}},
		{"learn NUL", nil, "learn=a\x00b", []string{".py-sandboxes(1): Invalid learn 'a\x00b': path is invalid"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newCoreEnv(t)
			e.write("afile", "")
			e.args = tt.args
			e.wantErrs(tt.text, tt.want...)
		})
	}
}

func TestControlExtraProviders(t *testing.T) {
	e := newCoreEnv(t)
	o := e.opts()
	o.Providers = []string{"mybox"}
	p, err := Parse(t.Context(), e.path(DefaultName), []byte("os-sandbox=mybox\nmybox.level=3"), o)
	if err != nil {
		t.Fatal(err)
	}
	if name, _ := p.OSSandbox(); name != "mybox" {
		t.Errorf("OSSandbox = %q", name)
	}
	if got := p.ProviderParams("mybox"); len(got) != 1 || got[0].Name != "level" || got[0].Value != "3" {
		t.Errorf("ProviderParams = %+v", got)
	}
	_, err = Parse(t.Context(), e.path(DefaultName), []byte("os-sandbox=other"), o)
	want := []string{".py-sandboxes(1): Invalid os-sandbox 'other'. Use one of: auto, none, subprocess, landlock, bwrap, firejail, unshare, qemu, mybox."}
	if diff := cmp.Diff(want, errLines(t, err)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestPortWarning(t *testing.T) {
	e := newCoreEnv(t)
	p := e.mustParse("port=8080")
	var got []string
	for _, w := range p.Warnings() {
		got = append(got, w.String())
	}
	want := []string{".py-sandboxes(1): port= has no effect: the host talks to the sandbox over an inherited socket pair, never a TCP port"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	// --port on the command line wins over any number of file values.
	e.args = []string{"port=1"}
	e.mustParse("port=2\nport=3")
}

// TestLearnPath checks where learn= writes: a bare name next to the file holding the
// rule, a path with '/' from the current directory, "" meaning .py-sandboxes.
func TestLearnPath(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string // relative to the current directory
	}{
		{"bare name in the main file", map[string]string{".py-sandboxes": "learn=out.learn"}, ".py-sandboxes.dir/out.learn"},
		{"bare name in an included file", map[string]string{".py-sandboxes": "include \"conf/inc\"", "conf/inc": "learn=out.learn"}, "conf/out.learn"},
		{"empty in an included file", map[string]string{".py-sandboxes": "include \"conf/inc\"", "conf/inc": "learn="}, "conf/.py-sandboxes"},
		{"path from the current directory", map[string]string{".py-sandboxes": "include \"conf/inc\"", "conf/inc": "learn=./here"}, "here"},
		{"relative path with a slash", map[string]string{".py-sandboxes": "include \"conf/inc\"", "conf/inc": "learn=conf/there"}, "conf/there"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newCoreEnv(t)
			for name, content := range tt.files {
				e.write(name, content)
			}
			p := e.mustLoad(".py-sandboxes")
			got, r := p.Learn()
			want := e.path(strings.Replace(tt.want, ".py-sandboxes.dir/", "", 1))
			if got != want || r == nil {
				t.Errorf("Learn() = %q, %v; want %q", got, r, want)
			}
		})
	}
}

func TestLock(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		learn bool
		files map[string]string
		want  []string
	}{
		{
			name:  "locked, nothing asked",
			files: map[string]string{".py-sandboxes": "learn=false\nenv=A=1"},
		},
		{
			name:  "a rule given by code",
			args:  []string{"env=A=1"},
			files: map[string]string{".py-sandboxes": "learn=false"},
			want:  []string{".py-sandboxes(1): 'learn=false' locks the rules, the API cannot add env"},
		},
		{
			name:  "several keys, in order, once each",
			args:  []string{"os-sandbox=none", "env=A=1", "env=B=2", "net=ALLOW|tcp|192.0.2.1|80|OUT"},
			files: map[string]string{".py-sandboxes": "# locked\nlearn=false"},
			want:  []string{".py-sandboxes(2): 'learn=false' locks the rules, the API cannot add os-sandbox, env, net"},
		},
		{
			name:  "a rule given by code that is dropped is still refused",
			args:  []string{"net=ALLOW|tcp|unresolvable.invalid|443|OUT"},
			files: map[string]string{".py-sandboxes": "learn=false"},
			want:  []string{".py-sandboxes(1): 'learn=false' locks the rules, the API cannot add net"},
		},
		{
			name:  "a learn= file in the same file",
			files: map[string]string{".py-sandboxes": "learn=false\nlearn=x"},
			want:  []string{".py-sandboxes(1): learning mode is forbidden, but requested by .py-sandboxes(2)."},
		},
		{
			name:  "a learn= file before the lock",
			files: map[string]string{".py-sandboxes": "learn=\nlearn=false"},
			want:  []string{".py-sandboxes(2): learning mode is forbidden, but requested by .py-sandboxes(1)."},
		},
		{
			name:  "a learn= file in another file",
			files: map[string]string{".py-sandboxes": "include \"conf/global\"\nlearn=x", "conf/global": "learn=false"},
			want:  []string{"conf/global(1): learning mode is forbidden, but requested by .py-sandboxes(2)."},
		},
		{
			name:  "a learn= file given by code",
			args:  []string{"learn=x"},
			files: map[string]string{".py-sandboxes": "learn=false"},
			want:  []string{".py-sandboxes(1): learning mode is forbidden, but requested by <arg>."},
		},
		{
			name:  "Options.Learn",
			learn: true,
			files: map[string]string{".py-sandboxes": "learn=false"},
			want:  []string{".py-sandboxes(1): learning mode is forbidden, but requested by <arg>."},
		},
		{
			name:  "learning and rules given by code",
			args:  []string{"learn=x", "ignore=.env"},
			files: map[string]string{".py-sandboxes": "learn=false"},
			want: []string{
				".py-sandboxes(1): learning mode is forbidden, but requested by <arg>.",
				".py-sandboxes(1): 'learn=false' locks the rules, the API cannot add ignore",
			},
		},
		{
			name:  "the first lock is the one named",
			args:  []string{"env=A=1"},
			files: map[string]string{".py-sandboxes": "include \"conf/g\"\nlearn=false", "conf/g": "learn=false"},
			want:  []string{"conf/g(1): 'learn=false' locks the rules, the API cannot add env"},
		},
		{
			name:  "learn=false given by code",
			args:  []string{"learn=false"},
			files: map[string]string{".py-sandboxes": ""},
			want:  []string{"<arg>: learn=false locks a rule file: write it in the file, not on the command line or in code"},
		},
		{
			name:  "Options.Learn without a lock",
			learn: true,
			files: map[string]string{".py-sandboxes": "env=A=1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newCoreEnv(t)
			e.args, e.learn = tt.args, tt.learn
			for name, content := range tt.files {
				e.write(name, content)
			}
			p, err := e.load(".py-sandboxes")
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if diff := cmp.Diff(tt.want, errLines(t, err)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if p != nil {
				t.Error("a policy came back with the errors")
			}
			locked := strings.Contains(tt.want[0], "locks the rules") || strings.Contains(tt.want[0], "forbidden")
			if got := errors.Is(err, ErrLocked); got != locked {
				t.Errorf("errors.Is(err, ErrLocked) = %v, want %v", got, locked)
			}
			if locked {
				var ce *ConfigError
				if !errors.As(err, &ce) || !errors.Is(ce, ErrLocked) {
					t.Errorf("errors.As(*ConfigError) = %v", ce)
				}
			}
		})
	}
}

// TestLockedPolicy checks the lock itself.
func TestLockedPolicy(t *testing.T) {
	e := newCoreEnv(t)
	p := e.mustParse("env=A=1\nlearn=false  # locked")
	l := p.Locked()
	if l == nil || l.Ref.String() != ".py-sandboxes(2)" || l.Raw != "learn=false" {
		t.Fatalf("Locked() = %+v", l)
	}
	if f, r := p.Learn(); f != "" || r != nil {
		t.Errorf("Learn() = %q, %v", f, r)
	}
	if e.mustParse("env=A=1").Locked() != nil {
		t.Error("an unlocked policy is locked")
	}
}

func TestProviderParams(t *testing.T) {
	e := newCoreEnv(t, "QEMU_USE_KVM=false")
	p := e.mustParse(strings.Join([]string{
		"bwrap.share-net=yes",
		"qemu.use_kvm=${QEMU_USE_KVM:-true}",
		"bwrap.unshare-net=no",
		"firejail.seccomp.keep=read,write",
		"qemu.memory=2048",
		"bwrap.bind=",
		"unshare.mount-proc=",
		"landlock.x=1",
		"subprocess.y=2",
	}, "\n"))
	type param struct{ Provider, Name, Value, Ref string }
	got := map[string][]param{}
	for _, prov := range Providers {
		for _, pp := range p.ProviderParams(prov) {
			got[prov] = append(got[prov], param{pp.Provider, pp.Name, pp.Value, pp.Ref.String()})
		}
	}
	want := map[string][]param{
		"bwrap": {
			{"bwrap", "share-net", "yes", ".py-sandboxes(1)"},
			{"bwrap", "unshare-net", "no", ".py-sandboxes(3)"},
			{"bwrap", "bind", "", ".py-sandboxes(6)"},
		},
		"qemu": {
			{"qemu", "use_kvm", "false", ".py-sandboxes(2)"},
			{"qemu", "memory", "2048", ".py-sandboxes(5)"},
		},
		"firejail":   {{"firejail", "seccomp.keep", "read,write", ".py-sandboxes(4)"}},
		"unshare":    {{"unshare", "mount-proc", "", ".py-sandboxes(7)"}},
		"landlock":   {{"landlock", "x", "1", ".py-sandboxes(8)"}},
		"subprocess": {{"subprocess", "y", "2", ".py-sandboxes(9)"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ProviderParams (-want +got):\n%s", diff)
	}
	if got := p.ProviderParams("nobody"); got != nil {
		t.Errorf("ProviderParams(nobody) = %v", got)
	}

	e.wantErrs("nobody.key=1\nauto.x=1\nnone.x=1\n.x=1\nbwrap.=1\nBWRAP.x=1\nqemu.x=${A:B}",
		".py-sandboxes(1): Invalid rule 'nobody.key=1': unknown provider 'nobody' (the providers: subprocess, landlock, bwrap, firejail, unshare, qemu)",
		".py-sandboxes(2): Invalid rule 'auto.x=1': os-sandbox=auto takes no parameters: a parameter names the provider it configures (landlock.x=...)",
		".py-sandboxes(3): Invalid rule 'none.x=1': os-sandbox=none takes no parameters: a parameter names the provider it configures (landlock.x=...)",
		".py-sandboxes(4): Invalid rule '.x=1': expected PROVIDER.PARAM=VALUE (a provider parameter)",
		".py-sandboxes(5): Invalid rule 'bwrap.=1': expected PROVIDER.PARAM=VALUE (a provider parameter)",
		".py-sandboxes(6): Invalid rule 'BWRAP.x=1': unknown provider 'BWRAP'; did you mean 'bwrap.x'?",
		`.py-sandboxes(7): unsupported substitution "${A:B}": expected ${NAME} or ${NAME:-default}`,
	)
}
