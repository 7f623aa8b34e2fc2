package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// shellEnv is the environment of a shell that finds the built pysandboxes.
func shellEnv(home string) []string {
	return []string{"PATH=" + filepath.Dir(binary) + ":/usr/bin:/bin", "HOME=" + home, "TERM=xterm", "LC_ALL=C.UTF-8"}
}

// TestCompleteProtocol: what pysandboxes __complete answers for the words
// typed so far (the scripts of every shell rely on it).
func TestCompleteProtocol(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		words []string
		want  []string // lines that must be there
		not   []string // lines that must not
	}{
		{[]string{""}, []string{"run\trun a command under a policy", "completion\t", ":\t"}, nil},
		{[]string{"-"}, []string{"--version\t", "--help\t"}, []string{"run\t"}},
		{[]string{"run", "--expose-r"}, []string{"--expose-ro=\trule: a directory the program may read", "--expose-rw=\t"}, []string{"--env=\t"}},
		{[]string{"run", "--"}, []string{"--timeout\t", "--verbose\t", "--help\t", "--net=\t"}, []string{"--learn=\t", "--os-sandbox=\t", "--exec\t"}},
		{[]string{"call", "--le"}, []string{"--learn\t"}, []string{"--learn=\t"}},
		{[]string{"eval", "--e"}, []string{"--exec\t", "--eval-syntax=\t"}, nil},
		{[]string{"run", "--os-sandbox=la"}, []string{"--os-sandbox=landlock"}, []string{"--os-sandbox=auto"}},
		{[]string{"run", "--os-sandbox", ""}, []string{"auto", "subprocess", "none"}, nil},
		{[]string{"run", "--accept-unenforced=files-read,hi"}, []string{"--accept-unenforced=files-read,hide\t"}, nil},
		{[]string{"run", "--py-sandbox="}, []string{"--py-sandbox=true", "--py-sandbox=false"}, nil},
		{[]string{"run", "--config=/tm"}, []string{":files\t--config="}, nil},
		{[]string{"run", "--config", "/tm"}, []string{":files\t"}, nil},
		{[]string{"run", "--expose-rw="}, []string{":dirs\t--expose-rw="}, nil},
		{[]string{"run", "--no-config", "--", ""}, []string{":commands\t"}, nil},
		{[]string{"run", "--no-config", "ls", "-"}, []string{":files\t"}, []string{"--timeout\t"}},
		{[]string{"probe", ""}, []string{"subprocess", "none"}, []string{"auto"}},
		{[]string{"completion", ""}, []string{"bash", "zsh", "fish"}, nil},
		{[]string{"check", ""}, []string{":files\t"}, nil},
		{[]string{"nosuch", ""}, []string{":\t"}, []string{"run\t"}},
	} {
		out, errs, code := pysb(t, dir, append([]string{"__complete"}, tc.words...)...)
		if code != 0 || errs != "" {
			t.Errorf("__complete %q: exit %d, stderr %q", tc.words, code, errs)
			continue
		}
		lines := strings.Split(out, "\n")
		has := func(prefix string) bool {
			for _, l := range lines {
				if l == prefix || strings.HasPrefix(l, prefix) && strings.HasSuffix(prefix, "\t") {
					return true
				}
			}
			return false
		}
		for _, w := range tc.want {
			if !has(w) {
				t.Errorf("__complete %q lacks %q:\n%s", tc.words, w, out)
			}
		}
		for _, w := range tc.not {
			if has(w) {
				t.Errorf("__complete %q offers %q:\n%s", tc.words, w, out)
			}
		}
		if !strings.HasPrefix(lines[len(lines)-2], ":") {
			t.Errorf("__complete %q: the last line is not the directive:\n%s", tc.words, out)
		}
	}
}

// TestCompletionBash: the bash script, called as bash calls it (COMP_WORDS as
// bash splits them, "=" apart).
func TestCompletionBash(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "data"), 0o755)
	writeFile(t, filepath.Join(dir, "rules.txt"), "")
	script := `source <(pysandboxes completion bash) || exit 1
t() {
    COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
    _pysandboxes
    printf '%s|' "${COMPREPLY[@]}"; echo
}
t pysandboxes ru
t pysandboxes run --expose-r
t pysandboxes run --expose-ro = da
t pysandboxes run --os-sandbox = subp
t pysandboxes run --os-sandbox ""
t pysandboxes run --no-con
t pysandboxes run --accept-unenforced = files-read,hi
t pysandboxes check rul
t pysandboxes call --lea
t pysandboxes completion z
`
	cmd := exec.Command("bash", "--norc", "--noprofile", "-c", script)
	cmd.Dir, cmd.Env = dir, shellEnv(dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	want := []string{
		"run|",
		"--expose-ro=|--expose-rw=|",
		"data|",
		"subprocess|",
		"auto|landlock|unshare|bwrap|firejail|qemu|subprocess|none|",
		"--no-config|",
		"files-read,hide|",
		"rules.txt|",
		"--learn|",
		"zsh|",
	}
	if got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("bash completions:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestCompletionFish: the fish script, through fish's own complete -C.
func TestCompletionFish(t *testing.T) {
	if _, err := exec.LookPath("fish"); err != nil {
		t.Skip("no fish (apt-get install fish)")
	}
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "data"), 0o755)
	script := `pysandboxes completion fish | source
for l in "pysandboxes ru" "pysandboxes run --expose-r" "pysandboxes run --expose-ro=da" "pysandboxes run --os-sandbox=subp" "pysandboxes call --lea" "pysandboxes probe none"
    echo "= $l"
    complete -C"$l"
end`
	cmd := exec.Command("fish", "--no-config", "-c", script)
	cmd.Dir, cmd.Env = dir, shellEnv(dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fish: %v\n%s", err, out)
	}
	want := `= pysandboxes ru
run	run a command under a policy
= pysandboxes run --expose-r
--expose-ro=	rule: a directory the program may read
--expose-rw=	rule: a directory the program may read and change
= pysandboxes run --expose-ro=da
--expose-ro=data/
= pysandboxes run --os-sandbox=subp
--os-sandbox=subprocess
= pysandboxes call --lea
--learn	learn the rules instead of enforcing them, into FILE (default: the rule file)
= pysandboxes probe none
none
`
	if string(out) != want {
		t.Errorf("fish completions:\n%s\nwant:\n%s", out, want)
	}
}

// TestCompletionZsh: the zsh script in an interactive zsh (under tmux), as a
// person uses it: type, press Tab, read the screen.
func TestCompletionZsh(t *testing.T) {
	for _, p := range []string{"zsh", "tmux"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("no %s (apt-get install zsh tmux)", p)
		}
	}
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "data"), 0o755)
	writeFile(t, filepath.Join(dir, ".zshrc"), "autoload -Uz compinit && compinit -u -d "+filepath.Join(dir, ".zcompdump")+
		"\nsource <(pysandboxes completion zsh)\nPS1='ready%% '\n")
	sock := filepath.Join(dir, "tmux.sock")
	tmux := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("tmux", append([]string{"-S", sock}, args...)...)
		cmd.Dir, cmd.Env = dir, append(shellEnv(dir), "ZDOTDIR="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %q: %v\n%s", args, err, out)
		}
		return string(out)
	}
	tmux("new-session", "-d", "-s", "t", "-x", "150", "-y", "30", "zsh -i")
	t.Cleanup(func() { exec.Command("tmux", "-S", sock, "kill-server").Run() })
	// waitFor polls the screen until it holds want (the shell works at its pace).
	waitFor := func(want string) string {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			screen := tmux("capture-pane", "-t", "t", "-p", "-N")
			if strings.Contains(screen, want) {
				return screen
			}
			if time.Now().After(deadline) {
				t.Fatalf("the screen never showed %q:\n%s", want, screen)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("ready% ")
	for _, tc := range []struct{ typed, want string }{
		{"pysandboxes run --no-con", "ready% pysandboxes run --no-config "},
		{"pysandboxes run --os-sandbox=subp", "ready% pysandboxes run --os-sandbox=subprocess "},
		{"pysandboxes run --expose-ro=da", "ready% pysandboxes run --expose-ro=data/"},
		{"pysandboxes run --expose-r", "--expose-rw=  -- rule: a directory the program may read and change"},
		{"pysandboxes call --lea", "ready% pysandboxes call --learn "},
	} {
		tmux("send-keys", "-t", "t", "C-u", tc.typed, "Tab")
		waitFor(tc.want)
		tmux("send-keys", "-t", "t", "C-u", "clear", "Enter")
		waitFor("ready% ")
	}
}
