package mcp_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	pysbmcp "github.com/pysandboxes/pysandboxes/mcp"
)

const initRequest = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

// post sends an initialize request with the headers given (Host sets the
// request's host) and returns the status.
func post(t *testing.T, url, body string, hdr ...string) int {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
		} else {
			req.Header.Add(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestHTTPHandlerChecks: the token, the Origin (normalised as browsers send
// it), the Host of a loopback server, the size, the health endpoint and its
// drain, each refused with its own status before MCP sees the request.
func TestHTTPHandlerChecks(t *testing.T) {
	server := sdk.NewServer(&sdk.Implementation{Name: "test", Version: "v0"}, nil)
	const token = "0123456789abcdef-token"
	ready := error(nil)
	h, err := pysbmcp.NewHTTPHandler(server, &pysbmcp.HTTPOptions{
		Token: token, AllowedOrigins: []string{"HTTPS://App.Example.com:443"}, MaxRequestBytes: 4096,
		Ready: func() error { return ready },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	mcpURL := srv.URL + "/mcp"
	auth := "Bearer " + token
	cases := []struct {
		name string
		body string
		hdr  []string
		want int
	}{
		{"token", initRequest, []string{"Authorization", auth}, 200},
		{"scheme any case", initRequest, []string{"Authorization", "bearer " + token}, 200},
		{"no token", initRequest, nil, 401},
		{"wrong token", initRequest, []string{"Authorization", "Bearer " + token + "x"}, 401},
		{"token as basic", initRequest, []string{"Authorization", "Basic " + token}, 401},
		{"allowed origin", initRequest, []string{"Authorization", auth, "Origin", "https://app.example.com"}, 200},
		{"other origin", initRequest, []string{"Authorization", auth, "Origin", "https://evil.example"}, 403},
		{"origin null", initRequest, []string{"Authorization", auth, "Origin", "null"}, 403},
		{"origin of another port", initRequest, []string{"Authorization", auth, "Origin", "https://app.example.com:8443"}, 403},
		{"two origins", initRequest, []string{"Authorization", auth, "Origin", "https://app.example.com", "Origin", "https://evil.example"}, 403},
		{"rebound host", initRequest, []string{"Authorization", auth, "Host", "evil.example"}, 403},
		{"localhost", initRequest, []string{"Authorization", auth, "Host", "localhost"}, 200},
		{"too large", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"p":"` + strings.Repeat("x", 5000) + `"}}`, []string{"Authorization", auth}, 413},
	}
	for _, c := range cases {
		if got := post(t, mcpURL, c.body, c.hdr...); got != c.want {
			t.Errorf("%s: status %d, want %d", c.name, got, c.want)
		}
	}
	if got := post(t, srv.URL+"/other", initRequest, "Authorization", auth); got != 404 {
		t.Errorf("another path: %d, want 404", got)
	}

	health := func() int {
		resp, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := health(); got != 200 {
		t.Errorf("health: %d, want 200 (no token needed)", got)
	}
	ready = errors.New("warming up")
	if got := health(); got != 503 {
		t.Errorf("health while not ready: %d, want 503", got)
	}
	ready = nil
	h.Drain()
	if got := health(); got != 503 {
		t.Errorf("health while draining: %d, want 503", got)
	}
}

// TestHTTPHandlerOptions: options that cannot be served safely are errors.
func TestHTTPHandlerOptions(t *testing.T) {
	server := sdk.NewServer(&sdk.Implementation{Name: "test", Version: "v0"}, nil)
	for _, o := range []pysbmcp.HTTPOptions{
		{Token: "short"},
		{Token: "0123456789abcdef 0123"},
		{AllowedOrigins: []string{"app.example.com"}},
		{AllowedOrigins: []string{"https://app.example.com/path"}},
		{AllowedOrigins: []string{"ftp://app.example.com"}},
		{AllowedOrigins: []string{"https://user@app.example.com"}},
	} {
		if _, err := pysbmcp.NewHTTPHandler(server, &o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}
