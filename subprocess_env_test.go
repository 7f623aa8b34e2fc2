package pysandboxes_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
)

func TestSubprocessEnvironmentIsExactlyThePolicys(t *testing.T) {
	ctx := context.Background()
	t.Setenv("HOST_ONLY", "leak")
	for _, tc := range []struct {
		name  string
		rules []string
		env   []string
		want  string
	}{
		{"empty policy gives an empty environment", nil, []string{"SECRET=x"}, ""},
		{"fixed value", []string{"env=FOO=bar"}, []string{"SECRET=x"}, "FOO=bar\n"},
		{"copied from the host", []string{"env=FOO=${SECRET}"}, []string{"SECRET=x"}, "FOO=x\n"},
		{"pattern copy", []string{"env=API_*=${API_*}"}, []string{"API_A=1", "API_B=2", "SECRET=x"}, "API_A=1\nAPI_B=2\n"},
		{"unenv beats the pattern", []string{"env=*=${*}", "unenv=SECRET"}, []string{"A=1", "SECRET=x"}, "A=1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol, err := policy.Parse(ctx, "", []byte(joinLines(tc.rules)), &policy.Options{Env: tc.env})
			if err != nil {
				t.Fatal(err)
			}
			sb, err := pysandboxes.New(ctx, pol, pysandboxes.WithProvider("subprocess"),
				pysandboxes.AcceptUnenforced(pysandboxes.AllCapabilities), pysandboxes.WithLogger(quietLogger()))
			if err != nil {
				t.Fatal(err)
			}
			out, err := sb.Command(ctx, "/usr/bin/env").Output()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(out)); diff != "" {
				t.Errorf("environment (-want +got):\n%s", diff)
			}
		})
	}
}

func joinLines(lines []string) string {
	s := ""
	for _, l := range lines {
		s += l + "\n"
	}
	return s
}
