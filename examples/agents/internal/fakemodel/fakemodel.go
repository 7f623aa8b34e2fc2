// Package fakemodel is a scripted model server for the agent samples' tests: an
// httptest server that answers in a vendor's real wire format (the OpenAI Chat
// Completions API, the Anthropic Messages API) with the tool calls of a script,
// one step per request, and records the tool results the client sends back, so
// that a test can assert what reached the model.
//
// Each request is checked against the step before it: the client must declare
// the tools, send the key it was given, and answer the tool call the server
// made, by its id. A request that breaks the script is answered with an error
// in the vendor's format, and recorded in Errors.
package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Key is the API key the clients in the tests send.
const Key = "test-key"

// Step is one answer of the model: a tool call (Tool and its JSON Args), or,
// when Tool is "", the final answer Text.
type Step struct {
	Tool string
	Args string
	Text string
}

// ToolResult is a tool result the client sent back to the model.
type ToolResult struct {
	// ID is the id of the tool call it answers.
	ID string
	// Content is its text.
	Content string
	// IsError is the client's error mark (Anthropic's is_error; the Chat
	// Completions API has none).
	IsError bool
}

// Server is a running fake model.
type Server struct {
	*httptest.Server

	mu      sync.Mutex
	script  []Step
	next    int
	lastID  string
	results []ToolResult
	errs    []string
}

// Results returns the tool results received, in order.
func (s *Server) Results() []ToolResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ToolResult(nil), s.results...)
}

// Errors returns the requests that broke the script, as messages.
func (s *Server) Errors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.errs...)
}

// Done reports whether every step of the script was served.
func (s *Server) Done() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next == len(s.script)
}

// Check fails t for each request that broke the script, and when the script
// was not played to its end.
func (s *Server) Check(t testing.TB) {
	t.Helper()
	for _, e := range s.Errors() {
		t.Errorf("fake model: %s", e)
	}
	if !s.Done() {
		s.mu.Lock()
		defer s.mu.Unlock()
		t.Errorf("fake model: %d of %d steps served", s.next, len(s.script))
	}
}

// handler is the vendor-specific part: it decodes a request into the tools it
// declares and the tool results it carries, and encodes a step.
type handler interface {
	path() string
	auth(r *http.Request) bool
	decode(body []byte) (tools []string, results []ToolResult, err error)
	encode(step Step, id string, n int) any
	fail(status int, msg string) any
}

func start(t testing.TB, h handler, script []Step) *Server {
	s := &Server{script: script}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, v := s.serve(h, r)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if err := json.NewEncoder(w).Encode(v); err != nil {
			t.Errorf("fake model: writing the answer: %v", err)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *Server) serve(h handler, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	bad := func(status int, format string, args ...any) (int, any) {
		msg := fmt.Sprintf("request %d: %s %s: ", s.next+1, r.Method, r.URL.Path) + fmt.Sprintf(format, args...)
		s.errs = append(s.errs, msg)
		return status, h.fail(status, msg)
	}
	if r.Method != http.MethodPost || r.URL.Path != h.path() {
		return bad(http.StatusNotFound, "not %s", h.path())
	}
	if !h.auth(r) {
		return bad(http.StatusUnauthorized, "the key %q was not sent", Key)
	}
	var body json.RawMessage
	if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20)).Decode(&body); err != nil {
		return bad(http.StatusBadRequest, "body: %v", err)
	}
	tools, results, err := h.decode(body)
	if err != nil {
		return bad(http.StatusBadRequest, "body: %v", err)
	}
	if s.next >= len(s.script) {
		return bad(http.StatusBadRequest, "past the end of the script (%d steps)", len(s.script))
	}
	step := s.script[s.next]
	if step.Tool != "" && !contains(tools, step.Tool) {
		return bad(http.StatusBadRequest, "tool %q not declared (declared: %v)", step.Tool, tools)
	}
	// The client must answer the previous tool call, and only it.
	switch {
	case s.lastID == "" && len(results) != 0:
		return bad(http.StatusBadRequest, "%d tool results before any tool call", len(results))
	case s.lastID != "" && (len(results) == 0 || results[len(results)-1].ID != s.lastID):
		return bad(http.StatusBadRequest, "the last message does not answer the tool call %s: %+v", s.lastID, results)
	case s.lastID != "":
		s.results = append(s.results, results[len(results)-1])
	}
	s.next++
	s.lastID = ""
	id := ""
	if step.Tool != "" {
		id = fmt.Sprintf("call_%d", s.next)
		s.lastID = id
	}
	return http.StatusOK, h.encode(step, id, s.next)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// text reads a content that is a string or an array of text parts.
func text(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content: %w", err)
	}
	out := ""
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content part of type %q", p.Type)
		}
		out += p.Text
	}
	return out, nil
}
