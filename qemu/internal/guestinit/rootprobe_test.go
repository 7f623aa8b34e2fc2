package main

import (
	"slices"
	"testing"
)

// TestRootProbeTags: the probe runs only when the kernel's command line
// holds its flag, once, with 9p tags of the host's form; anything else is
// ignored (the probe does not run).
func TestRootProbeTags(t *testing.T) {
	for _, c := range []struct {
		cmdline string
		want    []string
	}{
		{"console=ttyS0 quiet panic=-1", nil},
		{"", nil},
		{"pysb.rootprobe=s0,s1", []string{"s0", "s1"}},
		{"console=ttyS0 pysb.rootprobe=s11 quiet\n", []string{"s11"}},
		{"pysb.rootprobe=", nil},
		{"pysb.rootprobe", nil},
		{"pysb.rootprobe=s0,", nil},
		{"pysb.rootprobe=s12", nil},
		{"pysb.rootprobe=s0,../x", nil},
		{"pysb.rootprobe=S0", nil},
		{"xpysb.rootprobe=s0", nil},
		{"pysb.rootprobe.x=s0", nil},
		{"pysb.rootprobe=s0 pysb.rootprobe=s1", nil},
	} {
		if got := rootProbeTags(c.cmdline); !slices.Equal(got, c.want) {
			t.Errorf("rootProbeTags(%q) = %q, want %q", c.cmdline, got, c.want)
		}
	}
}
