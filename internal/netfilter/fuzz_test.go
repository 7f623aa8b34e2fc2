package netfilter

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/policy"
)

// FuzzCompile feeds net= lines through the policy parser and Compile: any rule
// the parser accepts compiles or is refused with an error, never a panic, and a
// compiled filter renders.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		"net=ALLOW|tcp|10.0.0.0/8|80,443,8000-|OUT",
		"net=DENY|*|*|53|OUT\nnet=ALLOW|udp|*|*|OUT",
		"net=ALLOW|tcp|127.0.0.1|8080|IN\nnet=DENY|tcp|0.0.0.0|8080|IN",
		"net=ALLOW|tcp,udp|::ffff:10.1.2.3/120|1-2,3-4,0|IN,OUT",
		"net=ALLOW|*|127.0.0.0/8|*|*",
		"net=ALLOW|tcp|::1|5432|OUT",
	} {
		f.Add(s)
	}
	opts := &policy.Options{HostsFile: "/dev/null", Env: []string{}, Dir: "/", Home: "/", Logger: slog.New(slog.DiscardHandler)}
	f.Fuzz(func(t *testing.T, text string) {
		var lines []string
		for l := range strings.SplitSeq(text, "\n") {
			if strings.HasPrefix(l, "net=") && !strings.ContainsAny(l, "${}") {
				lines = append(lines, l)
			}
		}
		if len(lines) == 0 || len(lines) > 50 {
			return
		}
		p, err := policy.Parse(context.Background(), "", []byte(strings.Join(lines, "\n")), opts)
		if err != nil {
			return
		}
		fl, err := Compile(p.Network())
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		_ = fl.String()
		_ = fl.Hosts()
		_ = fl.ResolvConf()
		if fl.Egress() && !strings.Contains(fl.String(), "policy drop") {
			t.Fatalf("an egress filter without a drop policy:\n%s", fl)
		}
		for _, c := range fl.rs.chains {
			for _, r := range c.rules {
				if r.dport != nil && r.proto == 0 || (r.daddr != nil || r.saddr != nil) && r.fam == famAny {
					t.Fatalf("rule %q matches ports without a protocol or addresses without a family", r.text())
				}
			}
		}
	})
}
