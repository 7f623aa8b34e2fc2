package mcp_test

import (
	"context"
	"log"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pysandboxes/pysandboxes"
	pysbmcp "github.com/pysandboxes/pysandboxes/mcp"
	"github.com/pysandboxes/pysandboxes/policy"
)

// An agent runtime adds the sandboxed tools to its own server, and serves it
// over stdio.
func ExampleAddTools() {
	ctx := context.Background()
	pol, err := policy.Load(ctx, ".py-sandboxes", nil)
	if err != nil {
		log.Fatal(err)
	}
	sb, err := pysandboxes.New(ctx, pol)
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Close()
	server := sdk.NewServer(&sdk.Implementation{Name: "agent", Version: "v1"}, nil)
	tools := pysbmcp.AddTools(server, sb, &pysbmcp.Options{MaxConcurrent: 8, Timeout: 20 * time.Second})
	defer tools.Close()
	if err := server.Run(ctx, &sdk.StdioTransport{}); err != nil {
		log.Print(err)
	}
}

// Over streamable HTTP, behind the checks a network needs.
func ExampleNewHTTPHandler() {
	server := sdk.NewServer(&sdk.Implementation{Name: "agent", Version: "v1"}, nil)
	h, err := pysbmcp.NewHTTPHandler(server, &pysbmcp.HTTPOptions{
		Token:          "a-token-of-at-least-16-bytes",
		AllowedOrigins: []string{"https://app.example.com"},
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = h // http.Server{Addr: "127.0.0.1:8080", Handler: h}
}
