package pysb

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzParse parses argv lists: joined is split on sep (so that NUL bytes can be
// inside arguments when sep is not NUL). Parse must not panic, must fail only with
// a UsageError, and PythonArgs must give back the same interpreter view.
func FuzzParse(f *testing.F) {
	for _, argv := range [][]string{
		{"-Im", "json.tool", "--x"},
		{"-cprint(1)", "a"},
		{"-OO", "-Wd", "-Xdev", "--expose-ro=/etc", "--learn", "s.py", "--learn"},
		{"--pysandboxes-config", "f", "--learn=g", "-", "a"},
		{"-b-check-hash-based-pycs", "never", "--", "-c"},
		{"-V", "-h"},
		{"-é"},
	} {
		f.Add(strings.Join(argv, "\n"), byte('\n'))
	}
	f.Add("-c\x00x", byte(' '))
	f.Fuzz(func(t *testing.T, joined string, sep byte) {
		var argv []string
		if joined != "" {
			argv = strings.Split(joined, string([]byte{sep}))
		}
		inv, err := Parse(argv)
		if err != nil {
			var ue *UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("Parse(%q): %T %v, want a *UsageError", argv, err, err)
			}
			if !strings.HasPrefix(ue.Error(), ue.Msg+"\n"+UsageLine) {
				t.Fatalf("Parse(%q): badly formatted %q", argv, ue.Error())
			}
			return
		}
		if inv.Mode < Interactive || inv.Mode > Info {
			t.Fatalf("Parse(%q): mode %d", argv, inv.Mode)
		}
		if inv.Help && inv.Mode != Info {
			t.Fatalf("Parse(%q): Help in mode %v", argv, inv.Mode)
		}
		for _, r := range inv.Rules {
			if name, _, ok := strings.Cut(r, "="); !ok || name == "" {
				t.Fatalf("Parse(%q): bad rule %q", argv, r)
			}
		}
		if len(inv.Args) > 0 && !slices.Equal(argv[len(argv)-len(inv.Args):], inv.Args) {
			t.Fatalf("Parse(%q): Args %q are not the end of argv", argv, inv.Args)
		}
		py := inv.PythonArgs()
		again, err := Parse(py)
		if err != nil {
			t.Fatalf("Parse(%q) ok, but Parse(PythonArgs() = %q): %v", argv, py, err)
		}
		want := *inv
		want.Rules, want.Config, want.Learn = nil, "", nil
		if diff := cmp.Diff(&want, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("Parse(%q) and Parse(PythonArgs() = %q) differ (-first +again):\n%s", argv, py, diff)
		}
	})
}
