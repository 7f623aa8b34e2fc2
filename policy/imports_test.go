package policy

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const importTestFile = "/some/dir/.py-sandboxes"

func importTestParse(t *testing.T, text string, env ...string) (*Policy, error) {
	t.Helper()
	if env == nil {
		env = []string{}
	}
	return Parse(context.Background(), importTestFile, []byte(text), &Options{Dir: t.TempDir(), Env: env})
}

func TestImportAllowed(t *testing.T) {
	type query struct {
		module  string
		allowed bool
		line    int // line of the granting rule, 0 for none
	}
	tests := []struct {
		name     string
		text     string
		env      []string
		all      bool
		declared bool
		modules  []string
		queries  []query
	}{
		{
			name: "no rule denies all",
			queries: []query{
				{"json", false, 0}, {"os", false, 0}, {"os.path", false, 0},
			},
		},
		{
			name:     "lines accumulate",
			text:     "python-import=json, csv\n# a comment\npython-import=  requests ,_thread",
			declared: true,
			modules:  []string{"_thread", "csv", "json", "requests"},
			queries: []query{
				{"json", true, 1}, {"csv", true, 1}, {"requests", true, 3}, {"_thread", true, 3},
				{"json.decoder", true, 1}, {"requests.adapters.x", true, 3},
				{"socket", false, 0}, {"jso", false, 0}, {"jsonx", false, 0}, {"JSON", false, 0},
			},
		},
		{
			name:     "star on its own line allows all",
			text:     "python-import=json\npython-import=*",
			all:      true,
			declared: true,
			modules:  []string{"json"},
			queries: []query{
				{"json", true, 1}, // the rule naming the module is the better provenance
				{"socket", true, 2}, {"os.path", true, 2},
			},
		},
		{
			name:     "star anywhere in a list",
			text:     "python-import=json, *, csv",
			all:      true,
			declared: true,
			modules:  []string{"csv", "json"},
			queries:  []query{{"anything", true, 1}},
		},
		{
			name:     "empty value declares and grants nothing",
			text:     "python-import=",
			declared: true,
			queries:  []query{{"json", false, 0}},
		},
		{
			name:     "unset variable grants nothing",
			text:     "python-import=${EXTRA_MODULES}",
			declared: true,
			queries:  []query{{"json", false, 0}},
		},
		{
			name:     "variable",
			text:     "python-import=${MODS}",
			env:      []string{"MODS=json, csv"},
			declared: true,
			modules:  []string{"csv", "json"},
			queries:  []query{{"csv", true, 1}, {"os", false, 0}},
		},
		{
			name:     "dotted entry never matches",
			text:     "python-import=os.path, json",
			declared: true,
			modules:  []string{"json"},
			queries:  []query{{"os", false, 0}, {"os.path", false, 0}, {"json", true, 1}},
		},
		{
			name:     "duplicates keep the first rule",
			text:     "python-import=json\npython-import=json, json",
			declared: true,
			modules:  []string{"json"},
			queries:  []query{{"json", true, 1}},
		},
		{
			name:     "unicode identifiers",
			text:     "python-import=café, _private2",
			declared: true,
			modules:  []string{"_private2", "café"},
			queries:  []query{{"café", true, 1}},
		},
		{
			name:     "relative and empty names are refused",
			text:     "python-import=*",
			all:      true,
			declared: true,
			queries:  []query{{".json", false, 0}, {"", false, 0}, {".", false, 0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := importTestParse(t, tt.text, tt.env...)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			im := p.Imports()
			if im == nil {
				t.Fatal("Imports() is nil")
			}
			if im.All() != tt.all || im.Declared() != tt.declared {
				t.Errorf("All()=%v Declared()=%v, want %v %v", im.All(), im.Declared(), tt.all, tt.declared)
			}
			if diff := cmp.Diff(tt.modules, im.Modules(), cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })); diff != "" {
				t.Errorf("Modules() (-want +got):\n%s", diff)
			}
			for _, q := range tt.queries {
				ok, r := p.ImportAllowed(q.module)
				line := 0
				if r != nil {
					line = r.Ref.Line
					if r.Key != "python-import" {
						t.Errorf("ImportAllowed(%q) rule key %q", q.module, r.Key)
					}
				}
				if ok != q.allowed || line != q.line {
					t.Errorf("ImportAllowed(%q) = %v, line %d; want %v, line %d", q.module, ok, line, q.allowed, q.line)
				}
				if !ok && r != nil {
					t.Errorf("ImportAllowed(%q) refused with a rule", q.module)
				}
			}
		})
	}
}

func TestImportErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		env  []string
		want []string
	}{
		{
			name: "empty element",
			text: "python-import=a,,b",
			want: []string{"/some/dir/.py-sandboxes(1): Invalid rule 'python-import=a,,b': empty module name."},
		},
		{
			name: "trailing comma",
			text: "python-import=json\npython-import=json, csv,",
			want: []string{"/some/dir/.py-sandboxes(2): Invalid rule 'python-import=json, csv,': empty module name."},
		},
		{
			name: "bad names, each reported",
			text: "python-import=json csv, 9lives, foo-bar, os..path, json*, .rel",
			want: []string{
				"/some/dir/.py-sandboxes(1): Invalid rule 'python-import=json csv, 9lives, foo-bar, os..path, json*, .rel': 'json csv' is not a valid module name.",
				"/some/dir/.py-sandboxes(1): Invalid rule 'python-import=json csv, 9lives, foo-bar, os..path, json*, .rel': '9lives' is not a valid module name.",
				"/some/dir/.py-sandboxes(1): Invalid rule 'python-import=json csv, 9lives, foo-bar, os..path, json*, .rel': 'foo-bar' is not a valid module name.",
				"/some/dir/.py-sandboxes(1): Invalid rule 'python-import=json csv, 9lives, foo-bar, os..path, json*, .rel': 'os..path' is not a valid module name.",
				"/some/dir/.py-sandboxes(1): Invalid rule 'python-import=json csv, 9lives, foo-bar, os..path, json*, .rel': 'json*' is not a valid module name.",
				"/some/dir/.py-sandboxes(1): Invalid rule 'python-import=json csv, 9lives, foo-bar, os..path, json*, .rel': '.rel' is not a valid module name.",
			},
		},
		{
			name: "errors on several lines, sorted by line",
			text: "python-import=ok\npython-import=a b\npython-import=fine\npython-import=,",
			want: []string{
				"/some/dir/.py-sandboxes(2): Invalid rule 'python-import=a b': 'a b' is not a valid module name.",
				"/some/dir/.py-sandboxes(4): Invalid rule 'python-import=,': empty module name.",
			},
		},
		{
			name: "raw line is shown as written",
			text: "python-import=${MODS}",
			env:  []string{"MODS=json,,csv"},
			want: []string{"/some/dir/.py-sandboxes(1): Invalid rule 'python-import=${MODS}': empty module name."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := importTestParse(t, tt.text, tt.env...)
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", p.Imports())
			}
			var all ConfigErrors
			if !errors.As(err, &all) {
				t.Fatalf("error %T is not ConfigErrors: %v", err, err)
			}
			var one *ConfigError
			if !errors.As(err, &one) {
				t.Fatalf("no *ConfigError in %v", err)
			}
			var got []string
			for _, c := range all {
				got = append(got, c.Error())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestImportArgRules(t *testing.T) {
	_, err := Parse(context.Background(), "", nil, &Options{Dir: t.TempDir(), Env: []string{}, Rules: []string{"python-import=a,,b"}})
	if err == nil || !strings.Contains(err.Error(), "\n<arg>: Invalid rule 'python-import=a,,b': empty module name.") {
		t.Fatalf("error = %v", err)
	}
	p, err := Parse(context.Background(), "", nil, &Options{Dir: t.TempDir(), Env: []string{}, Rules: []string{"python-import=json"}})
	if err != nil {
		t.Fatal(err)
	}
	if ok, r := p.ImportAllowed("json"); !ok || r == nil || !r.Ref.IsArg() {
		t.Errorf("ImportAllowed(json) = %v, %+v", ok, r)
	}
}

func TestImportDottedWarning(t *testing.T) {
	p, err := importTestParse(t, "python-import=json\npython-import=os.path, json, xml.etree.ElementTree")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range p.Warnings() {
		if strings.Contains(w.Msg, "python-import") {
			got = append(got, w.String())
		}
	}
	want := []string{
		"/some/dir/.py-sandboxes(2): python-import entry 'os.path' never matches: rules name top-level modules, write 'os' to allow it (and all of os's submodules)",
		"/some/dir/.py-sandboxes(2): python-import entry 'xml.etree.ElementTree' never matches: rules name top-level modules, write 'xml' to allow it (and all of xml's submodules)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

func TestImportRecorded(t *testing.T) {
	p, err := importTestParse(t, "python-import=json\npython-import=os.path")
	if err != nil {
		t.Fatal(err)
	}
	var raws []string
	for _, r := range p.Rules() {
		if r.Key == "python-import" && !slices.Contains(raws, r.Raw) {
			raws = append(raws, r.Raw)
		}
	}
	if diff := cmp.Diff([]string{"python-import=json", "python-import=os.path"}, raws); diff != "" {
		t.Errorf("recorded rules (-want +got):\n%s", diff)
	}
}

func TestImportsNilSafe(t *testing.T) {
	var im *Imports
	if ok, r := im.Allowed("json"); ok || r != nil {
		t.Error("nil Imports allows")
	}
	if im.All() || im.Declared() || im.Modules() != nil || im.AllRule() != nil {
		t.Error("nil Imports is not empty")
	}
	if ok, _ := (&Policy{}).ImportAllowed("json"); ok {
		t.Error("zero Policy allows an import")
	}
}
