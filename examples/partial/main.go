// Command partial is a Go service that runs one Python function in a sandbox
// (partial mode): the Go program keeps its privileges, the Python function
// fetch (fetch.py) runs in a sandboxed worker and may reach one host only.
//
// Two HTTP servers stand in for the outside world: "api" on 127.0.0.1 and
// "other" on 127.0.0.2 (both loopback addresses). The policy allows the first:
//
//	expose-ro=<this directory>
//	python-import=socket
//	net=ALLOW|tcp|127.0.0.1|<api port>|OUT
//
// The call to api returns its answer; the call to other comes back as a
// *pysandboxes.RemoteError that is a denial (errors.Is(err, pysandboxes.ErrDenied))
// naming the rule that refused it.
//
//	go run ./examples/partial
//	go run ./examples/partial -provider unshare
//
// When the chosen OS provider cannot filter by host (landlock filters TCP by
// port only), the example accepts that explicitly: the host part of the rule is
// then enforced by the Python layer alone, and New logs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
	"github.com/pysandboxes/pysandboxes/transport"
)

func main() {
	provider := flag.String("provider", "auto", "the OS provider (see pysandboxes probe)")
	python := flag.String("python", "", "the Python interpreter (default: python3, resolved)")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *provider, *python); err != nil {
		fmt.Fprintln(os.Stderr, "partial:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer, provider, python string) error {
	api, apiPort, err := serve("127.0.0.1", "hello from api")
	if err != nil {
		return err
	}
	defer api.Close()
	other, otherPort, err := serve("127.0.0.2", "hello from other")
	if err != nil {
		return err
	}
	defer other.Close()

	dir := sourceDir()
	pol, err := policy.NewBuilder().
		ExposeRO(dir).
		PythonImport("socket").
		NetRule(policy.Allow, policy.TCP, "127.0.0.1", policy.Ports(uint16(apiPort)), policy.Out).
		Build(ctx, nil)
	if err != nil {
		return err
	}
	opts := []pysandboxes.Option{
		pysandboxes.WithProvider(provider),
		pysandboxes.WithCall(pysandboxes.CallConfig{PythonPath: []string{dir}}),
		pysandboxes.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	}
	if python != "" {
		opts = append(opts, pysandboxes.WithPython(python))
	}
	sb, err := pysandboxes.New(ctx, pol, opts...)
	if onlyHostFiltering(err) {
		// Host filtering only: the Python layer enforces it; say so, explicitly.
		sb, err = pysandboxes.New(ctx, pol, append(opts, pysandboxes.AcceptUnenforced(pysandboxes.CapNetHosts))...)
	}
	if err != nil {
		return err
	}
	defer sb.Close()
	fmt.Fprintf(w, "provider: %s\n", sb.Provider().Name())

	res, err := sb.Call(ctx, "fetch:fetch", "127.0.0.1", apiPort)
	if err != nil {
		return fmt.Errorf("the allowed host: %w", err)
	}
	if d, ok := res.(transport.Dict); ok {
		m, _ := d.StringMap()
		fmt.Fprintf(w, "api (allowed): %s: %s\n", m["status"], m["body"])
	} else {
		return fmt.Errorf("unexpected result %#v", res)
	}

	_, err = sb.Call(ctx, "fetch:fetch", "127.0.0.2", otherPort)
	var re *pysandboxes.RemoteError
	switch {
	case err == nil:
		return errors.New("the other host was reached: the sandbox did not refuse")
	case errors.Is(err, pysandboxes.ErrDenied) && errors.As(err, &re):
		d := re.Denials[0]
		rule := d.Rule
		if rule == "" {
			rule = "DENIED by implicit default policy"
		}
		fmt.Fprintf(w, "other (denied): %s: %s [%s]\n", re.Class(), d.Target, rule)
	default:
		return fmt.Errorf("the other host failed, but not as a denial: %w", err)
	}
	return nil
}

// onlyHostFiltering reports a refusal of New whose only reason is that the OS
// layer cannot filter by host (for os-sandbox=auto: that some working provider
// lacks nothing else).
func onlyHostFiltering(err error) bool {
	only := func(missing []pysandboxes.Requirement) bool {
		for _, r := range missing {
			if r.Capability != pysandboxes.CapNetHosts {
				return false
			}
		}
		return len(missing) > 0
	}
	var ue *pysandboxes.UnenforcedError
	var ne *pysandboxes.NoProviderError
	switch {
	case errors.As(err, &ue):
		return only(ue.Missing)
	case errors.As(err, &ne):
		for _, v := range ne.Verdicts {
			if v.Probe == nil && only(v.Missing) {
				return true
			}
		}
	}
	return false
}

// serve starts an HTTP server on addr:0 answering body.
func serve(addr, body string) (*http.Server, int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		return nil, 0, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, body)
	})}
	go srv.Serve(ln)
	return srv, ln.Addr().(*net.TCPAddr).Port, nil
}

// sourceDir is the directory of this file, where fetch.py is.
func sourceDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		dir, _ := os.Getwd()
		return dir
	}
	return filepath.Dir(file)
}
