// Package mcp gives any MCP client sandboxed Python: the tools run_python and
// eval_python, added to a server of the official Go SDK
// (github.com/modelcontextprotocol/go-sdk/mcp), every call run under one
// pysandboxes policy. The command `pysandboxes mcp` serves them over stdio or
// streamable HTTP; an agent runtime adds the same tools to its own server:
//
//	sb, err := pysandboxes.New(ctx, pol)
//	server := mcp.NewServer(&mcp.Implementation{Name: "agent"}, nil)
//	tools := pysbmcp.AddTools(server, sb, &pysbmcp.Options{MaxConcurrent: 8})
//	defer tools.Close()
//	err = server.Run(ctx, &mcp.StdioTransport{})
//
// (this package is imported as pysbmcp beside the SDK's mcp).
//
// # The tools
//
// run_python (code, optional stdin and timeout_s) runs the code in a fresh
// interpreter, as Sandbox.Python runs "python -c CODE": under the OS provider
// and the Python layer, which refuses what the policy does not grant with
// exceptions that name the rule. The result holds the exit code, stdout,
// stderr, and every refusal the program met (Refusal: the rule that refused, or
// the implicit default policy, and the rule line that would allow it). A
// program that does not exit with status 0 is a tool error (isError): an
// uncaught refusal, an exception, a timeout, too much output.
//
// eval_python (source, optional names, profile, mode eval or exec) evaluates
// the source under the policy's eval profile (Sandbox.Eval and Sandbox.Exec):
// the value comes back as JSON (transport.JSON); a source outside the profile
// is a tool error listing each violation with the rule line that would allow
// it; an evaluation a budget stopped is a tool error naming the budget as a
// rule line (eval-max-iterations=100000); an exception, a tool error with its
// class, message, traceback and the sandbox's refusals.
//
// Both declare their input schema (arguments are validated before anything
// runs) and their output schema (the structured content; the text content is
// the same JSON on success, a report for the model on failure). A refusal, a
// bad argument, a timeout are tool results with isError, never protocol
// errors: the session goes on.
//
// # Bounds
//
// What a call prints is captured, never written to the server's own standard
// output (which stdio uses for the protocol), and bounded (Options.MaxOutput);
// the code, stdin and source are bounded (Options.MaxSource); every call has a
// timeout (Options.Timeout). The calls that run at once are bounded
// (Options.MaxConcurrent); the others wait for a slot. A call's context ends
// its processes: a cancelled request (notifications/cancelled), a closed
// session, Tools.Shutdown past its grace, each kills what the call started,
// and the call returns once its processes are reaped.
//
// # HTTP
//
// NewHTTPHandler serves a server over streamable HTTP with the checks a server
// reachable from a network needs: a bearer token (Token), the Origin header
// against DNS rebinding (AllowedOrigins; a request from a browser page of any
// other origin is refused), the Host header on a loopback address, request
// bodies bounded, and a health endpoint for readiness probes.
//
// # Confining someone else's server
//
// The other direction, running a third-party MCP server confined, needs no
// code: `pysandboxes run --expose-ro=DIR -- node server.js DIR` (or python-sb
// for a Python server) is the command an MCP client starts. CommandTransport
// does the same from Go, for a client of the SDK. See docs/mcp.md.
package mcp
