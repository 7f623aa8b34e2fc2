package pysandboxes_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
)

// TestCallRemoteException: a Python exception comes back with its class,
// message and remote traceback; it is not a denial.
func TestCallRemoteException(t *testing.T) {
	sb := callSandbox(t, "landlock", "")
	_, err := sb.Call(context.Background(), "callmod:boom", "it broke")
	var re *pysandboxes.RemoteError
	if !errors.As(err, &re) {
		t.Fatalf("boom = %v", err)
	}
	if re.Module != "builtins" || re.Qualname != "ValueError" || re.Class() != "ValueError" || re.Message != "it broke" || re.Func != "callmod:boom" {
		t.Errorf("RemoteError = %+v", re)
	}
	tb := re.Traceback
	if !strings.HasPrefix(tb, "Traceback (most recent call last):\n") || !strings.Contains(tb, "callmod.py\", line") ||
		!strings.Contains(tb, "in boom\n    raise ValueError(msg)") || !strings.HasSuffix(tb, "ValueError: it broke\n") {
		t.Errorf("traceback:\n%s", tb)
	}
	if strings.Contains(tb, "pysandboxes/") || strings.Contains(tb, "worker") {
		t.Errorf("the traceback shows the sandbox's own frames:\n%s", tb)
	}
	if re.Denied() || errors.Is(err, pysandboxes.ErrDenied) {
		t.Error("an ordinary exception counts as a denial")
	}
	if err.Error() != "pysandboxes: callmod:boom raised ValueError: it broke" {
		t.Errorf("Error() = %q", err.Error())
	}
}

// TestCallDenialNamesTheRule: a refusal inside the called function comes back
// as a denial naming the rule and its file(line), also when the function wraps
// it in another exception; a refusal the function swallows does not fail it.
func TestCallDenialNamesTheRule(t *testing.T) {
	dir := callDir(t)
	sb := callSandbox(t, "landlock", "")
	ctx := context.Background()

	_, err := sb.Call(ctx, "callmod:write_file", filepath.Join(dir, "x.txt"), "no")
	var re *pysandboxes.RemoteError
	if !errors.As(err, &re) || !errors.Is(err, pysandboxes.ErrDenied) || len(re.Denials) != 1 {
		t.Fatalf("write_file = %v", err)
	}
	d := re.Denials[0]
	if d.Kind != "file" || d.Exception != "RulePermissionError" || d.Rule != "expose-ro="+dir || !strings.HasSuffix(d.Ref, ".py-sandboxes(1)") ||
		re.Class() != "pysandboxes.RulePermissionError" {
		t.Errorf("denial = %+v (%s)", d, re.Class())
	}

	// Wrapped: RuntimeError from RuleFileNotFoundError (the implicit policy).
	_, err = sb.Call(ctx, "callmod:chained")
	if !errors.As(err, &re) || re.Qualname != "RuntimeError" || !re.Denied() {
		t.Fatalf("chained = %v", err)
	}
	d = re.Denials[0]
	if d.Kind != "file" || d.Exception != "RuleFileNotFoundError" || d.Rule != "" || d.Target != "/etc/shadow" ||
		d.Message != "Access to '/etc/shadow' must be accepted by a rule." {
		t.Errorf("denial = %+v", d)
	}
	if !strings.Contains(re.Traceback, "The above exception was the direct cause") {
		t.Errorf("traceback without its cause:\n%s", re.Traceback)
	}

	if v, err := sb.Call(ctx, "callmod:swallow_denial", "/etc/shadow"); err != nil || v != "swallowed" {
		t.Errorf("swallow_denial = %v, %v", v, err)
	}
}

// TestCallDenialOfAHost: under landlock, which cannot tell hosts apart, a
// net= rule naming hosts needs CapNetHosts accepted; the Python layer then
// allows one host and refuses the other on the same port, naming the rule.
func TestCallDenialOfAHost(t *testing.T) {
	l1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l1.Close()
	port := l1.Addr().(*net.TCPAddr).Port
	l2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.2:%d", port))
	if err != nil {
		t.Skip("cannot listen on 127.0.0.2:", err)
	}
	defer l2.Close()
	for _, l := range []net.Listener{l1, l2} {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	rules := fmt.Sprintf("net=ALLOW|tcp|127.0.0.1|%d|OUT\nnet=DENY|tcp|127.0.0.2|*|OUT\npython-import=socket, _socket, selectors, select, array\n", port)
	sb := callSandbox(t, "landlock", rules, pysandboxes.AcceptUnenforced(pysandboxes.CapNetHosts))
	ctx := context.Background()
	if v, err := sb.Call(ctx, "callmod:connect", "127.0.0.1", port); err != nil || v != fmt.Sprintf("connected to 127.0.0.1:%d", port) {
		t.Fatalf("connect to the allowed host = %v, %v", v, err)
	}
	_, err = sb.Call(ctx, "callmod:connect", "127.0.0.2", port)
	var re *pysandboxes.RemoteError
	if !errors.As(err, &re) || !re.Denied() {
		t.Fatalf("connect to the denied host = %v", err)
	}
	d := re.Denials[0]
	if d.Kind != "network" || d.Exception != "RuleSocketConnectionRefusedError" || d.Rule != "net=DENY|tcp|127.0.0.2|*|OUT" ||
		!strings.HasSuffix(d.Ref, ".py-sandboxes(4)") || !strings.Contains(re.Message, "DENIED by explicit rule") {
		t.Errorf("denial = %+v, message %q", d, re.Message)
	}
}
