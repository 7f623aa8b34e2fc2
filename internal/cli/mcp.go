package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/bytesize"
	pysbmcp "github.com/pysandboxes/pysandboxes/mcp"
)

// Exit code of pysandboxes mcp when serving failed (the address is taken...).
const ExitServeFailed = 1

// tokenEnv names the environment variable that may hold the bearer token.
const tokenEnv = "PYSANDBOXES_MCP_TOKEN"

type mcpOptions struct {
	commonOptions
	http      string
	tokenFile string
	origins   []string
	maxReq    uint64
	tools     pysbmcp.Options
	memory    uint64
	grace     time.Duration
}

func mcpCommand(o *mcpOptions) *command {
	size := func(p *uint64) func(string) error {
		return func(v string) (err error) { *p, err = bytesize.Parse(v); return err }
	}
	return &command{
		name:     "mcp",
		synopsis: "[OPTIONS] [--RULE=VALUE ...]",
		summary:  "serve sandboxed Python to MCP clients (stdio, or streamable HTTP)",
		about: `Serves the Model Context Protocol with two tools, each call run under the policy of a
rule file (default: the one found from the working directory) plus the rules given on
the command line:

  run_python   code, stdin, timeout_s: runs the code in a fresh sandboxed interpreter
               (python -c CODE under the OS provider and the Python layer); returns
               the exit code, stdout, stderr, and the sandbox's refusals, each with the
               rule that refused and the rule line that would allow it
  eval_python  source, names, profile, mode (eval|exec): evaluates the source under
               an eval profile; returns the value as JSON, or the violations with
               their rule lines, or the budget that interrupted it

A refusal is a tool result marked isError, never a protocol error. What the tools run
never reaches the server's standard output; their output, their time and the calls
that run at once are bounded.

By default the server speaks over standard input and output (an MCP client starts
it). With --http it serves streamable HTTP at http://ADDR/mcp, and answers readiness
probes at /healthz: on a loopback address (127.0.0.1:8080, [::1]:8080; a bare port
or :PORT means 127.0.0.1:PORT), or on any
other with a bearer token only (--token-file FILE, or the environment variable
` + tokenEnv + `; never on the command line). Requests whose Origin is not an
--allow-origin, whose Host is not a loopback name on a loopback address, or larger
than --max-request are refused. SIGTERM or SIGINT stops it: calls in flight have
--shutdown-grace to end, then are killed.
`,
		options: o.commonOpts(true,
			&option{name: "http", arg: "ADDR", help: "serve streamable HTTP on ADDR (HOST:PORT) instead of stdio",
				set: func(v string) error { o.http = v; return nil }},
			&option{name: "token-file", arg: "FILE", complete: valueFile,
				help: "the bearer token of HTTP requests, read from FILE (default: $" + tokenEnv + "); required off loopback",
				set:  func(v string) error { o.tokenFile = v; return nil }},
			&option{name: "allow-origin", arg: "ORIGIN", help: "a browser origin (https://host[:port]) allowed to call (repeatable)",
				set: func(v string) error { o.origins = append(o.origins, v); return nil }},
			&option{name: "max-request", arg: "SIZE", help: "the largest request (HTTP body, stdio message; default 4M)", set: size(&o.maxReq)},
			&option{name: "concurrency", arg: "N", help: "the calls that run at once (default 4); the others wait",
				set: func(v string) error {
					n, err := strconv.Atoi(v)
					if err != nil || n < 1 || n > 1024 {
						return errors.New("expected a whole number from 1 to 1024")
					}
					o.tools.MaxConcurrent = n
					return nil
				}},
			&option{name: "timeout", arg: "DURATION", help: "run_python's default and longest timeout, and an evaluation's longest (default 30s)",
				set: func(v string) (err error) { o.tools.Timeout, err = parseDuration(v); return err }},
			&option{name: "max-output", arg: "SIZE", help: "what a call may print, stdout and stderr together (default 1M)",
				set: func(v string) error {
					n, err := bytesize.Parse(v)
					o.tools.MaxOutput = int64(min(n, 1<<40))
					return err
				}},
			&option{name: "memory", arg: "SIZE", help: "address space of each program and evaluation (default 1G)", set: size(&o.memory)},
			&option{name: "dir", arg: "DIR", complete: valueDir, help: "run_python's working directory",
				set: func(v string) error { o.tools.Dir = v; return nil }},
			&option{name: "shutdown-grace", arg: "DURATION", help: "how long calls in flight may end after SIGTERM (default 10s)",
				set: func(v string) (err error) { o.grace, err = parseDuration(v); return err }},
		),
		rules: true,
		exits: []exitCode{
			{"0", "the server ended: the client closed standard input, or SIGTERM/SIGINT"},
			{"1", "serving failed (the address cannot be listened on, the token file cannot be read)"},
			{"2", "a bad command line (an unknown option or rule, a bad value, a non-loopback --http address without a token)"},
			{"125", "the sandbox could not start (bad rules, a policy no provider here enforces, a learn= rule, no rule file)"},
		},
	}
}

func mcpServe(ctx context.Context, args []string, env *Env) int {
	o := &mcpOptions{memory: 1 << 30, grace: 10 * time.Second}
	c := mcpCommand(o)
	p, code, ok := c.begin(args, env)
	if !ok {
		return code
	}
	switch {
	case len(p.operands) > 0:
		return usageFailure(env, c, usagef("unexpected argument %q (rules are given as --RULE=VALUE)", p.operands[0]))
	}
	if err := o.check(); err != nil {
		return usageFailure(env, c, err)
	}
	if o.http == "" && (o.tokenFile != "" || len(o.origins) > 0) {
		return usageFailure(env, c, usagef("--token-file and --allow-origin are options of --http"))
	}
	o.rules = p.rules
	const prog = "pysandboxes mcp"

	// The token, if any, is read before anything else and kept from the
	// policy's environment: no rule can hand it to the code the tools run.
	environ := env.environ()
	token := ""
	var kept []string
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, tokenEnv+"="); ok {
			token = v
			continue
		}
		kept = append(kept, kv)
	}
	os.Unsetenv(tokenEnv)
	if o.tokenFile != "" {
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			fmt.Fprintf(env.Stderr, "%s: --token-file: %v\n", prog, err)
			return ExitServeFailed
		}
		token = strings.TrimRight(string(b), "\r\n")
	}
	env2 := *env
	env2.Environ = kept

	logger, _ := newLogger(env.Stderr, prog, o.verbose)
	pol, err := o.loadPolicy(ctx, &env2, logger, "name one with --config FILE, or use --no-config with rules such as --python-import=json")
	if err != nil {
		fmt.Fprintf(env.Stderr, "%s: %v\n", prog, err)
		return ExitSandbox
	}
	if file, r := pol.Learn(); file != "" {
		fmt.Fprintf(env.Stderr, "%s: %s: '%s' asks for learning mode, which enforces nothing; "+
			"the server cannot learn (python-sb --learn and pysandboxes call --learn can): remove it to serve under the rules\n", prog, r.Ref, r.Raw)
		return ExitSandbox
	}
	sbOpts := o.sandboxOptions(logger,
		pysandboxes.WithLimits(pysandboxes.Limits{AddressSpace: o.memory}),
		pysandboxes.WithEval(pysandboxes.EvalConfig{Limits: pysandboxes.EvalLimits{Memory: o.memory}}),
		// What the workers write on their own descriptors goes to standard
		// error, never to standard output (the protocol, over stdio).
		pysandboxes.WithCall(pysandboxes.CallConfig{ProcessStdout: env.Stderr, ProcessStderr: env.Stderr}),
	)
	sb, err := pysandboxes.New(ctx, pol, sbOpts...)
	if err != nil {
		fmt.Fprintf(env.Stderr, "%s: %v\n", prog, err)
		return ExitSandbox
	}
	defer sb.Close()

	// One line per call with -v: a plain logger, whose lines are not kept to
	// be printed once (a long-running server would keep them all).
	callLog := slog.New(slog.DiscardHandler)
	if o.verbose {
		callLog = slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	o.tools.Logger = callLog
	o.tools.Started = func(pid int) { callLog.Debug("run_python started", "pid", pid) }
	version := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		version = bi.Main.Version
	}
	server := sdk.NewServer(&sdk.Implementation{Name: "pysandboxes", Title: "pysandboxes: sandboxed Python", Version: version}, &sdk.ServerOptions{
		Instructions: "run_python and eval_python run Python under a sandbox policy. A refusal names the rule line " +
			"that would allow it: only the operator can add it; rewrite the code within the policy instead.",
		Logger: callLog,
	})
	tools := pysbmcp.AddTools(server, sb, &o.tools)

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(env.Stderr, "%s: provider %s\n", prog, sb.Provider().Name())
	if o.http == "" {
		return serveStdio(ctx, env, server, tools, o)
	}
	return serveHTTP(ctx, env, c, server, tools, o, token, callLog)
}

// serveStdio serves one session over standard input and output. When standard
// output is the process's descriptor 1, the protocol gets a descriptor of its
// own and 1 becomes a copy of 2: nothing written to descriptor 1 afterwards,
// by this process or a child that inherits it, can reach the client.
func serveStdio(ctx context.Context, env *Env, server *sdk.Server, tools *pysbmcp.Tools, o *mcpOptions) int {
	const prog = "pysandboxes mcp"
	out := env.Stdout
	if f, ok := env.Stdout.(*os.File); ok && f == os.Stdout {
		fd, err := unix.FcntlInt(1, unix.F_DUPFD_CLOEXEC, 3)
		if err == nil {
			err = unix.Dup3(2, 1, 0)
		}
		if err != nil {
			fmt.Fprintf(env.Stderr, "%s: setting standard output apart: %v\n", prog, err)
			return ExitServeFailed
		}
		proto := os.NewFile(uintptr(fd), "protocol")
		defer proto.Close()
		out = proto
	}
	in := env.Stdin
	if in == nil {
		in = strings.NewReader("")
	}
	maxLine := int(min(o.maxReq, 1<<31))
	if maxLine == 0 {
		maxLine = pysbmcp.DefaultMaxRequestBytes
	}
	err := server.Run(ctx, &sdk.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}, MaxLineLength: maxLine})
	grace, cancel := context.WithTimeout(context.Background(), o.grace)
	defer cancel()
	tools.Shutdown(grace)
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) && !errors.Is(err, sdk.ErrConnectionClosed) {
		fmt.Fprintf(env.Stderr, "%s: %v\n", prog, err)
		return ExitServeFailed
	}
	return ExitOK
}

// httpAddr is the address --http ADDR listens on: loopback when ADDR names
// no host (8080, :8080), never every address by omission.
func httpAddr(addr string) string {
	if _, err := strconv.ParseUint(addr, 10, 16); err == nil {
		return net.JoinHostPort("127.0.0.1", addr)
	}
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "" {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// serveHTTP serves streamable HTTP until a signal, then shuts down gracefully:
// the health endpoint says so, the listener closes, the calls in flight have
// the grace period, the sessions are closed.
func serveHTTP(ctx context.Context, env *Env, c *command, server *sdk.Server, tools *pysbmcp.Tools, o *mcpOptions, token string, callLog *slog.Logger) int {
	const prog = "pysandboxes mcp"
	ln, err := net.Listen("tcp", httpAddr(o.http))
	if err != nil {
		fmt.Fprintf(env.Stderr, "%s: %v\n", prog, err)
		return ExitServeFailed
	}
	if token == "" && !pysbmcp.IsLoopback(ln.Addr()) {
		ln.Close()
		return usageFailure(env, c, usagef("--http %s listens beyond loopback (%s): give a bearer token with --token-file FILE or %s",
			o.http, ln.Addr(), tokenEnv))
	}
	h, err := pysbmcp.NewHTTPHandler(server, &pysbmcp.HTTPOptions{
		Token: token, AllowedOrigins: o.origins, MaxRequestBytes: int64(min(o.maxReq, 1<<40)), Logger: callLog,
	})
	if err != nil {
		ln.Close()
		return usageFailure(env, c, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(env.Stderr, prog+": http: ", 0),
	}
	auth := "no token (loopback only)"
	if token != "" {
		auth = "bearer token required"
	}
	fmt.Fprintf(env.Stderr, "%s: serving MCP on http://%s%s, health on %s (%s)\n", prog, ln.Addr(), pysbmcp.DefaultPath, pysbmcp.DefaultHealthPath, auth)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		fmt.Fprintf(env.Stderr, "%s: %v\n", prog, err)
		return ExitServeFailed
	case <-ctx.Done():
	}
	fmt.Fprintf(env.Stderr, "%s: shutting down (calls in flight have %v)\n", prog, o.grace)
	h.Drain()
	grace, cancel := context.WithTimeout(context.Background(), o.grace)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(grace) }()
	tools.Shutdown(grace)
	for ss := range server.Sessions() {
		ss.Close()
	}
	select {
	case <-shut:
	case <-grace.Done():
		srv.Close()
	}
	return ExitOK
}
